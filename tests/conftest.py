"""Shared models for the tests: the tutorials' small examples and torchvision models
built with ``weights=None`` (nothing is ever downloaded)."""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent / "e2e"))
import labdriver  # noqa: E402  (after the path is set)


class MyModule(nn.Module):
    """The torch.fx tutorial's example: topk(sum(linear(x + linear.weight).relu(), dim=-1), 3)."""

    def __init__(self):
        super().__init__()
        self.param = nn.Parameter(torch.rand(3, 4))
        self.linear = nn.Linear(4, 5)

    def forward(self, x):
        return torch.topk(torch.sum(self.linear(x + self.linear.weight).relu(), dim=-1), 3)


@functools.lru_cache(maxsize=None)
def _torchvision(name: str) -> nn.Module:
    import torchvision

    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None).eval()


@pytest.fixture
def my_module() -> nn.Module:
    torch.manual_seed(0)
    return MyModule()


@pytest.fixture(scope="session")
def resnet18() -> nn.Module:
    """Shared across tests: tests must never mutate it (fxviz promises not to)."""
    return _torchvision("resnet18")


@pytest.fixture
def small_image() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(1, 3, 64, 64)


@pytest.fixture(scope="session")
def chromium():
    """The one Playwright driver and Debian Chromium of the run: Playwright's sync API
    allows one driver per process, and both the harness and the JupyterLab tests need one."""
    if not Path(labdriver.CHROMIUM).exists():
        pytest.skip(f"browser tests need {labdriver.CHROMIUM} (`make system-test` installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = labdriver.launch_chromium(p)
        try:
            yield browser
        finally:
            browser.close()

"""Shared models for the tests: the tutorials' small examples and torchvision models
built with ``weights=None`` (nothing is ever downloaded)."""
from __future__ import annotations

import functools

import pytest
import torch
from torch import nn


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

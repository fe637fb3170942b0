"""Shared models for the tests: the tutorials' small examples and torchvision models
built with ``weights=None`` (nothing is ever downloaded)."""
from __future__ import annotations

import functools
import json
import shutil
import subprocess
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


class MaskedAttention(nn.Module):
    """Self-attention under a mask (CPU's flash-attention kernel); ``loss``: returns the
    mean square of its output, a loss to train on."""

    def __init__(self, loss: bool = False):
        super().__init__()
        self.qkv, self.loss = nn.Linear(16, 48), loss

    def forward(self, x, mask):
        q, k, v = self.qkv(x).view(1, 8, 3, 2, 8).permute(2, 0, 3, 1, 4)
        out = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out.pow(2).mean() if self.loss else out


@pytest.fixture
def masked_attention() -> tuple[type[MaskedAttention], tuple[torch.Tensor, torch.Tensor]]:
    """The class, and its inputs: 8 tokens of width 16 and their causal mask."""
    torch.manual_seed(0)
    mask = torch.zeros(8, 8).masked_fill(torch.ones(8, 8, dtype=torch.bool).triu(1), float("-inf"))
    return MaskedAttention, (torch.randn(1, 8, 16), mask)


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


@pytest.fixture
def decode_in_node(tmp_path):
    """``decode(module, function, payload)``: what ``function`` exported by the front-end
    module ``widgets/<module>`` returns for ``payload`` (as JSON), run under node: how
    the browser reads what the kernel sends. Skips where node is not installed."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    widgets = Path(__file__).resolve().parents[1] / "widgets"

    def decode(module: str, function: str, payload):
        data = tmp_path / "sent.json"
        data.write_text(json.dumps(payload))
        script = (f"import {{ {function} }} from {json.dumps((widgets / module).as_uri())};"
                  f"import {{ readFileSync }} from 'node:fs';"
                  f"console.log(JSON.stringify({function}(JSON.parse(readFileSync({json.dumps(str(data))})))));")
        out = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    return decode

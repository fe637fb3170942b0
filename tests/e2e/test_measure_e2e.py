"""Measurements as a person sees them, in JupyterLab in headless Chromium.

A make_fx training step (a function returning gradients) in the Explorer: its badge
ends in a verdict within a bounded time (it used to read "checking…" forever), and the
Timing tab's chart follows the theme: in the dark theme its text is light and nothing in
it is painted white. Screenshots: test-artifacts/e2e-training-timing-{light,dark}.png.
"""
from __future__ import annotations

import pytest

from labdriver import DARK, LIGHT, assert_no_js_error, open_notebook, run_all, set_theme, shoot_themes

pytestmark = pytest.mark.e2e

TRAINING_NB = [
    """\
import torch
from torch import nn
import fxviz

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

def train_step(x):
    return torch.autograd.grad(model(x).square().mean(), list(model.parameters()))

session = fxviz.Session(train_step, (torch.randn(8, 16),), tracer="make_fx", module=model)
fxviz.explore(session, profile_kwargs={"budget_s": 0.5})""",
]

WHITE_PAINT = """svg => [...svg.querySelectorAll('*')].filter(e => {
  const s = getComputedStyle(e);
  return [s.fill, s.backgroundColor].some(c => c === 'rgb(255, 255, 255)' || c === 'white');
}).length"""


def test_training_step_badge_ends_and_the_timing_chart_follows_the_theme(lab, page):
    name = lab.write_notebook("e2e_training.ipynb", TRAINING_NB)
    open_notebook(page, lab, name)
    run_all(page, timeout=180)
    explorer = page.locator(".fxviz-explorer")
    # The badge's span is replaced when the verdict comes: wait for a verdict span, not on
    # a handle to the pending one (which would stay "checking…" once detached).
    badge = explorer.locator(".fxviz-header .fxviz-badge span:not(.fxviz-badge-pending)").first
    badge.wait_for(timeout=180_000)
    assert badge.inner_text().startswith("match"), badge.inner_text()
    assert "fxviz-badge-match" in badge.get_attribute("class")

    explorer.locator(".fxviz-tabs .lm-TabBar-tab", has_text="Timing").click()
    chart = explorer.locator(".fxviz-timing-chart svg")
    chart.wait_for(timeout=60_000)
    assert_no_js_error(page)
    panel_width = explorer.locator(".fxviz-timing-panel").evaluate("e => e.clientWidth")
    assert chart.evaluate("e => e.getBoundingClientRect().width") <= panel_width  # scaled to fit
    try:
        set_theme(page, DARK)
        text_colour = chart.locator("text").first.evaluate("e => getComputedStyle(e).fill")
        channels = [float(v) for v in text_colour[text_colour.index("(") + 1:-1].split(",")[:3]]
        assert min(channels) > 150, f"chart text is {text_colour} in the dark theme"
        assert chart.evaluate(WHITE_PAINT) == 0
    finally:
        set_theme(page, LIGHT)
    paths = shoot_themes(page, explorer.locator(".fxviz-timing-panel"), "e2e-training-timing")
    assert all(p.stat().st_size > 0 for p in paths)

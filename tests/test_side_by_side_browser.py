"""The Explorer's side-by-side view in headless Chromium, without Jupyter: both graph
views (tests/harness/side_by_side.html) over fake models, this test playing the kernel
for a real Explorer's panel after fuse_conv_bn. The marks are drawn in their colours,
each legend names its side's marks, and a node clicked on one side is selected on the
other through its counterpart. Screenshots at 1600x1000 go to
test-artifacts/side_by_side_{light,dark}.png."""
from __future__ import annotations

import pytest
import torch
from torch import nn

pytest.importorskip("playwright.sync_api")

from fxviz.draw.colour_modes import MARK_COLORS  # noqa: E402
from fxviz.widgets import explore  # noqa: E402
from test_graph_view import from_browser  # noqa: E402
from test_graph_view_browser import ARTIFACTS, pytestmark, server  # noqa: E402, F401  (fixture)

KEYS = ["svg", "elements", "legend", "nodes", "times", "selected", "collapsed", "color_mode", "color_modes", "status"]


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU())
        self.layer1 = Block(8)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        return self.head(self.layer1(self.stem(x)).mean((2, 3)))


def rgb(hex_color: str) -> str:
    return "rgb({}, {}, {})".format(*(int(hex_color[i:i + 2], 16) for i in (1, 3, 5)))


def test_marks_legends_and_selection_across_the_two_views(chromium, server):  # noqa: F811
    torch.manual_seed(0)
    explorer = explore(Net().eval(), torch.randn(1, 3, 16, 16), profile="off")
    explorer.session.apply("fuse_conv_bn")
    explorer.timing.side_by_side_button.click()
    panel = explorer.side_by_side
    views = panel.views
    outbox: list[tuple[str, dict]] = []  # what the kernel sends the page, in order
    for side, view in views.items():
        view._send = lambda msg, buffers=None, side=side: outbox.append((side, msg["state"]))
    context = chromium.new_context(viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/tests/harness/side_by_side.html")
    page.wait_for_selector("body[data-ready]", state="attached")
    page.evaluate("([panel, states]) => harness.mount(panel, states)", [
        {"summary": panel.summary.value, "labels": {side: label.value for side, label in panel.labels.items()}},
        {side: view.get_state(KEYS) for side, view in views.items()}])
    for side in views:
        page.wait_for_selector(f"#view-{side} .fxviz-gv-canvas svg")

    def fill(side: str, node: str) -> str:
        return page.eval_on_selector(f'#view-{side} [id="fx-{node}"] path', "p => getComputedStyle(p).fill")

    def click(side: str, node: str) -> None:
        """A click on a node; its save delivered to Python, Python's answers to the page."""
        page.click(f'#view-{side} [id="fx-{node}"]')
        for s, states in page.evaluate("harness.takeSaved()").items():
            for state in states:
                from_browser(views[s], **state)
        for s, state in outbox:
            page.evaluate("([s, state]) => harness.models[s].fromPython(state)", [s, state])
        outbox.clear()

    def selected(side: str) -> list[str]:
        return page.eval_on_selector_all(f"#view-{side} .fxviz-selected", "es => es.map(e => e.id)")

    assert fill("a", "stem_1") == rgb(MARK_COLORS["removed"])  # the stem's BatchNorm, absorbed
    assert fill("a", "stem_0") == fill("b", "stem_0") == rgb(MARK_COLORS["changed"])  # its conv, weights folded
    assert fill("b", "head") == rgb(MARK_COLORS["unchanged"])
    assert page.locator("#view-b [id='fx-stem_1']").count() == 0
    legends = {side: page.eval_on_selector_all(f"#view-{side} .fxviz-gv-legend-label", "es => es.map(e => e.textContent)")
               for side in views}
    assert [text.split(" ")[0] for text in legends["a"]] == ["removed", "changed", "unchanged"]
    assert [text.split(" ")[0] for text in legends["b"]] == ["changed", "unchanged"]
    assert page.text_content("#summary") == "fuse_conv_bn: 3 changed, 3 removed, 0 added"

    click("a", "layer1_bn1")  # a BatchNorm that is gone: its conv is selected after the pass
    assert selected("a") == ["fx-layer1_bn1"] and selected("b") == ["fx-layer1_conv1"]
    assert explorer.graph.selected == "layer1_conv1"
    click("b", "stem_0")
    assert selected("a") == selected("b") == ["fx-stem_0"]

    assert page.text_content("#view-a .fxviz-gv-legend-title") == "diff of the two steps"
    page.mouse.move(0, 0)  # no tooltip over the drawings
    for theme in ("light", "dark"):
        page.evaluate("t => harness.setTheme(t)", theme)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"side_by_side_{theme}.png"))
    context.close()
    explorer.close()
    assert errors == []

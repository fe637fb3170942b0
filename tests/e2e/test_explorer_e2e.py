"""The Explorer as a person uses it, in JupyterLab in headless Chromium.

`fxviz.explore(resnet18, x)` (1x3x64x64, default background profiling) runs in a
notebook; the test clicks a BatchNorm node (the details name BatchNorm2d, the code view
marks its line), applies fuse_conv_bn from the Passes tab (the BatchNorm nodes leave the
SVG, the graph has 20 nodes fewer, the code view shrinks, the badge says the outputs
match), undoes it (all of it comes back), and saves light and dark screenshots to
test-artifacts/. The `page` fixture fails it if the page shows "Click to show javascript
error". CSS classes: the docstring of widgets/explorer.py.
"""
from __future__ import annotations

import re

import pytest

from labdriver import action_done, assert_no_js_error, kernel_json, open_notebook, run_all, shoot_themes

pytestmark = pytest.mark.e2e

RESNET18_BATCHNORMS = 20  # one per conv; fuse_conv_bn folds each into its conv

EXPLORER_NB = [
    """\
import torch, torchvision
import fxviz

torch.manual_seed(0)
resnet18 = torchvision.models.resnet18(weights=None).eval()
x = torch.randn(1, 3, 64, 64)
fxviz.explore(resnet18, x)""",
]


def _batchnorm_nodes(explorer) -> list[str]:
    """Ids of the FX nodes drawn in the SVG whose label says BatchNorm2d."""
    return explorer.locator(".fxviz-graph g.node[id^='fx-']").evaluate_all(
        "els => els.filter(e => e.textContent.includes('BatchNorm2d')).map(e => e.id)")


def _node_count(explorer) -> int:
    """The graph view's status line: "71 nodes · step 0"."""
    status = explorer.locator(".fxviz-gv-status").inner_text()
    found = re.search(r"(\d+) nodes", status)
    assert found, f"no node count in the graph view's status line {status!r}"
    return int(found.group(1))


def _open_tab(explorer, title: str) -> None:
    explorer.locator(".fxviz-tabs .lm-TabBar-tab", has_text=title).click()
    explorer.locator(".fxviz-tabs .lm-TabBar-tab.lm-mod-current", has_text=title).wait_for()


def _code_lines(explorer) -> list[str]:
    """The code view's visible lines (the Code tab must be open)."""
    code = explorer.locator(".fxviz-code")
    code.locator("pre").wait_for()
    return [line for line in code.inner_text().splitlines() if line.strip()]


def _wait_step(explorer, text: str) -> None:
    explorer.locator(".fxviz-step", has_text=text).wait_for()


def test_fuse_conv_bn_apply_and_undo(lab, page):
    name = lab.write_notebook("e2e_explorer.ipynb", EXPLORER_NB)
    open_notebook(page, lab, name)
    run_all(page, timeout=180)

    explorer = page.locator(".fxviz-explorer")
    bn1 = explorer.locator(".fxviz-graph g.node#fx-bn1")
    bn1.wait_for(timeout=60_000)
    _wait_step(explorer, "step 0 of 0")
    assert_no_js_error(page)
    nodes_before = _node_count(explorer)
    batchnorms_before = _batchnorm_nodes(explorer)
    assert "fx-bn1" in batchnorms_before, batchnorms_before

    # Select a BatchNorm node: the details say what it is, the code view marks its line.
    bn1.click()
    explorer.locator(".fxviz-graph g.node#fx-bn1.fxviz-selected").wait_for()
    _open_tab(explorer, "Details")
    details = explorer.locator(".fxviz-details")
    details.get_by_text("BatchNorm2d").wait_for()
    assert "bn1" in details.inner_text()
    _open_tab(explorer, "Code")
    code_before = _code_lines(explorer)
    assert any("self.bn1(" in line for line in code_before), code_before[:5]
    marked = explorer.locator(".fxviz-code .hll")
    marked.wait_for()
    marked_line = marked.inner_text().strip()  # checked last: the rest of the flow still runs
    explorer.locator(".fxviz-gv-btn[data-action='selection']").click()  # zoom to bn1, as a person would
    # Times arrive from the background profile apart from the rows: bn1's row (time is its 10th cell) and tooltip get its time.
    explorer.locator(".fxviz-node-table tr.fxviz-tv-selected td:nth-child(10)").filter(
        has_text=re.compile(r"\d")).wait_for(timeout=120_000)
    shoot_themes(page, explorer, "e2e-explorer-bn1-selected")
    bn1.hover()
    explorer.locator(".fxviz-gv-tip", has_text=re.compile(r"time[\d.]+ µs \([\d.]+ %\)")).wait_for()
    page.mouse.move(1, 1)

    # Apply fuse_conv_bn from the Passes tab.
    _open_tab(explorer, "Passes")
    explorer.locator(".fxviz-pass-select select").select_option(label="fuse_conv_bn")
    explorer.locator("button.fxviz-apply").click()
    _wait_step(explorer, "step 1 of 1 · fuse_conv_bn")
    bn1.wait_for(state="detached")
    assert _batchnorm_nodes(explorer) == []
    explorer.locator(".fxviz-gv-status", has_text=f"{nodes_before - RESNET18_BATCHNORMS} nodes").wait_for()
    header_badge = explorer.locator(".fxviz-header .fxviz-badge")
    # The check runs in the background after the redraw: "checking…" first, then the verdict.
    header_badge.locator(".fxviz-badge-match").wait_for(timeout=120_000)
    assert header_badge.inner_text().strip() == "match"
    assert "outputs match" in header_badge.locator(".fxviz-badge-match").get_attribute("title")
    history = explorer.locator(".fxviz-history .fxviz-history-step")
    assert history.count() == 2
    assert explorer.locator(".fxviz-history .fxviz-badge-mismatch").count() == 0
    assert explorer.locator(".fxviz-error").inner_text().strip() == ""
    _open_tab(explorer, "Code")
    code_fused = _code_lines(explorer)
    assert len(code_fused) < len(code_before), (len(code_fused), len(code_before))
    assert not any("bn" in line for line in code_fused), [ln for ln in code_fused if "bn" in ln]
    assert_no_js_error(page)
    explorer.locator(".fxviz-graph g.node#fx-conv1").click()  # conv1 now holds bn1's scale and shift
    explorer.locator(".fxviz-graph g.node#fx-conv1.fxviz-selected").wait_for()
    explorer.locator(".fxviz-gv-btn[data-action='selection']").click()
    shoot_themes(page, explorer, "e2e-explorer-fused")

    # Undo: the BatchNorm nodes and the longer code come back; redo is offered.
    explorer.locator("button.fxviz-undo").click()
    _wait_step(explorer, "step 0 of 1")
    action_done(explorer)  # then the buttons say what the session can do
    bn1.wait_for()
    explorer.locator(".fxviz-gv-status", has_text=f"{nodes_before} nodes").wait_for()
    assert sorted(_batchnorm_nodes(explorer)) == sorted(batchnorms_before)
    assert _code_lines(explorer) == code_before
    assert explorer.locator("button.fxviz-redo").is_enabled()
    assert explorer.locator("button.fxviz-undo").is_disabled()
    assert_no_js_error(page)

    # The code view marks the selected node's line (deferred from above).
    assert marked_line.startswith("bn1 = self.bn1("), f"the code view marks {marked_line!r} for bn1"


LARGE_NB = [
    """\
import torch
from torch import nn
import fxviz

class Chain(nn.Module):
    def forward(self, x):
        h = x
        for i in range(24):
            h = torch.tanh(h) if i % 2 else torch.sigmoid(h)
        return h + x

class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*[Chain() for _ in range(120)])

    def forward(self, x):
        return self.blocks(x)

explorer = fxviz.explore(Stack(), torch.randn(2, 4))
pending_in_cell = explorer.table.pending is not None  # a large graph: rows follow the cell
explorer""",
]


def test_a_large_graph_draws_first_then_fills_its_table_and_search(lab, page):
    """Over 2,000 nodes the node table and the view's records reach the page after the
    cell is done (widgets/_busy.py, after_cell): they must still arrive, in a real kernel, and
    search must find a node hidden in a collapsed box and reveal it."""
    open_notebook(page, lab, lab.write_notebook("e2e_large.ipynb", LARGE_NB))
    run_all(page, timeout=180)
    explorer = page.locator(".fxviz-explorer")
    explorer.locator(".fxviz-graph svg g[id^='fxco-']").first.wait_for(timeout=60_000)  # collapsed boxes drawn
    kernel = kernel_json(page, "import json; print(json.dumps([pending_in_cell, len(explorer.table.data), "
                               "len(explorer.graph.nodes), len(explorer.session.current.graph)]))")
    pending_in_cell, rows, records, nodes = kernel
    assert pending_in_cell and nodes > 2000 and rows == records == nodes, kernel
    explorer.locator(".fxviz-node-table tr.fxviz-tv-row").first.wait_for()
    assert explorer.locator(".fxviz-node-table tr.fxviz-tv-row").first.inner_text().startswith("0")
    hidden = "tanh_1400"
    assert explorer.locator(f".fxviz-graph g.node#fx-{hidden}").count() == 0
    search = explorer.locator(".fxviz-gv-search")
    search.fill(hidden)
    search.press("Enter")
    explorer.locator(f".fxviz-graph g.node#fx-{hidden}.fxviz-selected").wait_for(timeout=30_000)
    explorer.locator(".fxviz-details", has_text=hidden).wait_for()
    assert_no_js_error(page)
    shoot_themes(page, explorer, "e2e-explorer-large")

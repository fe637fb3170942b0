"""Journey (6) of issue 11: an untraceable model shows a short error in the cell.

In JupyterLab at the default size (1600x1000) a user calls ``fxviz.explore`` on models
defined in the cell: one that no capture method can open (it fails on its own inputs),
and one with a branch on a tensor value in its top-level forward, forced to the symbolic
tracer with ``fallback=True`` (which cannot help there). What the cell shows must be one
compact message: it names ``explore(`` as called, the failing line of the cell, advice,
and no chained traceback or torch frames. Screenshots:
test-artifacts/e2e-journey-error-{light,dark,fallback}.png.

Then a model that opens, and a pass of the user's that fails at one node (its ReLU):
applied from the Passes tab, the Explorer selects that node in the graph and the table
and its error line names it. Screenshots: test-artifacts/e2e-journey-error-pass-node-{light,dark}.png.
"""
from __future__ import annotations

import pytest

from labdriver import JS_ERROR_TEXT, assert_no_js_error, open_notebook, output_area, shoot, shoot_themes

pytestmark = pytest.mark.e2e

MAX_OUTPUT_PX = 300  # three or four lines of message; the old chained traceback was 1,365 px

UNRUNNABLE = """\
import torch
from torch import nn
import fxviz

class Projection(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) @ torch.ones(5, 5)  # wrong shapes: nothing can open this

fxviz.explore(Projection(), torch.randn(2, 4))"""

BRANCHY = """\
class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:  # a branch on a tensor value
            return y * 2
        return y

fxviz.explore(Gate(), torch.randn(2, 4), tracer="symbolic", fallback=True)"""

PASS_FAILS_AT_A_NODE = """\
class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(torch.relu(self.bn(self.conv(x))).mean((2, 3)))

@fxviz.passes.register(name="no_relu")
def no_relu(gm):
    \"\"\"Refuses graphs with a ReLU (a pass that fails at a node).\"\"\"
    for node in gm.graph.nodes:
        if node.target is torch.relu:
            raise NotImplementedError("this pass cannot rewrite ReLU")

fxviz.explore(Small().eval(), torch.randn(1, 3, 8, 8), profile="off")"""

# Run one cell and wait for it; JupyterLab's run-all would stop at the first error.
RUN_CELL = """async (i) => {
  const app = window.jupyterapp;
  app.shell.currentWidget.content.activeCellIndex = i;
  return await app.commands.execute('notebook:run-cell');
}"""


def _run_cell(page, index: int):
    page.evaluate(RUN_CELL, index)
    out = output_area(page, index)
    out.locator(".jp-OutputArea-output").first.wait_for(timeout=120_000)
    return out


def _assert_short_error(out, cell: int, line: int, code: str) -> str:
    text = out.inner_text()
    assert "TraceError" in text and "explore(" in text, text
    # The cell's own line, named as IPython names cells (not its temporary file).
    assert f"at Cell In[{cell}], line {line}: {code}" in text and "ipykernel_" not in text, text
    assert "What to do:" in text, text
    assert "Traceback (most recent call last)" not in text, text
    assert "site-packages/torch" not in text and "fake_tensor" not in text, text
    height = out.evaluate("e => e.getBoundingClientRect().height")
    assert height < MAX_OUTPUT_PX, f"the error takes {height:.0f} px:\n{text}"
    overflow = out.locator("pre").evaluate_all("ps => ps.map(p => p.scrollWidth - p.clientWidth)")
    assert overflow and max(overflow) <= 1, f"the message runs past the right edge by {overflow} px"
    return text


def test_an_untraceable_model_shows_a_short_error(desk, lab):
    name = lab.write_notebook("e2e_errors.ipynb", [UNRUNNABLE, BRANCHY, PASS_FAILS_AT_A_NODE])
    open_notebook(desk, lab, name)

    out = _run_cell(desk, 0)
    text = _assert_short_error(out, 1, 11, "return self.lin(x) @ torch.ones(5, 5)")
    assert "explore(...): Projection itself fails on the example inputs" in text, text
    assert "mat1 and mat2 shapes cannot be multiplied" in text, text
    paths = shoot_themes(desk, out, "e2e-journey-error")
    assert all(p.stat().st_size > 0 for p in paths)

    out = _run_cell(desk, 1)
    text = _assert_short_error(out, 2, 8, "if y.sum() > 0:")
    assert "fallback=True cannot help" in text and "top-level forward" in text, text
    assert "tracer='auto'" in text, text  # the advice that works here (tests/test_capture_errors.py)
    assert shoot(out, "e2e-journey-error-fallback").stat().st_size > 0
    assert desk.get_by_text(JS_ERROR_TEXT).count() == 0

    out = _run_cell(desk, 2)
    explorer = out.locator(".fxviz-explorer")
    explorer.locator(".fxviz-graph g.node").first.wait_for(timeout=60_000)
    explorer.locator(".fxviz-tabs .lm-TabBar-tab", has_text="Passes").click()
    explorer.locator(".fxviz-pass-select select").select_option(label="no_relu")
    explorer.locator("button.fxviz-apply").click()
    error = explorer.locator(".fxviz-error-message")
    error.wait_for()
    assert "Pass 'no_relu' failed at node 'relu'" in error.inner_text(), error.inner_text()
    assert explorer.locator(".fxviz-error-node").inner_text() == "at node relu (selected)"
    explorer.locator(".fxviz-graph g.node#fx-relu.fxviz-selected").wait_for()  # selected in the graph
    assert "relu" in explorer.locator(".fxviz-node-table .fxviz-tv-selected").inner_text().split()
    assert explorer.locator(".fxviz-step").inner_text().startswith("step 0 of 0")  # nothing changed
    paths = shoot_themes(desk, explorer, "e2e-journey-error-pass-node")
    assert all(p.stat().st_size > 0 for p in paths)
    assert_no_js_error(desk)

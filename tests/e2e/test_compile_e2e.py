"""Journey: a model with a graph break, opened as torch.compile sees it.

In JupyterLab at the default size (1600x1000) a user calls
``fxviz.explore(model, x, tracer="dynamo")`` on a model defined in the cell whose
forward branches on a tensor value. They see the list of graphs with the break that
ended the first one (its reason and their cell's line), switch to the second graph and
to the first graph's AOT backward, unfold the break's explanation, and follow a node's
source link to their own code in the Code tab. Screenshots:
test-artifacts/e2e-compile-{light,dark}.png and e2e-compile-source-{light,dark}.png.
"""
from __future__ import annotations

import pytest

from labdriver import open_notebook, output_area, run_all, shoot_themes

pytestmark = pytest.mark.e2e

CELL = """\
import torch
from torch import nn
import fxviz

class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:  # a branch on a tensor value
            y = y * 2
        return self.out(torch.relu(y))

torch.manual_seed(0)
fxviz.explore(Gate(), torch.randn(2, 4), tracer="dynamo", profile="off")"""

BREAK_LINE = next(i for i, line in enumerate(CELL.splitlines(), start=1) if "if y.sum()" in line)
LIN_LINE = BREAK_LINE - 1


def _part(view, graph: int, part: str):
    return view.locator(".fxviz-compile-row").nth(graph).locator(".fxviz-compile-part", has_text=part)


def test_switch_between_compiled_graphs_and_read_the_break(desk, lab):
    name = lab.write_notebook("e2e_compile.ipynb", [CELL])
    open_notebook(desk, lab, name)
    run_all(desk, timeout=300)
    view = output_area(desk, 0).locator(".fxviz-compile")
    view.locator(".fxviz-graph g.node").first.wait_for(timeout=60_000)

    rows = view.locator(".fxviz-compile-row")
    assert rows.count() == 2
    ends = rows.nth(0).locator(".fxviz-compile-ends").inner_text()
    assert "Data-dependent branching" in ends and f"Cell In[1], line {BREAK_LINE}" in ends, ends
    assert "end of the model" in rows.nth(1).locator(".fxviz-compile-ends").inner_text()
    assert view.locator(".fxviz-title").inner_text().endswith("graph 0 · dynamo")

    _part(view, 1, "dynamo").click()  # the graph after the break
    view.locator(".fxviz-title", has_text="graph 1 · dynamo").wait_for()
    view.locator(".fxviz-graph g.node#fx-relu").wait_for()
    # The button's class comes in its own message, after the Explorer's: wait for it, as a reader would.
    view.locator(".fxviz-compile-row").nth(1).locator(".fxviz-compile-part.fxviz-compile-current",
                                                     has_text="dynamo").wait_for()
    assert view.locator(".fxviz-compile-break").count() == 0  # graph 1 ends with the model

    _part(view, 0, "backward").click()  # AOT's backward of the first graph
    view.locator(".fxviz-title", has_text="graph 0 · backward").wait_for()
    view.locator(".fxviz-graph g.node").first.wait_for()
    # Nothing selected: Details says what this graph is (AOT's gradients), not what dynamo's graphs are.
    view.locator(".fxviz-details", has_text="AOT autograd's backward of a dynamo graph").wait_for()

    _part(view, 0, "dynamo").click()
    view.locator(".fxviz-title", has_text="graph 0 · dynamo").wait_for()
    brk = view.locator(".fxviz-compile-break")
    brk.locator("summary").click()
    assert "Data-dependent branching" in brk.locator("summary").inner_text()
    assert "torch.cond" in brk.locator("pre").inner_text()  # dynamo's hint, readable
    paths = shoot_themes(desk, view, "e2e-compile")
    assert all(p.stat().st_size > 0 for p in paths)

    view.locator(".fxviz-graph g.node#fx-y").click()  # the Linear's node: its source link
    link = view.locator(".fxviz-source-link")
    link.wait_for()
    assert f"Cell In[1], line {LIN_LINE}" in link.inner_text()
    link.click()
    code = view.locator(".fxviz-code .hll")
    code.wait_for()
    assert "y = self.lin(x)" in code.inner_text()
    paths = shoot_themes(desk, view.locator(".fxviz-tabs"), "e2e-compile-source")
    assert all(p.stat().st_size > 0 for p in paths)

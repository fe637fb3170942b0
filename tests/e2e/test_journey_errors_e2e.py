"""Journey (6) of issue 11: an untraceable model shows a short error in the cell.

In JupyterLab at the default size (1600x1000) a user calls ``fxviz.explore`` on models
defined in the cell: one that no capture method can open (it fails on its own inputs),
and one with a branch on a tensor value in its top-level forward, forced to the symbolic
tracer with ``fallback=True`` (which cannot help there). What the cell shows must be one
compact message: it names ``explore(`` as called, the failing line of the cell, advice,
and no chained traceback or torch frames. Screenshots:
test-artifacts/e2e-journey-error-{light,dark,fallback}.png.
"""
from __future__ import annotations

import pytest

from labdriver import JS_ERROR_TEXT, open_notebook, output_area, shoot, shoot_themes

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
    name = lab.write_notebook("e2e_errors.ipynb", [UNRUNNABLE, BRANCHY])
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

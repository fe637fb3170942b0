"""The Explorer's static copy and its export button, in JupyterLab.

Live, JupyterLab shows the widget, never the static copy its output also carries; the
notebook as JupyterLab saves it (no widget state) holds that copy (the graph as SVG),
which is what nbconvert, nbviewer and GitHub show. The export button writes the session's report
next to the notebook and links it.
"""
from __future__ import annotations

import json
import re

import pytest

from labdriver import open_notebook, poll, run_all

pytestmark = pytest.mark.e2e

NOTEBOOK = [
    """\
import torch
from torch import nn
import fxviz

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 4), nn.ReLU()))
fxviz.explore(model, torch.randn(2, 8), profile="off")""",
]


def test_live_widget_static_copy_when_saved_and_export(lab, page):
    name = lab.write_notebook("e2e_report.ipynb", NOTEBOOK)
    open_notebook(page, lab, name)
    run_all(page, timeout=120)

    explorer = page.locator(".fxviz-explorer")
    explorer.locator(".fxviz-graph g.node#fx-_0").wait_for(timeout=60_000)
    assert page.locator(".fxviz-static").count() == 0  # the widget, not its static copy

    explorer.locator("button.fxviz-export").click()
    link = explorer.locator(".fxviz-export-link a")
    link.wait_for()
    assert link.get_attribute("href") == "Sequential-report.html"
    assert "Wrote the report (1 step)" in explorer.locator(".fxviz-status").inner_text()
    report = lab.root / "Sequential-report.html"
    assert report.exists() and 'id="fxviz-report-data"' in report.read_text()

    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    saved = poll("the saved notebook with outputs", lambda: _outputs(lab.root / name), timeout=30)
    html = "".join(saved[0]["data"]["text/html"])  # .ipynb stores text as a list of lines
    assert re.search(r'<svg.*id="fx(-|&#45;)_0"', html, re.S)
    assert "application/vnd.jupyter.widget-view+json" in saved[0]["data"]
    # JupyterLab saves no widget state by default, so nbconvert shows the static copy
    import nbformat
    from nbconvert import HTMLExporter

    notebook = nbformat.read(lab.root / name, as_version=4)
    assert "widgets" not in notebook.metadata
    converted, _ = HTMLExporter().from_notebook_node(notebook)
    assert re.search(r'<svg.*id="fx(-|&#45;)_0"', converted, re.S) and "fxviz-static" in converted


def _outputs(path) -> list[dict] | None:
    cells = json.loads(path.read_text())["cells"]
    outputs = [o for c in cells for o in c.get("outputs", []) if "data" in o]
    return outputs or None

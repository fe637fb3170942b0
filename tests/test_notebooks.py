"""Every notebook runs top to bottom headless; its own cells assert what its text claims."""
from __future__ import annotations

import base64
import copy
import pathlib
import re

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_is_a_quickstart_and_no_committed_output():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_quickstart.ipynb"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        assert nb.metadata.get("kernelspec", {}).get("name") == "python3", path.name
        assert not any(cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_headless(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    nbformat.write(nb, tmp_path / path.name)  # executed copy, handy when debugging a failure
    assert_graphs_survive_html(nb)


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
FX_SVG = re.compile(r'<svg\b[^>]*>(?:(?!</svg>).)*?\bid="fx(?:-|&#45;)\w+"', re.S)


#: What the README tells nbconvert for a notebook executed headless (nbclient saves the widgets' state)
CLEAR_WIDGET_STATE = {"ClearMetadataPreprocessor": {"enabled": True, "clear_notebook_metadata": True}}


def assert_graphs_survive_html(nb) -> None:
    """In ``nbconvert --to html`` of the notebook as JupyterLab saves it (without widget
    state), or of one executed headless converted as the README says, every Explorer shows
    its graph as an SVG with FX node ids, and every drawing (``Rendering``) as an SVG image.
    Converted as is, an executed notebook's Explorers are live widgets that need a CDN: no
    graph offline, as the README warns."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    outputs = [o for c in nb.cells for o in c.get("outputs", []) if "data" in o]
    widgets = [o for o in outputs if WIDGET_VIEW in o["data"]]
    drawings = [o for o in outputs if "image/svg+xml" in o["data"] and WIDGET_VIEW not in o["data"]]
    for output in widgets:  # the static copy travels with the widget view
        assert FX_SVG.search(output["data"].get("text/html", "")), "a widget output without its static graph"
    if widgets:
        assert "widgets" in nb.metadata  # nbclient saved their state ...
        as_is, _ = HTMLExporter().from_notebook_node(copy.deepcopy(nb))
        assert not FX_SVG.findall(as_is)  # ... and nbconvert shows the live widget instead of the copy
    page, _ = HTMLExporter(config=Config(CLEAR_WIDGET_STATE)).from_notebook_node(copy.deepcopy(nb))
    assert widgets or drawings
    assert len(FX_SVG.findall(page)) == len(widgets)
    images = re.findall(r'<img [^>]*src="data:image/svg\+xml;base64,([^"]+)"', page)
    assert len(images) == len(drawings)
    assert all(FX_SVG.search(base64.b64decode(i).decode()) for i in images)

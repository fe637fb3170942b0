"""Every notebook runs top to bottom headless; its own cells assert what its text claims."""
from __future__ import annotations

import pathlib

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

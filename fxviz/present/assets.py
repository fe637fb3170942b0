"""The front-ends' JS and CSS as text, for the widgets and the HTML report alike.

The files are package data of ``fxviz.widgets`` (the top-level ``widgets/`` folder);
their folder is found without importing that package, so the report loads no
ipywidgets or anywidget. anywidget loads one module string and the report inlines one
``<script type="module">``, while the sources stay small plain modules that a page (or
``node --test``) imports as files: :func:`join` concatenates them, each after the
modules it imports, and drops their imports of each other (no bundler).
"""
from __future__ import annotations

import importlib.util
import pathlib
import re

from fxviz.errors import MissingDependency

#: the graph view's modules, each after those it imports (graph_view.js last)
GRAPH_VIEW = ("columns.js", "gv_view.js", "gv_graph.js", "gv_labels.js", "gv_svg.js", "gv_dom.js", "gv_tooltip.js", "gv_minimap.js", "gv_stage.js",
              "gv_select.js", "gv_search.js", "gv_pointer.js", "gv_toolbar.js", "gv_keys.js", "graph_view.js")
#: the node table's modules
TABLE_VIEW = ("columns.js", "tv_columns.js", "tv_rows.js", "table_view.js")
#: the report page's host script (fxviz/report/page.py)
REPORT_HOST = ("report_model.js", "report_panels.js", "report_host.js")
_LOCAL_IMPORT = re.compile(r'^(?:import|export)\b[^;"]*?\bfrom\s+"\./[\w.]+";\n', re.MULTILINE)


def folder() -> pathlib.Path:
    """Where the front-end files are: ``fxviz.widgets``' folder, located, not imported."""
    spec = importlib.util.find_spec("fxviz.widgets")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependency("fxviz's front-end files (the fxviz.widgets package data) are not installed; "
                                "reinstall fxviz (pip install fxviz).")
    return pathlib.Path(next(iter(spec.submodule_search_locations)))


def text(name: str, where: pathlib.Path | None = None) -> str:
    """The file ``name`` of the front-end (``where``: default, :func:`folder`)."""
    return ((where or folder()) / name).read_text(encoding="utf-8")


def join(names: tuple[str, ...], where: pathlib.Path | None = None) -> str:
    """The modules ``names`` as one module: joined in order, their imports and
    re-exports of each other dropped."""
    where = where or folder()
    return "\n".join(_LOCAL_IMPORT.sub("", text(name, where)) for name in names)

"""The front-ends as single ES modules, without a bundler.

anywidget loads one module string and the HTML report inlines one ``<script
type="module">``, while the sources stay small plain modules that a page (or
``node --test``) imports as files. :func:`join` concatenates them, each after the
modules it imports, and drops their imports of each other.
"""
from __future__ import annotations

import pathlib
import re

HERE = pathlib.Path(__file__).parent
#: the graph view's modules, each after those it imports (graph_view.js last)
GRAPH_VIEW = ("columns.js", "gv_view.js", "gv_graph.js", "gv_labels.js", "gv_svg.js", "gv_dom.js", "gv_tooltip.js", "gv_minimap.js", "gv_stage.js",
              "gv_select.js", "gv_search.js", "gv_pointer.js", "gv_toolbar.js", "gv_keys.js", "graph_view.js")
#: the node table's modules
TABLE_VIEW = ("columns.js", "tv_columns.js", "table_view.js")
#: the report page's host script (fxviz/report.py)
REPORT_HOST = ("report_model.js", "report_panels.js", "report_host.js")
_LOCAL_IMPORT = re.compile(r'^(?:import|export)\b[^;"]*?\bfrom\s+"\./[\w.]+";\n', re.MULTILINE)


def join(names: tuple[str, ...], folder: pathlib.Path = HERE) -> str:
    """The modules ``names`` in ``folder`` as one module: joined in order, their imports
    and re-exports of each other dropped."""
    return "\n".join(_LOCAL_IMPORT.sub("", (folder / name).read_text(encoding="utf-8")) for name in names)

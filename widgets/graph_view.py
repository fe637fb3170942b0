"""The graph view: an anywidget that shows one step's Graphviz SVG.

The front-end (``graph_view.js``) does pan/zoom, hover, search and selection; this
class only declares the synced state. Whoever owns the view (the Explorer) renders
``svg``/``elements``/``legend`` with ``fxviz.render.render`` and re-renders when
``collapsed`` or ``color_mode`` change; the view never lays out anything itself.
Set related traitlets together under ``hold_sync()`` so the browser sees one
consistent state (e.g. an ``svg`` and its ``elements``).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

from fxviz import colour_modes
from fxviz.errors import InputError
from fxviz.report_static import static_html

from . import esm
from .columns import rows_to_json

_HERE = pathlib.Path(__file__).parent
MODULES = esm.GRAPH_VIEW


def esm_source() -> str:
    """The graph view's front-end as one ES module (anywidget loads one string): the
    modules joined, their imports of each other dropped (see :mod:`.esm`)."""
    return esm.join(MODULES)


def nodes_to_json(nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``nodes`` as the browser gets them: column by column (:func:`rows_to_json`, the
    node table's form) with a ``name`` column, and each node's inputs as how many places
    back in ``nodes`` they are (``[1]``: the node just before); ``users`` is not sent,
    the browser (gv_graph.js ``nodesOf``) derives it from the inputs. At 100k nodes
    this is a few MB instead of a record per node. No nodes: ``{}``, as they are."""
    if not nodes:
        return {}
    at = {name: i for i, name in enumerate(nodes)}
    rows = []
    for i, (name, record) in enumerate(nodes.items()):
        row = {k: v for k, v in record.items() if k not in ("inputs", "users")}
        if "inputs" in record or "users" in record:
            row["inputs"] = [i - at[p] for p in record.get("inputs", ()) if p in at]
        rows.append({"name": name, **row})
    return rows_to_json(rows)


class GraphView(anywidget.AnyWidget):
    """Interactive Graphviz SVG of an FX graph; see docs/CONTRACTS.md for the ids."""

    # Read into strings when the class is created (anywidget watches a Path only with
    # ANYWIDGET_HMR=1, which a joined module cannot offer).
    _esm = esm_source()
    _css = _HERE / "graph_view.css"

    svg = traitlets.Unicode("").tag(sync=True)
    #: SVG id -> {"kind": "node"|"cluster"|"collapsed"|"stub", "name": str}
    elements = traitlets.Dict().tag(sync=True)
    #: [{"label": str, "color": "#rrggbb"}]
    legend = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: FX node name -> {"op", "target", "module_path", "shape", "time"} (display strings),
    #: optionally "inputs"/"users" (lists of node names) for walking with the arrow keys;
    #: sent column by column (:func:`nodes_to_json`)
    nodes = traitlets.Dict().tag(sync=True, to_json=lambda nodes, _: nodes_to_json(nodes))
    #: FX node name, or "" for none
    selected = traitlets.Unicode("").tag(sync=True)
    #: module paths drawn as one summary node
    collapsed = traitlets.List(traitlets.Unicode()).tag(sync=True)
    color_mode = traitlets.Unicode("op").tag(sync=True)
    #: the mode ``legend`` was drawn in, when it differs from ``color_mode`` (e.g. the
    #: time colouring falls back to op kinds until timings arrive); "" = ``color_mode``
    legend_mode = traitlets.Unicode("").tag(sync=True)
    #: the modes the menu offers, [{"name", "label", "unit"}] (default: every mode of
    #: ``fxviz.colour_modes.MODES``); the front-end shows their words as they are
    color_modes = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: one line for the toolbar, e.g. "71 nodes · step 2"
    status = traitlets.Unicode("").tag(sync=True)

    @traitlets.default("color_modes")
    def _every_mode(self) -> list[dict[str, str]]:
        return colour_modes.views()  # read when a view is made: a mode added since is offered

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._actions: list[Callable[[str], Any]] = []
        self.on_msg(self._on_message)

    def on_action(self, callback: Callable[[str], Any]) -> None:
        """Call ``callback("undo")`` / ``callback("redo")`` on Ctrl+Z / Ctrl+Shift+Z
        pressed in the view or the workbench around it (outside text fields)."""
        self._actions.append(callback)

    def _on_message(self, _: Any, content: Any, buffers: Any) -> None:
        action = content.get("action") if isinstance(content, dict) else None
        if action in ("undo", "redo"):
            for callback in self._actions:
                callback(action)

    def select(self, name: str) -> None:
        """Select FX node `name` ("" clears); the browser highlights it and pans to it."""
        if name and name not in self.nodes:
            known = ", ".join(list(self.nodes)[:5]) or "none"
            raise InputError(
                f"no node named {name!r} in this graph; its FX node names include: {known}"
            )
        self.selected = name

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget view plus its SVG and status as text/html, for wherever widgets
        cannot run (a saved notebook, nbconvert, GitHub); JupyterLab shows the widget."""
        bundle = super()._repr_mimebundle_(**kwargs)  # anywidget's: (data, metadata)
        if bundle:
            bundle[0]["text/html"] = static_html(title="fxviz graph", lines=[self.status], svg=self.svg)
        return bundle

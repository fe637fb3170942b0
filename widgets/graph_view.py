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
from typing import Any

import anywidget
import traitlets

from fxviz.report_static import static_html

_HERE = pathlib.Path(__file__).parent


class GraphView(anywidget.AnyWidget):
    """Interactive Graphviz SVG of an FX graph; see docs/CONTRACTS.md for the ids."""

    # anywidget reads these files into strings when the class is created; it only
    # watches them for changes with ANYWIDGET_HMR=1 (development).
    _esm = _HERE / "graph_view.js"
    _css = _HERE / "graph_view.css"

    svg = traitlets.Unicode("").tag(sync=True)
    #: SVG id -> {"kind": "node"|"cluster"|"collapsed"|"stub", "name": str}
    elements = traitlets.Dict().tag(sync=True)
    #: [{"label": str, "color": "#rrggbb"}]
    legend = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: FX node name -> {"op", "target", "module_path", "shape", "time"} (display strings)
    nodes = traitlets.Dict().tag(sync=True)
    #: FX node name, or "" for none
    selected = traitlets.Unicode("").tag(sync=True)
    #: module paths drawn as one summary node
    collapsed = traitlets.List(traitlets.Unicode()).tag(sync=True)
    color_mode = traitlets.Unicode("op").tag(sync=True)
    color_modes = traitlets.List(
        traitlets.Unicode(), default_value=["op", "time", "flops", "diff"]
    ).tag(sync=True)
    #: one line for the toolbar, e.g. "71 nodes · step 2"
    status = traitlets.Unicode("").tag(sync=True)

    def select(self, name: str) -> None:
        """Select FX node `name` ("" clears); the browser highlights it and pans to it."""
        if name and name not in self.nodes:
            known = ", ".join(list(self.nodes)[:5]) or "none"
            raise ValueError(
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

"""The graph view: an anywidget that shows one step's Graphviz SVG.

The front-end (``graph_view.js``) does pan/zoom, hover, search and selection; this
class only declares the synced state. Whoever owns the view (the Explorer) renders
``svg``/``elements``/``legend`` with ``fxviz.draw.render.render`` and re-renders when
``collapsed`` or ``color_mode`` change; the view never lays out anything itself.
Set related traitlets together under ``hold_sync()`` so the browser sees one
consistent state (e.g. an ``svg`` and its ``elements``).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import anywidget
import traitlets

from fxviz.present import assets

from fxviz.draw import colour_modes
from fxviz.errors import InputError
from fxviz.present.columns import Columns, as_columns
from fxviz.report.static import static_html

_HERE = pathlib.Path(__file__).parent
MODULES = assets.GRAPH_VIEW


def esm_source() -> str:
    """The graph view's front-end as one ES module (anywidget loads one string): the
    modules joined, their imports of each other dropped (see :mod:`fxviz.present.assets`)."""
    return assets.join(MODULES)


class NodeRecords(Mapping):
    """The view's node records by FX name, held column by column (``columns``: a
    ``name`` column, display strings, and each node's ``inputs`` as how many places back
    in graph order they are, ``[1]``: the node just before). Read as a mapping, a record
    has its ``inputs`` and ``users`` by name (users derived from the inputs, as the
    browser does, gv_graph.js ``nodesOf``); nothing is decoded until read."""

    __eq__, __hash__ = object.__eq__, object.__hash__  # one payload, not 100k records to compare

    def __init__(self, columns: Columns):
        self.columns = columns
        self._names: list[str] = list(columns.columns.get("name", ()))
        self._at: dict[str, int] | None = None
        self._users: list[list[str]] | None = None

    @classmethod
    def from_dict(cls, nodes: Mapping[str, Mapping[str, Any]]) -> NodeRecords:
        """From ``{name: {"op", ..., "inputs": [names], "users": [names]}}``: ``users``
        is dropped (derived), ``inputs`` kept as places back."""
        at = {name: i for i, name in enumerate(nodes)}
        rows = []
        for i, (name, record) in enumerate(nodes.items()):
            row = {"name": name, **{k: v for k, v in record.items() if k not in ("inputs", "users")}}
            if "inputs" in record or "users" in record:
                row["inputs"] = [i - at[p] for p in record.get("inputs", ()) if p in at]
            rows.append(row)
        return cls(Columns.from_rows(rows))

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._index()

    def __getitem__(self, name: str) -> dict[str, Any]:
        i = self._index()[name]
        record = self.columns[i]
        del record["name"]
        if "inputs" in record:
            record["inputs"] = [self._names[i - back] for back in record["inputs"] or ()]
            record["users"] = list(self._users_of()[i])
        return record

    def _index(self) -> dict[str, int]:
        if self._at is None:
            self._at = {name: i for i, name in enumerate(self._names)}
        return self._at

    def _users_of(self) -> list[list[str]]:
        if self._users is None:
            self._users = [[] for _ in self._names]
            for i, back in enumerate(self.columns.columns["inputs"]):
                for places in back or ():  # None: a record given without inputs
                    self._users[i - places].append(self._names[i])
        return self._users


def nodes_to_json(nodes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``nodes`` (a name -> record dict) as the browser gets them (:class:`NodeRecords`),
    as a JSON-able dict; no nodes: ``{}``."""
    return NodeRecords.from_dict(nodes).columns.encoded() if nodes else {}


class GraphView(anywidget.AnyWidget):
    """Interactive Graphviz SVG of an FX graph; see docs/CONTRACTS.md for the ids."""

    # Strings, never Paths: anywidget wraps a Path in a FileContents whose change
    # signal holds every widget made from the class strongly, so none is ever freed
    # (manzt/anywidget#929, open).
    _esm = esm_source()
    _css = (_HERE / "graph_view.css").read_text()

    svg = traitlets.Unicode("").tag(sync=True)
    #: SVG id -> {"kind": "node"|"cluster"|"collapsed"|"stub", "name": str}
    elements = traitlets.Dict().tag(sync=True)
    #: [{"label": str, "color": "#rrggbb"}]
    legend = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: FX node name -> {"op", "target", "module_path", "shape"} (display strings),
    #: optionally "inputs"/"users" (lists of node names) for walking with the arrow keys:
    #: a :class:`NodeRecords` (a dict given is made one), sent as its JSON text
    nodes = traitlets.Any(NodeRecords(Columns())).tag(sync=True, to_json=lambda nodes, _: nodes.columns.json())
    #: each node's "time_us" and "share" (the tooltip's time), as :class:`fxviz.present.columns.Columns`
    #: in the order of ``nodes`` (rows given are made one); sent apart: timings arriving
    #: resend only them
    times = traitlets.Any(Columns()).tag(sync=True, to_json=lambda times, _: times.json())
    #: FX node name, or "" for none
    selected = traitlets.Unicode("").tag(sync=True)
    #: FX node names outlined apart from the selection (e.g. the nodes fused into the
    #: selected node's kernel); a collapsed box holding one is outlined; [] clears
    marked = traitlets.List(traitlets.Unicode()).tag(sync=True)
    #: module paths drawn as one summary node
    collapsed = traitlets.List(traitlets.Unicode()).tag(sync=True)
    color_mode = traitlets.Unicode("op").tag(sync=True)
    #: the mode ``legend`` was drawn in, when it differs from ``color_mode`` (e.g. the
    #: time colouring falls back to op kinds until timings arrive); "" = ``color_mode``
    legend_mode = traitlets.Unicode("").tag(sync=True)
    #: the modes the menu offers, [{"name", "label", "unit"}] (default: every mode of
    #: ``fxviz.draw.colour_modes.MODES``); the front-end shows their words as they are
    color_modes = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: parameters, buffers and constants drawn as nodes (else listed on the ops that read them)
    show_weights = traitlets.Bool(False).tag(sync=True)
    #: one line for the toolbar, e.g. "71 nodes · step 2"
    status = traitlets.Unicode("").tag(sync=True)

    @traitlets.validate("nodes")
    def _nodes_as_records(self, proposal: dict[str, Any]) -> NodeRecords:
        value = proposal["value"]
        return value if isinstance(value, NodeRecords) else NodeRecords.from_dict(value or {})

    @traitlets.validate("times")
    def _times_as_columns(self, proposal: dict[str, Any]) -> Columns:
        return as_columns(proposal["value"])

    @traitlets.default("color_modes")
    def _every_mode(self) -> list[dict[str, str]]:
        return colour_modes.views()  # read when a view is made: a mode added since is offered

    #: set by an owner that sends ``nodes`` after the first drawing (the Explorer, on a
    #: large graph); called before they are read
    pending: Callable[[], None] | None = None

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
        if self.pending:
            self.pending()
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

"""The node details panel: everything torch.fx and fxviz know about one node.

Op, name, target, args/kwargs, users and module path (the FX tutorial's concepts),
shape/dtype/stride/memory format and FLOPs (from ``step.graph``), the owner's
``sections`` (the error against an earlier step, memory) and, once the step is
profiled, its time and the ATen operators it ran. Input and user nodes are
buttons that select them; the model line a node came from is a button that shows
that code (the Code tab's "model source").

With no node selected it shows the graph as a whole: its nodes by op, its FLOPs, how
it was captured and why ``tracer="auto"`` passed over the methods before that one
(why a graph is ATen operators rather than the model's modules, say).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as w
import networkx as nx

from fxviz.present.markup import escape
from fxviz.present.node_table import human_bytes
from fxviz.present.overview import graph_overview
from fxviz.present.presentation import NOT_PROFILED, NodeTime, node_rows, node_times

from ._tree import replace_children
from .panel_code import user_place
from .profiling import Timings

if TYPE_CHECKING:  # pandas loads where a table is made, not with the Explorer
    import pandas as pd

ATEN_COLUMNS = ["aten_op", "count", "self_us", "total_us"]


class DetailsPanel(w.VBox):
    """Shows one node of a step's annotated graph; ``select(name)`` is called when a
    linked node is clicked; each of ``sections(name)`` gives HTML shown under its rows
    (before its weights: a short section about the node itself)."""

    def __init__(self, select: Callable[[str], Any], show_source: Callable[[], Any] | None = None,
                 capture: Any = None, sections: Sequence[Callable[[str], str]] = ()):
        self._select, self._sections = select, sections
        self._capture = capture  # the session's Capture: how its graphs were made
        self._overview: tuple[nx.DiGraph | None, str] = (None, "")  # (graph, its overview): 100k nodes take 0.1 s
        self._timed: tuple[Any, dict[str, NodeTime]] = (None, {})  # (profile table, its times)
        self.body = w.HTML()
        self.body.add_class("fxviz-details")
        self.source = w.Button(icon="file-code-o", layout=w.Layout(width="auto", display="none"),
                               tooltip="show the model's code around this line (Code tab)")
        self.source.add_class("fxviz-source-link")
        if show_source is not None:
            self.source.on_click(lambda _: show_source())
        self.inputs = w.HBox()
        self.inputs.add_class("fxviz-details-inputs")
        self.users = w.HBox()
        self.users.add_class("fxviz-details-users")
        self.aten = w.HTML()
        self.aten.add_class("fxviz-details-aten")
        self._links_source = show_source is not None
        self._last: tuple[Any, ...] = (None, "", None)  # what show was given last, for again()
        super().__init__([self.body, self.source, self.inputs, self.users, self.aten])
        self.add_class("fxviz-details-panel")

    def show(self, graph: nx.DiGraph, name: str, timings: Timings | None) -> None:
        """Describe node ``name`` of ``graph`` ("" or unknown: a hint instead)."""
        self._last = (graph, name, timings)
        self.source.layout.display = "none"
        if name not in graph:
            if self._overview[0] is not graph:
                self._overview = (graph, overview_html(graph, self._capture))
            self.body.value = self._overview[1]
            replace_children(self.inputs, ())
            replace_children(self.users, ())
            self.aten.value = ""
            return
        attrs = graph.nodes[name]
        rows = node_rows(graph, name, *self._times(timings))
        cells = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
        more = "".join(section(name) for section in self._sections)
        self.body.value = f'<table class="fxviz-kv">{cells}</table>{more}{weights_html(attrs.get("weights", ()))}'
        if attrs.get("source") and self._links_source:
            self.source.description = f"model code at {user_place(attrs['source'])}"
            self.source.layout.display = None
        inputs = [(f"{use}: {p}", p) for p in graph.predecessors(name) for use in graph.edges[p, name]["uses"]]
        replace_children(self.inputs, self._links("inputs", inputs))
        replace_children(self.users, self._links("users", [(u, u) for u in graph.successors(name)]))
        self.aten.value = _aten_html(name, timings)

    def again(self) -> None:
        """Show the last node again: what its ``sections`` say has changed."""
        if self._last[0] is not None:
            self.show(*self._last)

    def _times(self, timings: Timings | None) -> tuple[dict[str, NodeTime], str]:
        """Each node's time (made once per profile: a selection must not rescan 100k rows)
        and what a node without one says."""
        if timings is None or timings.error or timings.table is None:
            return {}, getattr(timings, "error", "") or NOT_PROFILED
        if self._timed[0] is not timings.table:
            self._timed = (timings.table, node_times(timings.table))
        return self._timed[1], NOT_PROFILED

    def _links(self, title: str, targets: list[tuple[str, str]]) -> tuple[w.Widget, ...]:
        label = w.Label(f"{title}:" if targets else f"{title}: none")
        label.add_class("fxviz-details-label")
        buttons = []
        for text, node in targets:
            button = w.Button(description=text, tooltip=f"select {node}", layout=w.Layout(width="auto"))
            button.add_class("fxviz-node-link")
            button.on_click(lambda _, node=node: self._select(node))
            buttons.append(button)
        return (label, *buttons)


def overview_html(graph: nx.DiGraph, capture: Any = None) -> str:
    """:func:`fxviz.present.overview.graph_overview` as the panel shows it."""
    found = graph_overview(graph, capture)
    cells = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in found["rows"])
    tried = ""
    if found["tried"]:
        items = "".join(f"<li><b>{escape(method)}</b>: {escape(reason)}</li>" for method, reason in found["tried"])
        tried = (f'<p class="fxviz-overview-tried">Before {escape(found["method"])}, tracer="auto" tried:</p>'
                 f"<ul>{items}</ul>")
    return ('<div class="fxviz-overview"><p><b>The whole graph</b></p>'
            f'<table class="fxviz-kv">{cells}</table>{tried}'
            '<p class="fxviz-hint">Select a node in the graph or the table.</p></div>')


def weights_html(weights: tuple) -> str:
    """The parameters, buffers and constants a node reads, as Netron lists an op's: name,
    shape, dtype and size (the drawing shows no box for them)."""
    if not weights:
        return ""
    sizes = [size for *_, size in weights if size is not None]
    head = f"Weights it reads: {len(weights)}" + (f" · {human_bytes(sum(sizes))}" if sizes else "")
    rows = "".join(f"<tr><td>{escape(name)}</td><td>{escape(shape or '—')}</td><td>{escape(dtype or '—')}</td>"
                   f"<td>{'—' if size is None else human_bytes(size)}</td></tr>" for name, shape, dtype, size in weights)
    return (f'<div class="fxviz-details-weights"><b>{escape(head)}</b><table class="fxviz-table">'
            f"<tr><th>name</th><th>shape</th><th>dtype</th><th>size</th></tr>{rows}</table></div>")


def _aten_html(name: str, timings: Timings | None) -> str:
    if timings is not None and timings.aten_error:
        return f'<p class="fxviz-timing-error">{escape(timings.aten_error)}</p>'
    if timings is None or timings.aten is None:
        return ""
    ops: pd.DataFrame = timings.aten[timings.aten["node"] == name]
    if ops.empty:
        return '<p class="fxviz-hint">No ATen operators ran for this node.</p>'
    table = ops[ATEN_COLUMNS].to_html(index=False, escape=True, border=0, float_format="{:.1f}".format,
                                      classes="fxviz-table")
    return f"<div><b>ATen operators (µs per forward)</b></div>{table}"

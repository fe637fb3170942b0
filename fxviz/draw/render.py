"""Draw a graph with Graphviz: module clusters, colouring, collapsing, escaping, bounded layout.

Layout cost grows much faster than linearly with node count and explodes on long edges
(``bench/scale.py`` times the layout stage), so what is laid out is kept small: clusters collapse into summary nodes
above ``max_nodes`` (and above the layout work those boxes may make: edges, clusters,
crossings), edges spanning more than ``long_edge`` nodes are drawn as stubs next to the
consumer, and ``dot`` runs under a timeout; at the default budget a layout that still runs
out of time (a busy machine) is redrawn coarser, with a note saying so.
"""
from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import graphviz
import networkx as nx
import torch.fx

from fxviz.draw import colour_modes, dot
from fxviz.errors import RenderError
from fxviz.annotation.graph_memo import derived
from fxviz.present.markup import escape
from fxviz.annotation.graph import shape_text, to_networkx
from fxviz.draw.layout_plan import LayoutPlan, Unit, box_index, plan_layout

MAX_BOXES = 3000  # dot needs ~9 s for 4,000 boxes and grows ~n^2.5 beyond (bench/scale.py)
MAX_NODES = 250  # the default box budget: dot lays it out in well under a second
MIN_FALLBACK = 8  # a drawing whose layout ran out of time is redrawn with half the budget, down to this
HIGHLIGHT_COLOR = "#e11d48"


@dataclass(frozen=True)
class Rendering:
    """A drawn graph: DOT source, the laid-out SVG (computed on first access) and the
    maps a front-end needs: ``elements`` (SVG id -> what it stands for) and ``legend``.
    ``note``: what the drawing left out that was asked for (boxes kept closed to keep
    within the budget, a coarser drawing after a layout ran out of time), or ""."""

    dot: graphviz.Digraph
    elements: dict[str, dict[str, Any]]
    legend: list[dict[str, str]]
    collapsed: tuple[str, ...]
    layout_timeout: float = 10.0
    box_count: int = 0  # boxes laid out: nodes, collapsed modules and stubs
    expanded: tuple[str, ...] = ()  # boxes drawn open, most wanted first: pass as expand= to keep this view
    note: str = ""
    coarser: Callable[[str], Rendering] | None = None  # the same drawing with half the budget, given a note
    laid_out: dict[str, str] = field(default_factory=dict, repr=False, compare=False)  # SVGs by DOT: see render

    # Not functools.cached_property: before Python 3.12 its lock is one for all renderings,
    # which made a report's layouts in parallel threads run one at a time.
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    @property
    def _layout(self) -> str | None:  # None: dot ran out of time
        with self._lock:  # laid out once per rendering
            if "_svg" not in self.__dict__:
                try:
                    svg = self.laid_out.get(self.dot.source) or self.laid_out.setdefault(self.dot.source, layout_svg(
                        self.dot.source, timeout=self.layout_timeout, box_count=self.box_count))
                except LayoutTimeout:
                    svg = None
                self.__dict__["_svg"] = svg
            return self.__dict__["_svg"]

    @property
    def svg(self) -> str:
        """The laid-out SVG; a ``LayoutTimeout`` when dot ran past ``layout_timeout``."""
        if self._layout is None:
            raise LayoutTimeout(self.box_count, self.layout_timeout)
        return self._layout

    def drawn(self) -> Rendering:
        """This rendering once laid out or, when its layout runs out of time and the
        planner chose what it opens (auto_collapse at the default budget), the first
        coarser one (half the budget and the time, then half again) that dot lays out in time; its
        ``note`` says so. When even the coarsest runs out, this rendering, whose ``svg``
        raises about the drawing asked for."""
        rendering = self
        while rendering._layout is None and rendering.coarser is not None:
            coarser = rendering.coarser(f"laying out {self.box_count} boxes took longer than "
                                        f"{self.layout_timeout:g} s (a busy machine?), so fewer are drawn")
            if coarser.box_count >= rendering.box_count:  # what must be open is all there is
                break
            rendering = coarser
        return self if rendering._layout is None else rendering  # none in time: the error names the drawing asked for

    def _repr_svg_(self) -> str:
        return self.drawn().svg


class LayoutTimeout(RenderError):
    """``dot`` ran past its time limit (and was stopped)."""

    def __init__(self, box_count: int, timeout: float):
        super().__init__(
            f"Laying out {box_count} boxes took longer than {timeout:g} s, so it was stopped. "
            "Collapse more module clusters (collapse=[...]), lower max_nodes, "
            "or allow more time with layout_timeout=..."
        )


def layout_svg(source: str, *, timeout: float = 10.0, box_count: int = 0) -> str:
    """Run ``dot -Tsvg`` with a hard timeout (the process is killed, never left running)."""
    try:
        returncode, out, err = dot.run(source, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LayoutTimeout(box_count, timeout) from None
    if returncode != 0:
        raise RenderError(f"Graphviz failed: {err.decode(errors='replace').strip()}")
    svg = dot.centre_labels(out.decode())
    return svg[svg.find("<svg"):]


def render(source: torch.fx.GraphModule | nx.DiGraph, *, color_by: str | None = None,
           values: Mapping[str, float] | None = None, marks: Mapping[str, str] | None = None,
           highlight: Iterable[str] = (), collapse: Iterable[str] = (), expand: Iterable[str] = (),
           auto_collapse: bool = True, max_nodes: int | None = None, long_edge: int = 40,
           layout_timeout: float = 10.0, rankdir: str = "TB", show_weights: bool = False) -> Rendering:
    """Draw ``source`` (a GraphModule or a :func:`fxviz.to_networkx` graph).

    ``color_by``: a mode of :data:`fxviz.draw.colour_modes.MODES` (``None``/``"op"``: by node
    kind, ``"flops"``: node FLOPs, ``"time"`` with ``values``, ``"diff"`` with ``marks``:
    node name -> added/faster/slower/unchanged), or any other name for a heat scale of
    ``values`` (node name -> number).
    ``collapse``/``expand``: boxes (module paths, or the groups ``Rendering.collapsed``
    names) drawn as one summary node / opened, most wanted first; an FX node name in
    ``expand`` opens every box around it. With ``auto_collapse``, the drawing keeps within
    ``max_nodes`` boxes (``MAX_NODES`` by default) and the layout work they make: boxes
    asked open beyond it (after the first) stay collapsed, and boxes open level by level
    (modules first, runs of identical blocks stay collapsed) while it fits, so a graph of
    any size opens at the most detailed level that fits. At the default budget, a layout
    that runs out of time falls back to a coarser drawing (see ``Rendering.drawn``).
    Weights are attributes of the ops that read them; ``show_weights`` draws them as nodes.
    Calls with every option at its default share a graph's layouts (a report's "*" is the first view's).
    """
    plain = isinstance(source, nx.DiGraph) and all(v is render.__kwdefaults__.get(k, v) for k, v in locals().items())
    graph = source if isinstance(source, nx.DiGraph) else to_networkx(source)  # which refuses what is no GraphModule
    options = dict(color_by=color_by, values=values, marks=marks, highlight=set(highlight), collapse=set(collapse),
                   expand=list(expand), auto_collapse=auto_collapse, long_edge=long_edge,
                   layout_timeout=layout_timeout, rankdir=rankdir, show_weights=show_weights,
                   laid_out=derived(graph, "plain layouts", lambda _: {}) if plain else {})
    fallback = auto_collapse and max_nodes is None
    return _render(graph, MAX_NODES if max_nodes is None else max_nodes, None, fallback, "", **options)


def _render(graph: nx.DiGraph, budget: int, asked: int | None, fallback: bool, note: str,
            **options: Any) -> Rendering:
    plan = plan_layout(
        graph, collapse=options["collapse"], expand=options["expand"], auto=options["auto_collapse"],
        max_nodes=budget, long_edge=options["long_edge"], max_asked=asked, show_weights=options["show_weights"],
    )
    if plan.box_count > MAX_BOXES:
        raise RenderError(
            f"{plan.box_count} boxes are too many to lay out legibly (limit {MAX_BOXES}). "
            "Collapse module clusters (collapse=[...]) or keep auto_collapse=True."
        )
    fill, legend = _fills(graph, plan, options["color_by"], options["values"], options["marks"])
    stand_in = box_index(graph, options["show_weights"]).tree.stand_in  # a weight not drawn: the op reading it
    writer = _DotWriter(graph, plan, fill, {stand_in.get(n, n) for n in options["highlight"]})
    dot = graphviz.Digraph(
        name="fxviz",
        graph_attr={"rankdir": options["rankdir"], "nodesep": "0.25", "ranksep": "0.35", "fontname": "Helvetica",
                    "bgcolor": "transparent", "id": "fxgraph", **({"compound": "true"} if plan.into else {})},
        node_attr={"shape": "box", "style": "rounded,filled", "fontname": "Helvetica",
                   "fontsize": "11", "margin": "0.12,0.04", "height": "0.3", "penwidth": "0.8",
                   "color": "#6b7280"},
        edge_attr={"arrowsize": "0.6", "color": "#6b7280", "penwidth": "0.8"},
        body=writer.lines(),
    )
    if plan.closed:
        note = "; ".join(filter(None, [note, f"{len(plan.closed)} {'box' if len(plan.closed) == 1 else 'boxes'} "
                                             "left collapsed to keep the layout quick (open them one at a time)"]))
    coarser = None
    if fallback and plan.box_count > MIN_FALLBACK:  # half the boxes, asked open or not
        half = max(MIN_FALLBACK, plan.box_count // 2)
        # Half the time too (at least 1 s, never more than this one's): the fallback waits at most ~2x layout_timeout.
        timeout = options["layout_timeout"]
        coarser = partial(_render, graph, min(budget, half), half, True,
                          **{**options, "layout_timeout": min(timeout, max(1.0, timeout / 2))})
    return Rendering(dot, writer.elements, legend, tuple(sorted(plan.collapsed)), options["layout_timeout"],
                     plan.box_count, tuple(plan.opened), note, coarser, options["laid_out"])


def to_dot(source: torch.fx.GraphModule | nx.DiGraph, **options: Any) -> graphviz.Digraph:
    """The DOT of :func:`render` (a ``graphviz.Digraph``; ``.source`` is the text)."""
    return render(source, **options).dot


def to_svg(source: torch.fx.GraphModule | nx.DiGraph, **options: Any) -> str:
    """The laid-out SVG of :func:`render` (``Rendering.drawn``), ready to embed in HTML."""
    return render(source, **options).drawn().svg


def _fills(graph: nx.DiGraph, plan: LayoutPlan, color_by: str | None, values: Mapping[str, float] | None,
           marks: Mapping[str, str] | None) -> tuple[dict[Unit, str], list[dict[str, str]]]:
    """Fill colour per drawn box (node or collapsed module) and the matching legend."""
    boxes: dict[Unit, list[str]] = {("collapsed", path): members for path, members in plan.members.items()}
    boxes.update((("node", key), [key]) for items in plan.children.values() for kind, key in items if kind == "node")
    return colour_modes.fills(graph, boxes, color_by, marks if marks is not None else values)


def _quote(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, newlines dropped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def _node_label(attrs: dict[str, Any]) -> str:
    target = attrs["target"]
    # A parameter or buffer (an attribute, or an input dynamo or AOT lifted, whose target is
    # its qualified name) is named as the model names it (`layer1.0.conv1.weight`), not by its
    # identifier-safe node name; a plain input keeps its name (dynamo's `l_x_` has target `L_x_`).
    lifted = attrs["op"] == "placeholder" and target.lower() != attrs["name"].lower() and target.lstrip("*") != attrs["name"]
    by_target = attrs["op"] == "get_attr" or lifted
    rows = [f"<B>{escape(_shorten(target if by_target else attrs['name']))}</B>"]
    if attrs["op"] == "call_module":
        path, _, kind = target.partition(" (")
        # `layer1.0.conv1 (Conv2d)` on node `layer1_0_conv1` says no more than `Conv2d`.
        target = kind.rstrip(")") if path.replace(".", "_") == attrs["name"] else target
    if attrs["op"] not in ("placeholder", "output", "get_attr") and target != attrs["name"]:
        rows.append(f'<FONT POINT-SIZE="9">{escape(_shorten(target))}</FONT>')
    shape = attrs.get("about") or shape_text(attrs.get("shape"))  # an output says what it holds
    if shape:
        rows.append(f'<FONT POINT-SIZE="8">{escape(_shorten(shape))}</FONT>')
    return "<" + "<BR/>".join(rows) + ">"


def human_flops(flops: float) -> str:
    """``1.82 GFLOPs``, ``340 MFLOPs``, ``12 kFLOPs``."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if flops >= scale:
            return f"{flops / scale:.3g} {prefix}FLOPs"
    return f"{flops:.0f} FLOPs"


def _colors(fill: str) -> str:
    """Fill plus a text colour that stays readable on it (heat colours get dark)."""
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    ink = "#111827" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#ffffff"
    return f'fillcolor="{fill}" fontcolor="{ink}"'


def _shorten(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _DotWriter:
    """Writes the body lines of the DOT graph from a layout plan (plain strings are ~3.5x
    faster than building it with graphviz.Digraph calls). DOT ids are
    generated (n12, c3, s0), never user text."""

    def __init__(self, graph: nx.DiGraph, plan: LayoutPlan, fill: dict[Unit, str], highlight: set[str]):
        self.graph, self.plan, self.fill, self.highlight = graph, plan, fill, highlight
        self.elements: dict[str, dict[str, Any]] = {}
        self.ids: dict[tuple[str, Any], str] = {}
        self.cluster_of: dict[str, int] = {}  # open box -> its cluster's number
        # summed per collapsed box, once per box of a graph (its members: its graph's, whatever else is open)
        self.flops = colour_modes.node_attr(graph, "flops") if plan.members else {}

    def _id(self, kind: str, key: Any) -> str:
        return self.ids.setdefault((kind, key), f"{kind[0]}{len(self.ids)}")

    def lines(self) -> list[str]:
        out: list[str] = []
        stubs_in: dict[str, list[int]] = {}
        for k, (_producer, where) in enumerate(self.plan.stubs):
            stubs_in.setdefault(where, []).append(k)
        self._items("", out, "\t", stubs_in)
        for tail, head in self.plan.edges:
            into = self.plan.into.get((tail, head))  # drawn to the border of the cluster of twins it feeds
            end = "" if into is None else (f' [lhead=cluster_{self.cluster_of[into[0]]} label="each of {into[1]}" '
                                           'fontname=Helvetica fontsize=8]')  # black: the theme's ink in the Explorer
            out.append(f"\t{self._id(*tail)} -> {self._id(*head)}{end}")
        return out

    def _items(self, path: str, out: list[str], indent: str, stubs_in: dict[str, list[int]]) -> None:
        for kind, key in self.plan.children.get(path, ()):
            if kind == "node":
                self._fx_node(key, out, indent)
            elif kind == "collapsed":
                self._collapsed_node(key, out, indent)
            else:
                cid = self.cluster_of[key] = len(self.elements)
                self.elements[f"fxcl-{cid}"] = {"kind": "cluster", "name": key}
                out.append(f"{indent}subgraph cluster_{cid} {{")
                out.append(f'{indent}\tid="fxcl-{cid}" label=<{escape(self.plan.labels[key])}> labeljust=l '
                           'fontsize=10 fontcolor="#374151" style="rounded,dashed" color="#9ca3af"')
                self._items(key, out, indent + "\t", stubs_in)
                out.append(f"{indent}}}")
        for k in stubs_in.get(path, ()):
            producer = self.plan.stubs[k][0]
            text = f"↳ {producer} and more" if k in self.plan.shared_stubs else f"↳ {producer}"
            self.elements[f"fxst-{k}"] = {"kind": "stub", "name": producer}
            out.append(f'{indent}{self._id("stub", k)} [id="fxst-{k}" label=<{escape(text)}> '
                       'shape=plain fontsize=9 fontcolor="#6b7280" style=""]')

    def _highlight(self, names: list[str]) -> str:  # nothing highlighted: a box's members are not scanned
        return "" if not self.highlight or self.highlight.isdisjoint(names) else f' penwidth=2.5 color="{HIGHLIGHT_COLOR}"'

    def _fx_node(self, name: str, out: list[str], indent: str) -> None:
        attrs = {"name": name, **self.graph.nodes[name]}
        self.elements[f"fx-{name}"] = {"kind": "node", "name": name}
        shape = " shape=ellipse style=filled" if attrs["op"] in ("placeholder", "output") else ""
        out.append(f'{indent}{self._id("node", name)} [id={_quote("fx-" + name)} label={_node_label(attrs)} '
                   f'{_colors(self.fill[("node", name)])}{shape}{self._highlight([name])}]')

    def _collapsed_node(self, path: str, out: list[str], indent: str) -> None:
        members = self.plan.members[path]
        cid = len(self.elements)
        self.elements[f"fxco-{cid}"] = {"kind": "collapsed", "name": path, "count": len(members)}
        flops = derived(self.graph, ("flops", path), lambda _: sum(filter(None, map(self.flops.get, members))))
        detail = f"{len(members)} nodes" + (f" · {human_flops(flops)}" if flops else "") + " · ⊕"
        label = (f"<<B>{escape(self.plan.labels[path])}</B><BR/>"
                 f'<FONT POINT-SIZE="9">{escape(detail)}</FONT>>')
        out.append(f'{indent}{self._id("collapsed", path)} [id="fxco-{cid}" label={label} shape=box3d '
                   f'style=filled {_colors(self.fill[("collapsed", path)])}{self._highlight(members)}]')

"""The graph drawings a report carries, since a page without a kernel cannot lay out.

Expanding and collapsing in the Explorer re-runs Graphviz; a report can only switch
between drawings made in advance. All combinations of open modules are far too many
(2^clusters), so a report follows one rule it can honour everywhere: **a focus**. The
view focused on module ``m`` opens ``m`` and its ancestors and collapses everything
else; the focus ``""`` is the top level with every module collapsed. Expanding a
collapsed module focuses it; collapsing an open one focuses its parent. Focuses are
drawn breadth first from the top level (the overview first, then one level deeper, ...)
up to ``max_views`` per step (by default :data:`VIEWS`, or more while their boxes total under
:data:`SMALL_BOXES`: a small model's every view), plus ``"*"``: the Explorer's own first
view (auto-collapse to its box budget). Of a run of identical sibling modules (a transformer's layers) the
first is drawn with the modules of its own level and its twins only after every other
module: they say what it says, and each costs as much to lay out (dot's layouts were most
of a fresh program's report, 41 views of which 30 were 24 layers and their insides).
Identical DOT is laid out once, however many steps share it.
"""
from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from fxviz.errors import RenderError
from fxviz.draw.layout_index import box_index
from fxviz.draw.render import Rendering, render

ALL = "*"  # the key of the Explorer's own first view
WORKERS = 4  # layouts (dot processes) at once


@dataclass
class Views:
    """Drawings of all steps: ``variants`` (one per distinct DOT, in order) and, per
    step, focus -> index into ``variants``."""

    variants: list[Rendering] = field(default_factory=list)
    per_step: list[dict[str, int]] = field(default_factory=list)
    pool: Executor | None = None  # where each new variant starts laying out as it is added
    _by_dot: dict[str, int] = field(default_factory=dict)
    _layouts: list[Future] = field(default_factory=list)  # one per variant laid out or under way

    def add(self, rendering: Rendering) -> int:
        """The index of ``rendering``'s DOT among the variants, added (and, with a ``pool``,
        its layout started: dot works while the next views are drawn) when new."""
        key = rendering.dot.source  # not a digest: hashlib lets go of the GIL, then waits ms to get it back
        if key not in self._by_dot:
            self._by_dot[key] = len(self.variants)
            self.variants.append(rendering)
            if self.pool is not None:
                self.lay_out(self.pool)
        return self._by_dot[key]

    def lay_out(self, pool: Executor) -> None:
        """Start laying out the variants added since the last call in ``pool``'s threads
        (``dot`` runs in subprocesses: the caller's Python goes on meanwhile)."""
        self._layouts += [pool.submit(_layout, r) for r in self.variants[len(self._layouts):]]

    def svgs(self, workers: int = WORKERS) -> list[str | RenderError]:
        """Lay out every variant not yet under way (:meth:`lay_out`, ``workers`` at once)
        and wait for all; one that runs out of time is replaced by its coarser drawing
        (``Rendering.drawn``), and a layout that fails gives its error, which the page
        shows instead."""
        with ThreadPoolExecutor(workers) as pool:
            self.lay_out(pool)
            done = [layout.result() for layout in self._layouts]
        self.variants = [rendering for rendering, _ in done]
        return [svg for _, svg in done]


def _layout(rendering: Rendering) -> tuple[Rendering, str | RenderError]:
    drawn = rendering.drawn()
    try:
        return drawn, drawn.svg
    except RenderError as exc:
        return rendering, exc


def module_paths(graph: nx.DiGraph) -> set[str]:
    """Every module path and its ancestors (``render`` ignores the ones it does not draw), and
    every box of a module's call (``update@1``, its ``update@1.gate``: a module called several
    times has a box per call), which a focus collapses as it does the module's first call."""
    paths = {key for key, box in box_index(graph).tree.boxes.items() if key and not box.synthetic}
    for path in {attrs.get("module_path") or "" for _, attrs in graph.nodes(data=True)}:  # each once
        parts = path.split(".")
        paths.update(".".join(parts[: i + 1]) for i in range(len(parts)) if parts[0])
    return paths


def chain(path: str) -> list[str]:
    """``a.b.c`` -> ``[a, a.b, a.b.c]``; the top level ``""`` -> ``[]``."""
    parts = path.split(".") if path else []
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def boxes_around(graph: nx.DiGraph, focus: str) -> list[str]:
    """``focus`` and the boxes it lies in: the drawing's own (a call inside a loop's iteration
    box lies in that box, not in a module its path names), else :func:`chain` of the path."""
    tree = box_index(graph).tree
    return tree.chain(focus) if focus in tree.boxes else chain(focus)


def box_places(graph: nx.DiGraph) -> dict[str, dict[str, str | None]]:
    """What the page needs to find a drawing's boxes where a module path would mislead it:
    ``node``, each node whose box is not its module (``block@1``: the second call of ``block``;
    a stretch of plain ops), and ``parent``, each box whose parent is not its dotted path's
    (a call inside a loop's iteration box), and ``label``, the words of each box that a path
    does not name (``block #2 · Block``, ``iteration 3 of 12 · …``). Only those: the page falls back to the path."""
    tree = box_index(graph).tree
    return {"node": {name: box for name, box in tree.box_of.items()
                     if name in graph and box != (graph.nodes[name].get("module_path") or "")},
            "parent": {path: box.parent for path, box in tree.boxes.items()
                       if path and box.parent != path.rpartition(".")[0]},
            "label": {path: box.label for path, box in tree.boxes.items() if "@" in path or box.synthetic}}


def focused(graph: nx.DiGraph, focus: str, paths: set[str]) -> Rendering:
    """The drawing with ``focus`` and its ancestors open and every other module collapsed."""
    open_ = set(boxes_around(graph, focus))
    return render(graph, collapse=sorted(paths - open_), expand=[focus] if focus else ())


#: Focused views per step by default: the top level and one of each kind of module down to
#: a transformer layer's parts (dot's layouts of 40 were 70 % of a 24-layer program's report) ...
VIEWS = 12
#: ... or more while they total fewer boxes than this: resnet18's 16 views (298 boxes) all,
#: cheap to lay out, where a 24-layer program's 12 hold 412
SMALL_BOXES = 400


def step_views(graph: nx.DiGraph, views: Views, max_views: int | None) -> dict[str, int]:
    """Draw the focuses of one step (``max_views`` of them, None: the default rule; breadth first,
    twins last: see the module doc) and the Explorer's first view; returns focus -> variant index."""
    paths = module_paths(graph)
    boxes = box_index(graph).tree.boxes
    order = {path: i for i, path in enumerate(boxes)}  # graph order: layers.2 before layers.10
    twin = twins(graph, boxes)
    out = {}
    with contextlib.suppress(RenderError):  # too many boxes: the focused views remain
        out[ALL] = views.add(render(graph))
    queue, later = collections.deque([""]), collections.deque()
    seen, drawn = {""}, 0  # boxes in the views drawn so far
    while (queue or later) and (len(out) <= (VIEWS if max_views is None else max_views)
                                or (max_views is None and drawn < SMALL_BOXES)):
        focus = (queue or later).popleft()
        try:
            rendering = focused(graph, focus, paths)
        except RenderError:  # a module with too many nodes of its own: not drawn
            continue
        out[focus] = views.add(rendering)
        drawn += rendering.box_count
        for inner in sorted(rendering.collapsed, key=lambda p: order.get(p, len(order))):
            if inner not in seen:
                seen.add(inner)
                (later if any(p in twin for p in boxes_around(graph, inner)) else queue).append(inner)
    return out


def twins(graph: nx.DiGraph, boxes: dict[str, Any]) -> set[str]:
    """The boxes that repeat an earlier sibling of the same kind in a run of identical
    modules (``layers.1`` .. ``layers.23`` after ``layers.0``), as the drawing marks such runs."""
    kinds = graph.graph.get("module_types", {})
    first: set[tuple[str | None, str | None]] = set()
    found = set()
    for path, box in boxes.items():  # children in graph order
        if not box.repeated:
            continue
        kind = (box.parent, None) if box.synthetic else (path.rpartition(".")[0], kinds.get(path))  # ranges: by owner
        if kind in first:
            found.add(path)
        first.add(kind)
    return found


def draw_all(graphs: Iterable[nx.DiGraph], max_views: int, pool: Executor) -> Views:
    """Views of every step, each laid out in ``pool`` from the moment it is drawn, while
    the next are drawn (``Views.svgs`` waits for them): dot's layouts, not the drawing,
    are most of a report's time, so they start first. What each drawing derives from all
    of a graph's nodes is computed once per graph (:mod:`fxviz.annotation.graph_memo`)."""
    views = Views(pool=pool)
    for graph in graphs:
        views.per_step.append(step_views(graph, views, max_views))
    return views


def variant_record(rendering: Rendering, svg: str | RenderError) -> dict[str, Any]:
    """What the graph view's traitlets need for one drawing (or why it is missing)."""
    if isinstance(svg, RenderError):
        return {"svg": "", "elements": {}, "legend": [], "collapsed": [], "error": str(svg)}
    return {"svg": svg, "elements": rendering.elements, "legend": rendering.legend,
            "collapsed": list(rendering.collapsed)}

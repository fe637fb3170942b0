"""What to lay out: which boxes of the tree stay open, which collapse, which edges become stubs.

Pure graph bookkeeping with no Graphviz, so the rules that keep layouts fast and
legible can be tested directly. What is drawn is bounded by the box budget (every box's
children are bounded, see layout_tree), and so is a plan's cost once the graph's box
tree is indexed (layout_index): a collapsed box brings its edges to the outside, not its inside.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import networkx as nx

from fxviz.background._gc import gc_paused
from fxviz.draw.layout_index import BoxIndex, Unit, Units, box_index
from fxviz.draw.layout_paths import FAN_OUT
from fxviz.draw.layout_tree import DENSE_EDGES, Box, BoxTree

MAX_STUBS_PER_CLUSTER = 8  # more far inputs into one cluster share one "↳ name and more" stub
# dot's time follows boxes, edges, clusters and crossings (edges spanning many boxes, in
# dense graphs): a plan's `work` sums them, and stays under WORK_PER_BOX per box of budget
# (bench/layout_ops.py: at 8,000 dot takes 0.1-0.5 s on one quiet core, at 15,000 0.6-1.1 s,
# at 47,000 (92 boxes, 1,400 crossing edges) 5.8 s).
WORK_PER_BOX = 32
ASKED = 4  # boxes the user asked open may fill ASKED times the budget: it bounds legibility, work bounds time

Item = tuple[str, str]  # ("node", name) | ("cluster", path) | ("collapsed", path)


@dataclass
class LayoutPlan:
    unit_of: Units  # every FX node's drawn unit (a Mapping), derived from the tree on lookup
    children: dict[str, list[Item]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    collapsed: set[str] = field(default_factory=set)  # collapsed boxes that are drawn
    opened: list[str] = field(default_factory=list)  # boxes drawn open (clusters), most wanted first; no root
    members: dict[str, list[str]] = field(default_factory=dict)
    edges: list[tuple[Unit, Unit]] = field(default_factory=list)
    stubs: list[tuple[str, str]] = field(default_factory=list)  # (producer node, cluster path)
    # an edge drawn into its head's cluster for all the cluster's twins: (cluster, how many)
    into: dict[tuple[Unit, Unit], tuple[str, int]] = field(default_factory=dict)
    shared_stubs: set[int] = field(default_factory=set)  # stubs standing for several producers
    drawn: int = 0  # nodes and collapsed boxes drawn
    span: int = 0  # drawing-order distance summed over the drawn edges (stubs excluded)
    closed: list[str] = field(default_factory=list)  # boxes asked open (expand) that stay collapsed

    @property
    def box_count(self) -> int:
        return self.drawn + len(self.stubs)

    @property
    def work(self) -> float:
        """What dot's time grows with: boxes, edges, clusters, and crossings (edges times
        how many boxes they pass, per box: a dense block's edges cross each other)."""
        boxes, edges = max(self.box_count, 1), len(self.edges)
        return boxes + edges + 8 * len(self.opened) + self.span * edges / (5 * boxes)


def plan_layout(graph: nx.DiGraph, *, collapse: set[str], expand: Iterable[str], auto: bool,
                max_nodes: int, long_edge: int, max_asked: int | None = None,
                show_weights: bool = False) -> LayoutPlan:
    """``collapse``: boxes drawn closed. ``expand``, most wanted first: FX node names,
    whose every enclosing box opens whatever ``collapse`` says (revealing a node), and
    boxes to open with their ancestors (unless one of them is in ``collapse``). Without
    ``auto`` every box not in ``collapse`` is open. With ``auto`` the drawing keeps within
    ``WORK_PER_BOX * max_nodes`` of layout work and ``max_nodes`` boxes (stubs included),
    or ``max_asked`` (default ``ASKED * max_nodes``) with boxes in ``expand``: revealed
    nodes and the first box of ``expand`` open (a bounded chain of boxes); the other
    boxes open in order while they fit (the rest are ``closed``); then more boxes,
    shallow and structural first, while the drawing fits ``max_nodes``. Weights are drawn
    as nodes only with ``show_weights``; else revealing one reveals the op that reads it."""
    with gc_paused():  # a graph's first plan builds its tree: no collection should rescan it meanwhile
        index = box_index(graph, show_weights)
        expand = [index.tree.stand_in.get(key, key) for key in expand]
        return _plan(index, collapse, expand, auto, max_nodes, long_edge,
                     ASKED if max_asked is None else max_asked / max_nodes)


def _plan(index: BoxIndex, collapse: set[str], expand: list[str], auto: bool, max_nodes: int,
          long_edge: int, ratio: float) -> LayoutPlan:
    tree = index.tree
    collapse = {p for p in collapse if p in tree.boxes}
    must: list[str] = []
    for key in expand:
        if key in tree.box_of:  # a node: reveal it
            chain = tree.chain(tree.box_of[key])
            collapse.difference_update(chain)
            must.extend(reversed(chain))
    asked = [k for k in expand if k in tree.boxes and k not in tree.box_of and not collapse.intersection(tree.chain(k))]
    if asked:  # the first (the box just clicked) opens whatever the rest costs
        must.extend(reversed(tree.chain(asked[0])))
    wishes = asked[1:]
    if not auto:
        return _build(index, [p for p in tree.boxes if p and p not in collapse], [], long_edge)
    budget, plan, over = max_nodes, None, 1.0
    box_limit = max_nodes * (ratio if wishes else 1)
    for _ in range(24):  # shrink the box budget until the plan's boxes and work fit
        opened, closed = _choose_open(tree, collapse, must, wishes, budget, ratio)
        if plan is None or opened != plan.opened:
            plan = _build(index, opened, closed, long_edge)
            over = max(plan.box_count / box_limit, plan.work / (WORK_PER_BOX * max_nodes))
            if over <= 1:
                return plan
        elif set(opened) <= set(must):  # what must open is all there is
            return plan
        if budget <= 1:
            return plan
        budget = min(int(budget / over * 0.9), budget * 3 // 4)
    return plan


def _build(index: BoxIndex, opened: list[str], closed: list[str], long_edge: int) -> LayoutPlan:
    wanted = set(opened)
    plan = LayoutPlan(closed=closed, unit_of=Units(index.tree, wanted))
    _place(index, wanted, plan)
    placed = set(plan.opened)
    plan.opened = [p for p in opened if p in placed]
    _plan_edges(index, plan, long_edge)
    return plan


def _choose_open(tree: BoxTree, collapse: set[str], must: list[str], wishes: list[str],
                 budget: int, ratio: float) -> tuple[list[str], list[str]]:
    """Boxes to open, most wanted first, and the wishes left closed: ``must`` (chains
    from the root), then each wish with its ancestors while the drawing fits ``ratio``
    times the budget, then whole
    levels of boxes in order of information (modules and module ranges by depth, then
    node segments by depth). A level of modules opens whole or not at all (an even view);
    one of synthetic groups (ranges, segments) opens as far as it fits, in graph order,
    so a huge graph fills its budget."""
    boxes = tree.boxes
    opened = {"": None}  # an ordered set
    count = len(boxes[""].items)

    def open_(paths: Iterable[str]) -> None:
        nonlocal count
        for path in paths:
            if path not in opened:
                opened[path] = None
                count += len(boxes[path].items) - 1

    open_(must)
    closed = []
    for wish in wishes:
        chain = [p for p in reversed(tree.chain(wish)) if p not in opened]
        if count + sum(len(boxes[p].items) - 1 for p in chain) <= ratio * budget:
            open_(chain)
        elif wish not in opened:
            closed.append(wish)

    def candidates() -> list[Box]:
        found = []
        stack = [""]
        while stack:
            for kind, key in boxes[stack.pop()].items:
                if kind != "box":
                    continue
                if key in opened:
                    stack.append(key)
                elif key not in collapse and not _hidden(boxes[key]):
                    found.append(boxes[key])
        return found

    while True:
        pending = candidates()
        if not pending:
            break
        rank = min((b.nodes_only, b.depth) for b in pending)
        level = [b for b in pending if (b.nodes_only, b.depth) == rank]
        if count + sum(len(b.items) - 1 for b in level) > budget:
            if rank[0] or all(b.synthetic for b in level):  # groups: open those that fit, in order
                open_(b.path for b in level if count + len(b.items) - 1 <= budget)
            break
        open_(b.path for b in level)
    return list(opened)[1:], closed


def _hidden(box: Box) -> bool:
    """Boxes that start collapsed however much room there is: one of a run of identical
    blocks, setup plumbing, or a box whose children are so interconnected that opening it
    draws a hairball."""
    return box.repeated or box.setup or box.edges > DENSE_EDGES * len(box.items)


def _place(index: BoxIndex, opened: set[str], plan: LayoutPlan) -> None:
    """Children lists of open boxes, and the FX nodes of each collapsed one."""
    boxes = index.tree.boxes
    stack = [""]
    while stack:
        path = stack.pop()
        children = plan.children.setdefault(path, [])
        for kind, key in boxes[path].items:
            if kind == "node":
                children.append(("node", key))
                plan.drawn += 1
            elif key in opened:
                children.append(("cluster", key))
                plan.opened.append(key)
                plan.labels[key] = boxes[key].label
                stack.append(key)
            else:
                children.append(("collapsed", key))
                plan.collapsed.add(key)
                plan.labels[key] = boxes[key].label
                plan.drawn += 1
                plan.members[key] = index.members(key)


def _drawing_order(plan: LayoutPlan) -> tuple[dict[Unit, int], dict[Unit, str]]:
    """Each drawn unit's place in drawing order (graph order: children lists are in it)
    and the open box (cluster, or the root "") that holds it."""
    order: dict[Unit, int] = {}
    where: dict[Unit, str] = {}

    def visit(path: str) -> None:
        for kind, key in plan.children.get(path, ()):
            if kind == "cluster":
                visit(key)
            else:
                unit = ("node" if kind == "node" else "collapsed", key)
                order[unit], where[unit] = len(order), path

    visit("")
    return order, where


def _plan_edges(index: BoxIndex, plan: LayoutPlan, long_edge: int) -> None:
    """Edges between drawn units; one spanning more than ``long_edge`` units becomes a
    stub beside its consumer, since long edges make Graphviz's crossing minimisation
    explode. A cluster gets at most ``MAX_STUBS_PER_CLUSTER`` stubs. A unit read by every
    collapsed twin of a cluster (a mask, a rotary table read by each of 24 layers) gets
    one edge into the cluster (:func:`_fans`). Only the graph's edges that leave a drawn
    unit are read, in graph order (which decides the stubs)."""
    order, where_of = _drawing_order(plan)
    picked = [(i, ("collapsed", path)) for path in plan.collapsed for i in index.leaving(path)]
    picked += [(i, unit) for unit in order if unit[0] == "node" for i in index.out(unit[1])]
    picked.sort()  # positions are distinct: units are never compared
    edges, box_of, units = index.tree.edges, index.tree.box_of, plan.unit_of
    pairs = [(ut, units.of_box(box_of[edges[i][1]]) or ("node", edges[i][1]), edges[i][0]) for i, ut in picked]
    twins_of = _twins(index.tree, plan)
    fans = _fans(index.tree, pairs, order, where_of, twins_of)
    seen: set[tuple[Unit, Unit]] = set()
    stub_of: dict[tuple[Unit, str], int] = {}
    per_cluster: dict[str, int] = {}
    for ut, uh, tail in pairs:
        if ut == uh:
            continue
        distance = abs(order[uh] - order[ut])
        fan = fans.get((ut, where_of[uh])) if uh[0] == "collapsed" else None
        if fan is not None:
            if fan != uh:
                continue  # drawn as the one edge into the twins' cluster
            plan.into[(ut, uh)] = (where_of[uh], len(twins_of[where_of[uh]]))
        elif distance > long_edge:
            where = where_of[uh]
            key = (ut, where)
            if key not in stub_of and per_cluster.get(where, 0) >= MAX_STUBS_PER_CLUSTER:
                key = (("stub", -1), where)  # the cluster's shared stub for the rest
                if key not in stub_of:
                    plan.shared_stubs.add(len(plan.stubs))
            if key not in stub_of:
                stub_of[key] = len(plan.stubs)
                per_cluster[where] = per_cluster.get(where, 0) + 1
                plan.stubs.append((tail, where))
            ut, distance = ("stub", stub_of[key]), 1
        if (ut, uh) not in seen:
            seen.add((ut, uh))
            plan.edges.append((ut, uh))
            plan.span += distance


def _twins(tree: BoxTree, plan: LayoutPlan) -> dict[str, set[Unit]]:
    """Open box -> the collapsed repeated boxes drawn in it (one of a run of identical layers)."""
    twins: dict[str, set[Unit]] = {}
    for path in plan.collapsed:
        if tree.boxes[path].repeated:
            twins.setdefault(tree.boxes[path].parent or "", set()).add(("collapsed", path))
    return twins


def _fans(tree: BoxTree, pairs: list[tuple[Unit, Unit, str]], order: dict[Unit, int], where_of: dict[Unit, str],
          twins: dict[str, set[Unit]]) -> dict[tuple[Unit, str], Unit]:
    """(tail unit, cluster) -> the first twin, where the tail, outside the cluster, feeds
    every collapsed repeated box drawn in it, at least ``FAN_OUT`` of them: one edge into
    the cluster says as much as one to each, which cost dot most of a 24-layer decoder's
    layout (46 edges from its setup and rotary boxes) and crossed every other edge."""
    fed: dict[tuple[Unit, str], set[Unit]] = {}
    for ut, uh, _ in pairs:
        cluster = where_of.get(uh)
        if cluster and uh in twins.get(cluster, ()):
            fed.setdefault((ut, cluster), set()).add(uh)
    return {(ut, cluster): min(heads, key=order.__getitem__) for (ut, cluster), heads in fed.items()
            if len(heads) >= FAN_OUT and heads == twins[cluster] and cluster not in _clusters_of(tree, ut)}


def _clusters_of(tree: BoxTree, unit: Unit) -> list[str]:
    """The boxes a drawn unit is inside (a stub's: none it is drawn for)."""
    if unit[0] == "node":
        return tree.chain(tree.box_of[unit[1]])
    return tree.chain(unit[1]) if unit[0] == "collapsed" else []

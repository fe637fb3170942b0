"""What to lay out: which module clusters stay open, which collapse, which edges become stubs.

Pure graph bookkeeping with no Graphviz, so the rules that keep layouts fast and
legible can be tested directly.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import networkx as nx

SEGMENT = 64  # nodes per synthetic cluster when one module holds too many nodes of its own

Item = tuple[str, str]  # ("node", name) | ("cluster", path) | ("collapsed", path)
Unit = tuple[str, str | int]  # ("node", name) | ("collapsed", path) | ("stub", k)


@dataclass
class LayoutPlan:
    children: dict[str, list[Item]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    collapsed: set[str] = field(default_factory=set)
    members: dict[str, list[str]] = field(default_factory=dict)
    edges: list[tuple[Unit, Unit]] = field(default_factory=list)
    stubs: list[tuple[str, str]] = field(default_factory=list)  # (producer node, cluster path)
    unit_of: dict[str, Unit] = field(default_factory=dict)

    @property
    def box_count(self) -> int:
        return len(set(self.unit_of.values())) + len(self.stubs)


def effective_path(attrs: dict) -> str:
    """The cluster a node is drawn in: a leaf module's own call sits in its parent module."""
    path = attrs.get("module_path") or ""
    if attrs["op"] == "call_module" and path and attrs.get("target", "").split(" ")[0] == path:
        return path.rpartition(".")[0]
    return path


def _prefixes(path: str) -> list[str]:
    parts = path.split(".") if path else []
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _segment(graph: nx.DiGraph, paths: dict[str, str]) -> None:
    """Split a module's own nodes into consecutive synthetic clusters when there are many."""
    own: dict[str, list[str]] = defaultdict(list)
    for name, path in paths.items():
        own[path].append(name)
    for path, names in own.items():
        if len(names) <= SEGMENT:
            continue
        for start in range(0, len(names), SEGMENT):
            chunk = names[start : start + SEGMENT]
            first, last = graph.nodes[chunk[0]]["index"], graph.nodes[chunk[-1]]["index"]
            label = f"⟨nodes {first}–{last}⟩"
            for name in chunk:
                paths[name] = f"{path}.{label}" if path else label


def _gather_scattered(graph: nx.DiGraph, paths: dict[str, str]) -> None:
    """Draw in the parent module the nodes of a module whose nodes lie far apart in
    graph order: a module called from several places (torchvision's shared ReLU once
    lowered) would otherwise wrap distant nodes in one box and tangle the layout."""
    spans: dict[str, list[int]] = {}  # path -> [first index, last index, node count]
    for name, path in paths.items():
        index = graph.nodes[name]["index"]
        for prefix in _prefixes(path):
            span = spans.setdefault(prefix, [index, index, 0])
            span[0], span[1], span[2] = min(span[0], index), max(span[1], index), span[2] + 1
    scattered = {p for p, (first, last, count) in spans.items() if last - first + 1 > 2 * count}
    for name, path in paths.items():
        while path in scattered:
            path = path.rpartition(".")[0]
        paths[name] = path


def _units(paths: dict[str, str], collapsed: set[str]) -> dict[str, Unit]:
    units: dict[str, Unit] = {}
    for name, path in paths.items():
        top = next((p for p in _prefixes(path) if p in collapsed), None)
        units[name] = ("collapsed", top) if top else ("node", name)
    return units


def _choose_collapsed(paths: dict[str, str], collapse: set[str], expand: set[str],
                      auto: bool, max_nodes: int) -> set[str]:
    all_paths = {p for path in paths.values() for p in _prefixes(path)}
    protected = {p for path in expand for p in _prefixes(path)}
    chosen = {p for p in collapse if p in all_paths}
    if not auto or len(set(_units(paths, chosen).values())) <= max_nodes:
        return chosen
    deepest = max((p.count(".") + 1 for p in all_paths), default=0)
    candidate = chosen
    for depth in range(deepest, 0, -1):  # keep as much detail as fits: deepest level first
        level = {p for p in all_paths if p.count(".") + 1 == depth and p not in protected}
        candidate = chosen | level
        if len(set(_units(paths, candidate).values())) <= max_nodes:
            return candidate
    return candidate


def plan_layout(graph: nx.DiGraph, *, collapse: set[str], expand: set[str], auto: bool,
                max_nodes: int, long_edge: int) -> LayoutPlan:
    paths = {name: effective_path(attrs) for name, attrs in graph.nodes(data=True)}
    _gather_scattered(graph, paths)
    if len(paths) > max_nodes and auto:
        _segment(graph, paths)
    collapsed = _choose_collapsed(paths, collapse, expand, auto, max_nodes)
    units = _units(paths, collapsed)
    module_types = graph.graph.get("module_types", {})
    plan = LayoutPlan(collapsed={u[1] for u in units.values() if u[0] == "collapsed"}, unit_of=units)

    placed: set[Item] = set()

    def place(parent: str, item: Item) -> None:
        if item not in placed:
            placed.add(item)
            plan.children.setdefault(parent, []).append(item)

    for name, path in paths.items():
        unit = units[name]
        chain = _prefixes(unit[1].rpartition(".")[0] if unit[0] == "collapsed" else path)
        parent = ""
        for prefix in chain:
            place(parent, ("cluster", prefix))
            parent = prefix
        if unit[0] == "collapsed":
            place(parent, ("collapsed", unit[1]))
            plan.members.setdefault(unit[1], []).append(name)
        else:
            place(parent, ("node", name))
    for path in {p for items in plan.children.values() for kind, p in items if kind != "node"}:
        short = path.rpartition(".")[2]
        kind = module_types.get(path)
        plan.labels[path] = f"{short} · {kind}" if kind else short
    _plan_edges(graph, plan, paths, long_edge)
    return plan


def _plan_edges(graph: nx.DiGraph, plan: LayoutPlan, paths: dict[str, str], long_edge: int) -> None:
    """Short edges are drawn; a long one becomes a stub beside its consumer, since long
    edges are what makes Graphviz's crossing minimisation explode."""
    seen: set[tuple[Unit, Unit]] = set()
    stub_index: dict[tuple[Unit, str], int] = {}
    index = nx.get_node_attributes(graph, "index")
    for tail, head in graph.edges:
        ut, uh = plan.unit_of[tail], plan.unit_of[head]
        if ut == uh:
            continue
        if abs(index[head] - index[tail]) > long_edge:
            where = uh[1].rpartition(".")[0] if uh[0] == "collapsed" else paths[head]
            key = (ut, where)
            if key not in stub_index:
                stub_index[key] = len(plan.stubs)
                plan.stubs.append((tail, where))
            ut = ("stub", stub_index[key])
        if (ut, uh) not in seen:
            seen.add((ut, uh))
            plan.edges.append((ut, uh))

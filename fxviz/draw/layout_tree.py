"""The tree of boxes a drawing can open or collapse: modules (a box per call of a module
called several times: layout_paths), and synthetic groups that keep every box's list of
children short.

A module with more than ``MAX_ITEMS`` children gets them grouped (layout_groups): long runs
of its own nodes into segments ("nodes 120–151"), long runs of sibling modules into ranges
("layers 0–31"), hierarchically, so opening any box adds a bounded number of boxes and
a planner can always reach its budget. Built in one pass over the graph (linear).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import networkx as nx

from fxviz.draw.layout_groups import REPEAT_RUN, Box, chunk, group
from fxviz.draw.layout_paths import SETUP, module_of, node_paths, setup_label, setup_paths

REPEAT_MIN_NODES = 6  # ...when each is a block worth hiding (not three conv-bn-relu)
DENSE_EDGES = 3  # a box whose children are joined by more edges than this per child starts collapsed
# A box whose children are joined by more edges than this has them grouped by SPLIT_CHUNK, so
# that opening it (a click, a reveal) stays a quick layout: dot needs 0.6 s for 30 nodes that
# each read every earlier one (435 edges), over 10 s for 48 (1,128; bench/layout_ops.py).
SPLIT_EDGES = 400
SPLIT_CHUNK = 16

@dataclass
class BoxTree:
    boxes: dict[str, Box]
    box_of: dict[str, str]  # FX node name -> the box that lists it
    edges: list[tuple[str, str]]  # the graph's edges, listed once for every drawing
    stand_in: dict[str, str] = field(default_factory=dict)  # a weight not drawn -> the op that reads it

    def chain(self, path: str) -> list[str]:
        """``path`` and its ancestors up to (excluding) the root ``""``."""
        out = []
        while path:
            out.append(path)
            path = self.boxes[path].parent or ""
        return out


def _heads(path: str) -> Iterator[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c``."""
    at = path.find(".")
    while at != -1:
        yield path[:at]
        at = path.find(".", at + 1)
    yield path


def _node_signature(attrs: dict) -> tuple:
    target = attrs.get("target", "")
    if attrs["op"] == "call_module":
        target = target.partition(" ")[2]  # "(Linear)": the kind, not the path
    return attrs["op"], target, attrs.get("shape")  # shapes too: resnet's layer2..4 differ


def build_tree(graph: nx.DiGraph, weights_as_nodes: bool = False) -> BoxTree:
    """The box tree of ``graph`` (a :func:`fxviz.to_networkx` graph), children in graph
    order. Weights (parameters, buffers, constants) are attributes of the ops that read
    them, not boxes, unless ``weights_as_nodes``: boxes of them crowd a model's first view
    and, read far from their module's ops, break its boxes into "nodes N–M" segments. So
    are a module's few input checks (layout_paths); setup plumbing is one box."""
    module_types = graph.graph.get("module_types", {})
    hidden, stand_in = set(), {}
    if not weights_as_nodes:
        for name, attrs in graph.nodes(data=True):
            if attrs.get("weight"):
                hidden.add(name)
                user = next((u for u in attrs["users"] if not graph.nodes[u].get("weight")), None)
                if user is not None:
                    stand_in[name] = user
    paths = node_paths(graph, hidden)
    setup, checks = setup_paths(graph, paths)
    paths.update(setup)
    if checks and not weights_as_nodes:  # a check is shown where its box's first op is
        boxes_of = {name: paths.pop(name) for name in checks}
        first: dict[str, str] = {}
        for name, path in paths.items():
            first.setdefault(path, name)
        hidden.update(checks)
        stand_in.update((name, first.get(box, name)) for name, box in boxes_of.items())
    boxes = {"": Box("", None, "")}
    signature: dict[str, list] = defaultdict(list)
    first_calls = {part[:-2] for path in set(paths.values()) if "@1" in path  # boxes of modules called again
                   for part in _heads(path) if part.endswith("@1")}

    def box(path: str) -> Box:
        if path not in boxes:
            parent = box(path.rpartition(".")[0])
            short, kind = path.rpartition(".")[2], module_types.get(module_of(path))
            name, _, call = short.partition("@")
            short = f"{name} #{int(call) + 1}" if call else f"{name} #1" if path in first_calls else name
            boxes[path] = Box(path, parent.path, f"{short} · {kind}" if kind else short, depth=parent.depth + 1)
            parent.items.append(("box", path))
            signature[parent.path].append(("box", path))
        return boxes[path]

    owner = boxes[""]
    items, signs = owner.items, signature[""]
    for name, attrs in graph.nodes(data=True):
        if hidden and name in hidden:
            continue
        if paths[name] != owner.path:  # neighbours mostly share a box
            owner = box(paths[name])
            items, signs = owner.items, signature[owner.path]
        items.append(("node", name))
        signs.append(_node_signature(attrs))
        owner.size += 1
    for path in set(setup.values()):
        found = boxes[path]
        found.setup = True
        if path.endswith(SETUP):  # a module that is all setup keeps its module's name
            found.synthetic, found.label = True, setup_label(graph, [name for _, name in found.items])
    for path in sorted(boxes, key=lambda p: -boxes[p].depth):  # children before parents
        if path:
            boxes[boxes[path].parent].size += boxes[path].size
    if any(attrs.get("shape") is not None for _, attrs in graph.nodes(data=True)):
        _mark_repeats(boxes, signature, module_types)  # without shapes, "identical" is a guess
    for path in [p for p in boxes if not boxes[p].synthetic or boxes[p].setup]:
        group(boxes, boxes[path], graph)
    edges = [(tail, head) for tail, heads in graph.adjacency() if tail not in hidden  # 3x graph.edges
             for head in heads if head not in hidden]
    box_of = _box_of(boxes, paths)
    _count_edges(boxes, edges, box_of)
    crowded = {b.path: b.edges for b in boxes.values() if b.edges > SPLIT_EDGES and len(b.items) > SPLIT_CHUNK}
    if crowded:
        for path in crowded:
            boxes[path].items = chunk(boxes, boxes[path], boxes[path].items, graph, SPLIT_CHUNK)
        box_of = _box_of(boxes, paths)
        _count_edges(boxes, edges, box_of)
        for path, count in crowded.items():  # still as dense to look at: it starts collapsed
            boxes[path].edges = max(boxes[path].edges, count)
    _set_depths(boxes)  # groups moved their children down: depths once, at the end
    return BoxTree(boxes, box_of, edges, stand_in)


def _box_of(boxes: dict[str, Box], paths: dict[str, str]) -> dict[str, str]:
    """Each FX node's box: its module's, or the node segment that grouping moved it into."""
    box_of = dict(paths)
    for box in boxes.values():
        if box.synthetic:
            box_of.update((name, box.path) for kind, name in box.items if kind == "node")
    return box_of


def _set_depths(boxes: dict[str, Box]) -> None:
    depth = {"": 0}

    def of(path: str) -> int:
        if path not in depth:
            depth[path] = of(boxes[path].parent) + 1
        return depth[path]

    for path, box in boxes.items():
        box.depth = of(path)


def _count_edges(boxes: dict[str, Box], edges: list[tuple[str, str]], box_of: dict[str, str]) -> None:
    """Per box, the distinct edges between its children: each graph edge counts in the
    innermost box holding both ends (densenet's blocks join every layer to every later one)."""
    for box in boxes.values():
        box.edges = 0
    chains: dict[str, list[str]] = {}

    def chain(path: str) -> list[str]:  # the path, then its ancestors up to the root ""
        if path not in chains:
            parent = boxes[path].parent
            chains[path] = [path] + (chain(parent) if parent is not None else [])
        return chains[path]

    pairs: set[tuple[str, str, str]] = set()
    for tail, head in edges:
        box_t, box_h = box_of[tail], box_of[head]
        if box_t == box_h:  # the common case: two nodes of one box, an edge drawn as it is
            boxes[box_t].edges += 1  # (graph edges are distinct: no set needed)
            continue
        up_t, up_h = chain(box_t), chain(box_h)
        common = set(up_t).intersection(up_h)
        lca = next(p for p in up_t if p in common)
        below_t = up_t[up_t.index(lca) - 1] if up_t[0] != lca else tail
        below_h = up_h[up_h.index(lca) - 1] if up_h[0] != lca else head
        if below_t != below_h:
            pairs.add((lca, below_t, below_h))
    for lca, _t, _h in pairs:
        boxes[lca].edges += 1


def _mark_repeats(boxes: dict[str, Box], signature: dict[str, list], module_types: dict[str, str]) -> None:
    """Mark runs of ``REPEAT_RUN`` or more identical sibling modules (same type, same ops
    and output shapes in the same order, recursively): they start collapsed, since one
    says what all say (ViT's twelve encoder layers)."""
    digest: dict[str, int] = {}
    for path in sorted(boxes, key=lambda p: -boxes[p].depth):  # children before parents
        parts = tuple(digest[item[1]] if item[0] == "box" else item for item in signature[path])
        digest[path] = hash((module_types.get(module_of(path)), parts))
    for parent in boxes.values():
        run: list[str] = []
        for kind, key in [*parent.items, ("node", "")]:
            if kind == "box" and run and digest[key] == digest[run[0]]:
                run.append(key)
                continue
            if len(run) >= REPEAT_RUN and boxes[run[0]].size >= REPEAT_MIN_NODES:
                for path in run:
                    boxes[path].repeated = True
            run = [key] if kind == "box" else []

"""The tree of boxes a drawing can open or collapse: modules, and synthetic groups that
keep every box's list of children short.

A module with more than ``MAX_ITEMS`` children gets them grouped: long runs of its own
nodes into segments ("nodes 120–151"), long runs of sibling modules into ranges
("layers 0–31"), hierarchically, so opening any box adds a bounded number of boxes and
a planner can always reach its budget. Built in one pass over the graph (linear).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import networkx as nx

from fxviz.draw.layout_paths import SETUP, node_paths, setup_label, setup_paths

MAX_ITEMS = 48  # a box with more children than this has them grouped
CHUNK = 32  # children per synthetic group
REPEAT_RUN = 3  # this many identical sibling modules in a row start collapsed
REPEAT_MIN_NODES = 6  # ...when each is a block worth hiding (not three conv-bn-relu)
DENSE_EDGES = 3  # a box whose children are joined by more edges than this per child starts collapsed
# A box whose children are joined by more edges than this has them grouped by SPLIT_CHUNK, so
# that opening it (a click, a reveal) stays a quick layout: dot needs 0.6 s for 30 nodes that
# each read every earlier one (435 edges), over 10 s for 48 (1,128; bench/layout_ops.py).
SPLIT_EDGES = 400
SPLIT_CHUNK = 16

Item = tuple[str, str]  # ("node", FX name) | ("box", path)


@dataclass
class Box:
    """A module (``synthetic=False``) or a group of consecutive children of one."""

    path: str
    parent: str | None
    label: str
    synthetic: bool = False
    items: list[Item] = field(default_factory=list)
    size: int = 0  # FX nodes inside
    depth: int = 0
    repeated: bool = False  # one of a run of identical sibling modules, or a range of them
    edges: int = 0  # distinct edges between its children, drawn when it opens
    nodes_only: bool = False  # a segment: a synthetic group of plain nodes (least informative)
    setup: bool = False  # the setup plumbing of its parent (layout_paths), drawn collapsed


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

    def box(path: str) -> Box:
        if path not in boxes:
            parent = box(path.rpartition(".")[0])
            short, kind = path.rpartition(".")[2], module_types.get(path)
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
        _group(boxes, boxes[path], graph)
    edges = [(tail, head) for tail, heads in graph.adjacency() if tail not in hidden  # 3x graph.edges
             for head in heads if head not in hidden]
    box_of = _box_of(boxes, paths)
    _count_edges(boxes, edges, box_of)
    crowded = {b.path: b.edges for b in boxes.values() if b.edges > SPLIT_EDGES and len(b.items) > SPLIT_CHUNK}
    if crowded:
        for path in crowded:
            boxes[path].items = _chunk(boxes, boxes[path], boxes[path].items, graph, SPLIT_CHUNK)
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
        digest[path] = hash((module_types.get(path), parts))
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


def _group(boxes: dict[str, Box], owner: Box, graph: nx.DiGraph) -> None:
    """Bound ``owner``'s children: group long runs of one kind first (nodes into segments,
    modules into ranges); when that is not enough, every run of nodes into a segment, so
    that its modules stay in view (RT-DETR's top level: 152 ops of query selection between
    7 modules drew as two "nodes" boxes); then whatever is still too long."""
    if len(owner.items) <= MAX_ITEMS:
        return
    runs: list[list[Item]] = []
    for item in owner.items:
        if runs and runs[-1][0][0] == item[0]:
            runs[-1].append(item)
        else:
            runs.append([item])
    pieces = [_chunk(boxes, owner, run, graph) if len(run) > MAX_ITEMS else run for run in runs]
    if sum(map(len, pieces)) > MAX_ITEMS:
        pieces = [[("box", _make_group(boxes, owner, piece, piece, graph))]
                  if len(piece) > 1 and all(kind == "node" for kind, _ in piece) else piece for piece in pieces]
    items = [item for piece in pieces for item in piece]
    owner.items = _chunk(boxes, owner, items, graph) if len(items) > MAX_ITEMS else items


def _chunk(boxes: dict[str, Box], owner: Box, items: list[Item], graph: nx.DiGraph,
           chunk: int = CHUNK) -> list[Item]:
    """``items`` as at most ``MAX_ITEMS`` groups of ``chunk`` consecutive items, nested as needed."""
    size = chunk
    while -(-len(items) // size) > MAX_ITEMS:
        size *= chunk
    out: list[Item] = []
    for start in range(0, len(items), size):
        part = items[start : start + size]
        if len(part) == 1:
            out.append(part[0])
            continue
        # nested only when the part makes several groups: one group of it would have the
        # part's own span, so its path, and replace this one (which would then list itself)
        inner = _chunk(boxes, owner, part, graph, chunk) if len(part) > chunk else part
        out.append(("box", _make_group(boxes, owner, part, inner, graph)))
    return out


def _span(boxes: dict[str, Box], items: list[Item], graph: nx.DiGraph) -> tuple[int, int, int]:
    """First and last FX index under ``items``, and their node count."""
    first_item, last_item = items[0], items[-1]
    while first_item[0] == "box":
        first_item = boxes[first_item[1]].items[0]
    while last_item[0] == "box":
        last_item = boxes[last_item[1]].items[-1]
    count = sum(boxes[k].size if kind == "box" else 1 for kind, k in items)
    return graph.nodes[first_item[1]]["index"], graph.nodes[last_item[1]]["index"], count


def _make_group(boxes: dict[str, Box], owner: Box, part: list[Item], inner: list[Item], graph: nx.DiGraph) -> str:
    first, last, count = _span(boxes, part, graph)
    path = f"{owner.path}.⟨{first}–{last}⟩" if owner.path else f"⟨{first}–{last}⟩"
    modules = [boxes[k] for kind, k in part if kind == "box" and not boxes[k].synthetic]
    nodes_only = all(kind == "node" or boxes[k].nodes_only for kind, k in part)
    if len(modules) == len(part):  # a range of sibling modules: "layers 0–31 · Block"
        names = [m.path.rpartition(".")[2] for m in modules]
        kinds = {m.label.partition(" · ")[2] for m in modules}
        prefix = owner.path.rpartition(".")[2]
        kind = kinds.pop() if len(kinds) == 1 else ""
        label = f"{prefix} {names[0]}–{names[-1]}".strip() + (f" · {kind}" if kind else "")
    else:
        label = f"nodes {first}–{last}"
    for _kind, key in inner:
        if _kind == "box":
            boxes[key].parent = path
    # A range of mostly identical blocks (a stack's first or last layer may differ) is as
    # uninformative opened as they are; a range of such ranges is not (it shows how many).
    modules_only = all(kind == "box" and not boxes[k].synthetic for kind, k in inner)
    repeated = modules_only and 2 * sum(boxes[k].repeated for _, k in inner) > len(inner)
    boxes[path] = Box(path, owner.path, label, synthetic=True, items=inner, size=count,
                      nodes_only=nodes_only, repeated=repeated)
    return path

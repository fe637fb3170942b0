"""What layout plans need of a graph's box tree, built once per graph and kept beside it:
each box's FX nodes and the edges leaving it, and each node's unit in a plan derived on
lookup, so that a plan costs what it draws, not the graph (a report draws ~80 plans of
~65 boxes each from one 100,000-node graph).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping

import networkx as nx

from fxviz.annotation.graph_memo import derived
from fxviz.draw.layout_tree import BoxTree, build_tree

Unit = tuple[str, str | int]  # ("node", name) | ("collapsed", path) | ("stub", k)


class BoxIndex:
    """A graph's box tree, with what each box drawn collapsed needs, listed the first
    time a plan draws it so (a box drawn in one report view is drawn in most)."""

    def __init__(self, tree: BoxTree):
        self.tree = tree
        self._members: dict[str, list[str]] = {}
        self._leaving: dict[str, list[int]] = {}
        self._out: dict[str, range] = {}  # a node's out-edges: consecutive in tree.edges
        start = 0
        for end, (tail, _head) in enumerate(tree.edges, 1):
            if end == len(tree.edges) or tree.edges[end][0] != tail:
                self._out[tail], start = range(start, end), end

    def out(self, name: str) -> range:
        """Positions in ``tree.edges`` of the edges leaving FX node ``name``."""
        return self._out.get(name, range(0))

    def members(self, path: str) -> list[str]:
        """The FX nodes inside box ``path``, in the tree's order."""
        found = self._members.get(path)
        if found is None:
            found = self._members[path] = []
            stack = [path]
            while stack:
                for kind, key in reversed(self.tree.boxes[stack.pop()].items):
                    if kind == "node":
                        found.append(key)
                    else:
                        stack.append(key)
        return found

    def leaving(self, path: str) -> list[int]:
        """Positions in ``tree.edges``, ascending, of the edges from inside box ``path`` to
        outside it: the first to each head (later ones join the same two units in any plan)."""
        found = self._leaving.get(path)
        if found is None:
            members, edges = self.members(path), self.tree.edges
            inside, first = set(members), {}
            for tail in members:
                for i in self.out(tail):
                    head = edges[i][1]
                    if head not in inside and i < first.get(head, len(edges)):
                        first[head] = i
            found = self._leaving[path] = sorted(first.values())
        return found


class Units(Mapping[str, Unit]):
    """Each FX node's unit in a plan that opens the boxes ``opened``: the node itself when
    every box around it is open, else the outermost closed box around it."""

    def __init__(self, tree: BoxTree, opened: set[str]):
        self._tree, self._opened = tree, opened
        self._of_box: dict[str, Unit | None] = {"": None}  # None: the box's nodes are drawn

    def of_box(self, path: str) -> Unit | None:
        """The unit of the nodes that box ``path`` lists, None where they are drawn."""
        if path not in self._of_box:
            outer = self.of_box(self._tree.boxes[path].parent)
            closed = outer is None and path not in self._opened
            self._of_box[path] = ("collapsed", path) if closed else outer
        return self._of_box[path]

    def __getitem__(self, name: str) -> Unit:
        return self.of_box(self._tree.box_of[name]) or ("node", name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tree.box_of)

    def __len__(self) -> int:
        return len(self._tree.box_of)


def box_index(graph: nx.DiGraph, show_weights: bool = False) -> BoxIndex:
    """The box tree of ``graph`` (weights drawn as nodes or not) and its index, built once
    per graph (:mod:`fxviz.annotation.graph_memo`): expanding a box or revealing a node then costs the
    drawing, not the graph."""
    return derived(graph, ("box_index", show_weights), lambda g: BoxIndex(build_tree(g, show_weights)))

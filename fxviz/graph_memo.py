"""Data derived from a whole graph, computed once per graph inside a block that changes no graph.

A drawing derives per-node data from every node of its graph (the colour mode's values,
FLOPs summed per collapsed box) although it shows a few dozen boxes; a report draws each
step some 40 times (:mod:`fxviz.report_views`). Inside :func:`unchanged_graphs` such data
is computed once per graph object and kept until the block ends. Outside it, it is
computed every time: a networkx graph can be changed in place without telling anyone, so
nothing is kept past a block whose code promises not to. The block is per thread (a
context variable): a drawing on another thread meanwhile computes its own.

>>> import networkx as nx
>>> g = nx.DiGraph(); g.add_node("a", op="call_function")
>>> ops = lambda graph: {n: a["op"] for n, a in graph.nodes(data=True)}
>>> with unchanged_graphs():
...     first = derived(g, "ops", ops)
...     g.nodes["a"]["op"] = "call_module"  # breaks the block's promise: the kept data is stale
...     derived(g, "ops", ops) is first
True
>>> derived(g, "ops", ops)  # outside the block: computed anew
{'a': 'call_module'}
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

# (id(graph), key) -> (graph, value); the graph is held so that its id is not reused in the block
_MEMO: ContextVar[dict[tuple[int, Hashable], tuple[Any, Any]] | None] = ContextVar("fxviz_graph_memo", default=None)


@contextmanager
def unchanged_graphs() -> Iterator[None]:
    """A block in which the caller changes no graph: :func:`derived` keeps what it computes
    until the block ends (nested blocks keep their own)."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def derived(graph: Any, key: Hashable, compute: Callable[[Any], T]) -> T:
    """``compute(graph)``: once per graph object and ``key`` inside :func:`unchanged_graphs`,
    every time outside it."""
    memo = _MEMO.get()
    if memo is None:
        return compute(graph)
    entry = memo.get((id(graph), key))
    if entry is None:
        entry = memo[(id(graph), key)] = (graph, compute(graph))
    return entry[1]

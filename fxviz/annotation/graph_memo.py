"""Data derived from a whole graph, computed once per graph.

The one rule: a networkx graph is not changed once built (a step's graph never is), so
what is derived from it (a drawing's colours, FLOPs per collapsed box and box tree, the
Explorer's node columns, memory per node) is kept per graph object and key for as long
as the graph lives, and goes with it. A drawing shows a few dozen boxes of a graph of
100,000 nodes, and a report draws each step some 40 times (:mod:`fxviz.report.views`).
Code that changes a graph in place after all calls :func:`forget`.

>>> import networkx as nx
>>> g = nx.DiGraph(); g.add_node("a", op="call_function")
>>> ops = lambda graph: {n: a["op"] for n, a in graph.nodes(data=True)}
>>> first = derived(g, "ops", ops)
>>> g.nodes["a"]["op"] = "call_module"  # changed in place: the kept data is stale until forgotten
>>> derived(g, "ops", ops) is first
True
>>> forget(g); derived(g, "ops", ops)
{'a': 'call_module'}
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

_KEPT: weakref.WeakKeyDictionary[Any, dict[Hashable, Any]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()  # the kernel's thread and the measuring worker's both draw


def derived(graph: Any, key: Hashable, compute: Callable[[Any], T]) -> T:
    """``compute(graph)``, once per graph object and ``key`` while the graph lives
    (computed outside the lock: two threads asking at once may both compute it)."""
    with _LOCK:
        kept = _KEPT.get(graph)
        if kept is not None and key in kept:
            return kept[key]
    value = compute(graph)
    with _LOCK:
        return _KEPT.setdefault(graph, {}).setdefault(key, value)


def forget(graph: Any) -> None:
    """Drop what was derived from ``graph``: it was changed in place."""
    with _LOCK:
        _KEPT.pop(graph, None)

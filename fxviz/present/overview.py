"""The graph as a whole, shown while no node is selected (the Explorer's and the report's
Details): its nodes by op, the FLOPs counted, how it was captured and, when
``tracer="auto"`` passed over methods before that one, what each said (why a graph is ATen
operators rather than the model's modules, say)."""
from __future__ import annotations

from collections import Counter
from typing import Any

import networkx as nx

from fxviz.capture.info import graph_info

OPS = ("placeholder", "get_attr", "call_module", "call_function", "call_method", "output")  # FX's order


def graph_overview(graph: nx.DiGraph, capture: Any = None) -> dict[str, Any]:
    """``{"rows": [(label, text)], "method": str, "tried": [(method, reason)]}`` for
    ``graph`` (a step's, :func:`fxviz.to_networkx`) made by ``capture`` (the session's
    :class:`~fxviz.capture.Capture`; None: not known, no capture rows)."""
    ops = Counter(op for _, op in graph.nodes(data="op"))
    counts = " · ".join(f"{op} {ops.pop(op):,}" for op in (*OPS, *sorted(ops)) if op in ops)
    calls = [attrs["flops"] for _, attrs in graph.nodes(data=True) if attrs["op"].startswith("call_")]
    counted = [f for f in calls if f is not None]
    total = sum(counted)
    total = f"{total:,}" if isinstance(total, int) else str(total)  # symbolic sizes: an expression, 32*s0
    flops = (f"{total} (counted for {len(counted):,} of {len(calls):,} calls)" if counted  # not counted is not 0
             else f"— (no FLOP formula for any of its {len(calls):,} calls)" if calls else "—")
    rows = [("nodes", f"{len(graph):,}: {counts}"), ("FLOPs", flops)]
    if capture is None:
        return {"rows": rows, "method": "", "tried": []}
    how = graph_info(capture.gm).how  # not the method's usual way (make_fx on fake tensors)
    rows[:0] = [("captured by", capture.about or capture.method), *([("traced", how)] if how else [])]
    return {"rows": rows, "method": capture.method, "tried": [list(pair) for pair in capture.attempts]}

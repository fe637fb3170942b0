"""What the Explorer shows of each node: node-table rows and the graph view's records.

The HTML report builds its node table with the same ``COLUMNS`` and :func:`rows`.
"""
from __future__ import annotations

from typing import Any

from fxviz.graph import shape_text

from .profiling import Timings

COLUMNS = [
    {"key": "index", "label": "#", "numeric": True},
    {"key": "name", "label": "name"},
    {"key": "op", "label": "op"},
    {"key": "target", "label": "target"},
    {"key": "module_path", "label": "module"},
    {"key": "shape", "label": "shape"},
    {"key": "flops", "label": "FLOPs", "numeric": True},
    {"key": "bytes", "label": "bytes moved", "numeric": True},
    {"key": "time_us", "label": "time (µs)", "numeric": True, "digits": 1},
    {"key": "share", "label": "share (%)", "numeric": True, "digits": 1},
]


def rows(graph: Any, timings: Timings | None) -> list[dict[str, Any]]:
    """One node-table row per node, in graph order, with its time when profiled."""
    table = timings.table.set_index("node") if timings is not None and timings.table is not None else None
    out = []
    for name, a in graph.nodes(data=True):
        timed = table is not None and name in table.index
        out.append({
            "index": a["index"], "name": name, "op": a["op"], "target": a["target"],
            "module_path": a["module_path"] or "", "shape": shape_text(a["shape"]),
            "flops": None if a["flops"] is None else int(a["flops"]),
            "bytes": a.get("bytes"),
            "time_us": float(table.at[name, "median_us"]) if timed else None,
            "share": float(table.at[name, "share"]) if timed else None,
        })
    return out


def view_record(row: dict[str, Any], graph: Any) -> dict[str, Any]:
    """What the graph view knows of a node: tooltip strings, and its inputs and users
    (in argument order) for walking the graph with the arrow keys."""
    name = row["name"]
    time = "" if row["time_us"] is None else f"{row['time_us']:.1f} µs ({row['share']:.1f} %)"
    return {"op": row["op"], "target": row["target"], "module_path": row["module_path"],
            "shape": row["shape"], "time": time,
            "inputs": list(graph.predecessors(name)), "users": list(graph.successors(name))}

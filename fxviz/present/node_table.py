"""The node table's columns, defined once: the Explorer's live table, its static copy,
a Step's or Session's HTML and the HTML report list these per node."""
from __future__ import annotations

import itertools
from typing import Any

from fxviz.annotation.graph import shape_text

#: key, label, and for numbers how many digits the live table shows
COLUMNS = [
    {"key": "index", "label": "#", "numeric": True},
    {"key": "name", "label": "name"},
    {"key": "op", "label": "op"},
    {"key": "target", "label": "target"},
    {"key": "module_path", "label": "module"},
    {"key": "shape", "label": "shape"},
    {"key": "weights", "label": "weights"},
    {"key": "flops", "label": "FLOPs", "numeric": True},
    {"key": "bytes", "label": "bytes moved", "numeric": True},
    {"key": "time_us", "label": "time (µs)", "numeric": True, "digits": 1},
    {"key": "share", "label": "share (%)", "numeric": True, "digits": 1},
]
TIME_KEYS = ("time_us", "share")  # measured later, by a profile: not node attributes


def values(graph: Any, limit: int | None = None) -> dict[str, list]:
    """Every column but the times, ``{key: values}``, of ``graph``'s first ``limit``
    nodes (default: all) in graph order, straight from the node attributes (no dict per
    node: 100k nodes); also ``weight``, no column: whether the node is a weight."""
    names = list(itertools.islice(graph, limit))
    attrs = [a for _, a in itertools.islice(graph.nodes(data=True), limit)]  # no (name, attrs) list: 100k tuples
    return {
        "index": [a["index"] for a in attrs], "name": names,
        "op": [a["op"] for a in attrs], "target": [a["target"] for a in attrs],
        "module_path": [a["module_path"] or "" for a in attrs],
        "shape": [shape_text(a["shape"]) for a in attrs],
        "weights": [weights_text(a.get("weights", ())) for a in attrs],
        "flops": [None if a["flops"] is None else int(a["flops"]) for a in attrs],
        "bytes": [a.get("bytes") for a in attrs], "weight": [a.get("weight", False) for a in attrs],
    }


def weights_text(weights: tuple) -> str:
    """A node's weights in one line, ``conv1.weight 64×3×7×7, conv1.bias 64`` (see
    :func:`fxviz.to_networkx`'s ``weights``); ``""`` when it reads none."""
    return ", ".join(f"{name} {shape}".rstrip() for name, shape, _dtype, _size in weights)


def human_bytes(size: float) -> str:
    """``37.6 kB``, ``1.2 MB``: decimal units, three digits."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size:.0f} B"


def error_column(previous: int) -> dict[str, Any]:
    """The node table's column of each node's relative error against step ``previous``
    (``Comparison.numerics``' max_rel), shown while the Explorer compares the two;
    numbers in two significant digits, as small errors need."""
    return {"key": "error", "label": f"error vs step {previous}", "numeric": True, "significant": 2, "width": 124}

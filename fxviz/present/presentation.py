"""One presentation of a node and a step: the display strings (units, rounding, "—" for
what was not counted) that the Explorer's Details tab, the HTML report and the static
copy all show, so that a change to how a time or a count reads is made here once and
the front-ends render the strings they are given.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from fxviz.present.columns import Columns
from fxviz.annotation.graph import shape_text
from fxviz.present.node_table import COLUMNS, TIME_KEYS, values

NOT_COUNTED = "—"
NOT_PROFILED = "not profiled yet"
NOT_CHECKED = "not checked yet"
#: a check's status -> its badge's class suffix (``fxviz-badge-<suffix>``); others: mismatch
CHECK_CLASSES = {"match": "match", "expected to differ": "expected", "mismatch": "mismatch", "error": "mismatch",
                 "nothing compared": "unknown", "not checked": "unknown", NOT_CHECKED: "pending"}
TIME_COLUMNS = ("median_us", "share")  # a profile table's, for the node table's TIME_KEYS
TABLE_KEYS = tuple(c["key"] for c in COLUMNS if c["key"] not in TIME_KEYS)
NO_TIMES = Columns()  # one object: a widget given it again sends nothing

_TIMED: weakref.WeakKeyDictionary[Any, tuple[Any, Columns]] = weakref.WeakKeyDictionary()


class NodeTime(NamedTuple):
    """One node's row of a profile: median and quartiles in µs, share of the step in %."""

    median_us: float
    p25_us: float
    p75_us: float
    share: float


def node_times(table: Any) -> dict[str, NodeTime]:
    """Each profiled node's time, by name, from a profile's table (None: none)."""
    if table is None:
        return {}
    columns = (table[c].astype(float) for c in NodeTime._fields)
    return {name: NodeTime(*row) for name, *row in zip(table["node"], *columns)}


def node_rows(graph: Any, name: str, times: Mapping[str, NodeTime] | None = None,
              untimed: str = NOT_PROFILED) -> list[tuple[str, str]]:
    """What is known of node ``name``, as ``(label, text)`` rows: ``times`` from
    :func:`node_times`; ``untimed`` says why a node has none."""
    return [(label, texts[0]) for label, texts in node_details(graph, [name], times, untimed).items()
            if texts[0] is not None]


def node_details(graph: Any, names: Sequence[str], times: Mapping[str, NodeTime] | None = None,
                 untimed: str = NOT_PROFILED) -> dict[str, list[str | None]]:
    """:func:`node_rows` of each node of ``names``, label by label (in the rows' order): the
    label's text per node, None where a node has no such row (``source``, ``holds``, ``share``).
    Column by column: a report carries every node's rows, and a dict per row was most of their cost."""
    attrs = [graph.nodes[name] for name in names]
    timed = [(times or {}).get(name) for name in names]

    def texts(values: Iterable[Any]) -> list[str]:
        return [NOT_COUNTED if value is None else str(value) for value in values]

    return {
        "op": texts(a["op"] for a in attrs), "name": texts(names), "target": texts(a["target"] for a in attrs),
        "args": texts(a["args"] for a in attrs), "kwargs": texts(a["kwargs"] for a in attrs),
        "module path": texts("(top level)" if a["module_path"] == "" else a["module_path"] for a in attrs),
        "source": [str(a["source"]) if a.get("source") else None for a in attrs],  # file:line of the model's code
        "holds": [str(a["about"]) if a.get("about") else None for a in attrs],  # the output: "loss, gradients ×142"
        "shape": [shape_text(a["shape"]) or "unknown" for a in attrs], "dtype": texts(a["dtype"] for a in attrs),
        "stride": texts(a["stride"] for a in attrs), "memory format": texts(a["memory_format"] for a in attrs),
        "FLOPs": texts(count_text(a["flops"]) for a in attrs), "MACs": texts(count_text(a["macs"]) for a in attrs),
        "time": [untimed if t is None else f"{t.median_us:.1f} µs (p25–p75 {t.p25_us:.1f}–{t.p75_us:.1f})"
                 for t in timed],
        "share": [None if t is None else f"{t.share:.1f} % of the step's node time" for t in timed],
    }


def count_text(value: Any) -> str | None:
    """A count with thousands grouped (``1,234,567``); None when not counted."""
    return None if value is None else f"{int(value):,}"


def time_text(t: NodeTime | None) -> str:
    """A node's time in one line (the graph view's tooltip); "" when not profiled."""
    return "" if t is None else f"{t.median_us:.1f} µs ({t.share:.1f} %)"


def check_text(check: Any) -> str:
    """A check's outcome in a few words, as the Explorer's badge says it (the errors'
    size only on a mismatch); None: not run."""
    if check is None:
        return NOT_CHECKED
    if check.status == "mismatch":  # summary: the status, with what it covered where that is less
        return f"{check.summary} (max abs {check.max_abs:.3g}, max rel {check.max_rel:.3g})"
    return check.summary


def timing_cells(value: Any) -> str:
    """A profile table's cell as the Timing tabs show it: times to 0.1 µs."""
    if isinstance(value, str):
        return value
    return NOT_COUNTED if value is None or value != value else f"{float(value):.1f}"


def time_columns(graph: Any, table: Any) -> Columns:
    """Each node's time and share (None where not profiled) in graph order, from a
    profile's ``table``; no columns at all without one. Made once per graph and table."""
    if table is None:
        return NO_TIMES
    if graph in _TIMED and _TIMED[graph][0] is table:
        return _TIMED[graph][1]
    # Vectorised (a loop over 100k nodes costs ~0.1 s); to the ns: no false digits to send.
    measured = table.set_index("node")[list(TIME_COLUMNS)].reindex(list(graph)).round({"median_us": 3, "share": 5})
    columns = Columns({key: measured[column].astype(object).where(measured[column].notna(), None).tolist()
                       for key, column in zip(TIME_KEYS, TIME_COLUMNS)}, len(measured))
    _TIMED[graph] = table, columns
    return columns


def table_rows(graph: Any, table: Any, every: Columns | None = None) -> Columns:
    """One node-table row per node, in graph order, column by column (the table reads
    them so), with its time when ``table`` (a profile's) has it; ``every``: the columns
    of :func:`~fxviz.present.node_table.values` made already, whose encodings it shares."""
    rows = (every or Columns(values(graph))).pick(TABLE_KEYS)
    rows.columns |= time_columns(graph, table).columns or {key: [None] * rows.n for key in TIME_KEYS}
    return rows

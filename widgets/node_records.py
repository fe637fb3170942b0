"""What the Explorer shows of each node: node-table rows and the graph view's records,
column by column (:class:`.columns.Columns`).

A step's graph never changes, so its columns are built once per graph, straight from
the networkx node attributes (no dict per node), and encoded once: the table and the
graph view send the columns they share from one encoding, and showing the same step
again (new timings, a colour mode) resends nothing of them. Times are columns of their
own, sent apart. The columns are :mod:`fxviz.node_table`'s; the HTML report builds
its node table with :func:`rows`.
"""
from __future__ import annotations

import weakref
from itertools import repeat
from typing import Any

from fxviz.node_table import COLUMNS, TIME_KEYS, values

from .columns import Columns
from .graph_view import GraphView, NodeRecords
from .profiling import Timings
from .table_view import TableView

TIME_COLUMNS = ("median_us", "share")  # theirs in a profile's table
TABLE_KEYS = tuple(c["key"] for c in COLUMNS if c["key"] not in TIME_KEYS)
#: the graph view's: display strings, and ``inputs`` as how many places back each input is
VIEW_KEYS = ("name", "op", "target", "module_path", "shape", "weights", "inputs")

NO_TIMES = Columns()
_BUILT: weakref.WeakKeyDictionary[Any, tuple[Columns, NodeRecords]] = weakref.WeakKeyDictionary()
_TIMED: weakref.WeakKeyDictionary[Any, tuple[Any, Columns]] = weakref.WeakKeyDictionary()


def node_columns(graph: Any) -> tuple[Columns, NodeRecords]:
    """The node table's columns and the graph view's records (``VIEW_KEYS``) of
    ``graph``, in graph order, sharing one encoding; made once per graph."""
    if graph not in _BUILT:
        table = values(graph)
        names = table["name"]
        at = {name: i for i, name in enumerate(names)}
        # Tuples of ints, which the collector stops tracking: 100k lists that live on
        # bring on a full collection of the Session's heap (~1 s at 100k nodes).
        inputs = [tuple([i - at[p] for p in graph.pred[name]]) for i, name in enumerate(names)]
        every = Columns(table | {"inputs": inputs})
        _BUILT[graph] = every.pick(TABLE_KEYS), NodeRecords(every.pick(VIEW_KEYS))
    return _BUILT[graph]


def time_columns(graph: Any, timings: Timings | None) -> Columns:
    """Each node's time and share (None where not profiled), in graph order; no columns
    at all without timings. Made once per graph and timings table."""
    table = None if timings is None else timings.table
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


def show_nodes(graph: Any, timings: Timings | None, view: GraphView, table: TableView) -> None:
    """``graph``'s node records in ``view`` and its rows in ``table``, their times apart,
    in one message each; what they hold already is not sent again."""
    with view.hold_sync(), table.hold_sync():
        (rows, records), times = node_columns(graph), time_columns(graph, timings)
        view.nodes, view.times, table.data, table.extra = records, times, rows, times


def rows(graph: Any, timings: Timings | None) -> list[dict[str, Any]]:
    """One node-table row per node, in graph order, with its time when profiled."""
    table, _ = node_columns(graph)
    times = time_columns(graph, timings)
    return [row | extra for row, extra in zip(table, times if times.columns else repeat(dict.fromkeys(TIME_KEYS)))]

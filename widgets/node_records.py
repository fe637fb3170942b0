"""What the Explorer shows of each node: node-table rows and the graph view's records,
column by column (:class:`fxviz.present.columns.Columns`).

A step's graph never changes, so its columns are built once per graph, straight from
the networkx node attributes (no dict per node), and encoded once: the table and the
graph view send the columns they share from one encoding, and showing the same step
again (new timings, a colour mode) resends nothing of them. Times are columns of their
own, sent apart. The columns are :mod:`fxviz.present.node_table`'s; the HTML report builds
its node table with :func:`fxviz.present.presentation.table_rows`.
"""
from __future__ import annotations

from typing import Any

from fxviz.present import presentation
from fxviz.present.columns import Columns
from fxviz.annotation.graph_memo import derived
from fxviz.present.node_table import COLUMNS, values
from fxviz.present.presentation import TABLE_KEYS

from .graph_view import GraphView, NodeRecords
from .profiling import Timings
from .table_view import TableView

#: the graph view's: display strings, and ``inputs`` as how many places back each input is
VIEW_KEYS = ("name", "op", "target", "module_path", "shape", "weights", "inputs")

def node_columns(graph: Any) -> tuple[Columns, NodeRecords]:
    """The node table's columns and the graph view's records (``VIEW_KEYS``) of
    ``graph``, in graph order, sharing one encoding; made once per graph (:mod:`fxviz.annotation.graph_memo`)."""
    return derived(graph, "node_columns", _node_columns)


def _node_columns(graph: Any) -> tuple[Columns, NodeRecords]:
    table = values(graph)
    names = table["name"]
    at = {name: i for i, name in enumerate(names)}
    # Tuples of ints, which the collector stops tracking: 100k lists that live on
    # bring on a full collection of the Session's heap (~1 s at 100k nodes).
    inputs = [tuple([i - at[p] for p in graph.pred[name]]) for i, name in enumerate(names)]
    every = Columns(table | {"inputs": inputs})
    return every.pick((*TABLE_KEYS, "weight")), NodeRecords(every.pick(VIEW_KEYS))


def time_columns(graph: Any, timings: Timings | None) -> Columns:
    """:func:`fxviz.present.presentation.time_columns` of the step's timings (none: no columns)."""
    return presentation.time_columns(graph, None if timings is None else timings.table)


def show_nodes(graph: Any, timings: Timings | None, view: GraphView, table: TableView) -> None:
    """``graph``'s node records in ``view`` and its rows in ``table``, their times apart,
    in one message each; what they hold already is not sent again."""
    with view.hold_sync(), table.hold_sync():
        (rows, records), times = node_columns(graph), time_columns(graph, timings)
        view.nodes, view.times, table.data, table.extra = records, times, rows, times

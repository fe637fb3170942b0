"""The node table: a small anywidget with sortable columns and a synced selection.

Python owns the data (``columns`` and the rows: ``data``, with more columns in
``extra``); the browser sorts and reports row clicks by setting ``selected``. Setting
``selected`` from Python marks the row and scrolls it into view. Rows travel column by
column as one JSON text (:class:`fxviz.present.columns.Columns`: a key is sent once, not once per
row, and each column in a short form; decoded by ``columns.js``, which the graph view
shares); columns known later (times) travel apart in ``extra``, so that their arrival
resends only them. Python reads and sets the rows whole as ``rows``.
"""
from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from fxviz.present import assets
from fxviz.present.columns import Columns, as_columns

if TYPE_CHECKING:  # pandas loads where a table is made, not with the Explorer
    import pandas as pd

_HERE = pathlib.Path(__file__).parent


def _json(value: Columns, _: Any) -> str:
    return value.json()


class TableView(anywidget.AnyWidget):
    """A sortable table whose rows each have a unique ``name``."""

    _esm = assets.join(assets.TABLE_VIEW)
    _css = (_HERE / "table_view.css").read_text()  # a string: a Path would keep every TableView alive (GraphView)

    #: [{"key": str, "label": str, "numeric": bool, "digits": int}]
    columns = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: the rows, [{"name": str, <key>: str | number | None, ...}], as :class:`fxviz.present.columns.Columns`
    #: (a list of dicts given is made one; NaN becomes None)
    data = traitlets.Any(Columns()).tag(sync=True, to_json=_json)
    #: more columns of the same rows, in the same order (e.g. times measured later), as
    #: Columns; no columns, or another number of rows: none
    extra = traitlets.Any(Columns()).tag(sync=True, to_json=_json)
    #: the ``name`` of the selected row, or ""
    selected = traitlets.Unicode("").tag(sync=True)
    #: a column of ``data`` whose rows with a true value are not shown (the node table's
    #: ``weight`` while the graph hides weights; they are counted under the rows); "": every row
    hide = traitlets.Unicode("").tag(sync=True)
    sort_by = traitlets.Unicode("").tag(sync=True)
    descending = traitlets.Bool(False).tag(sync=True)

    #: set by an owner that fills the rows after the first drawing (the Explorer, on a
    #: large graph); called before they are read
    pending: Callable[[], None] | None = None

    def __init__(self, rows: Any = None, **kwargs: Any):
        super().__init__(**kwargs)
        if rows is not None:
            self.rows = rows

    @traitlets.validate("data", "extra")
    def _as_columns(self, proposal: dict[str, Any]) -> Columns:
        return as_columns(proposal["value"])

    @property
    def rows(self) -> Columns:
        """Every row whole: ``data`` with the ``extra`` columns, None for a column of
        ``columns`` that neither has (no times yet). Set (Columns or a list of dicts):
        ``data``, and no ``extra``."""
        if self.pending:
            self.pending()
        n = len(self.data)
        every = self.data.columns | (self.extra.columns if len(self.extra) == n else {})
        return Columns(every | {c["key"]: [None] * n for c in self.columns if c["key"] not in every}, n)

    @rows.setter
    def rows(self, value: Any) -> None:
        with self.hold_sync():
            self.data, self.extra = value, Columns()

    def frame(self) -> pd.DataFrame:
        """Every row whole under the ``columns``' labels, built column by column (a
        static copy of 100k rows: no dict per row)."""
        import pandas as pd

        every = self.rows.columns
        return pd.DataFrame({c["label"]: every[c["key"]] for c in self.columns}, columns=[c["label"] for c in self.columns])

"""The node table: a small anywidget with sortable columns and a synced selection.

Python owns the data (``columns``, ``rows`` and ``extra``); the browser sorts and
reports row clicks by setting ``selected``. Setting ``selected`` from Python marks the
row and scrolls it into view. Rows travel column by column as one JSON text
(:class:`.columns.Columns`: a key is sent once, not once per row, and each column in a
short form; decoded by ``columns.js``, which the graph view shares); columns known
later (times) travel apart in ``extra``, so that their arrival resends only them.
"""
from __future__ import annotations

import pathlib
from typing import Any

import anywidget
import pandas as pd
import traitlets

from . import esm
from .columns import Columns, as_columns

_HERE = pathlib.Path(__file__).parent


def _json(value: Columns, _: Any) -> str:
    return value.json()


class TableView(anywidget.AnyWidget):
    """A sortable table whose rows each have a unique ``name``."""

    _esm = esm.join(esm.TABLE_VIEW)
    _css = _HERE / "table_view.css"

    #: [{"key": str, "label": str, "numeric": bool, "digits": int}]
    columns = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: the rows, [{"name": str, <key>: str | number | None, ...}], as :class:`.columns.Columns`
    #: (a list of dicts given is made one; NaN becomes None)
    rows = traitlets.Any(Columns()).tag(sync=True, to_json=_json)
    #: more columns of the same rows, in the same order (e.g. times measured later), as
    #: Columns; no columns: none
    extra = traitlets.Any(Columns()).tag(sync=True, to_json=_json)
    #: the ``name`` of the selected row, or ""
    selected = traitlets.Unicode("").tag(sync=True)
    sort_by = traitlets.Unicode("").tag(sync=True)
    descending = traitlets.Bool(False).tag(sync=True)

    @traitlets.validate("rows", "extra")
    def _as_columns(self, proposal: dict[str, Any]) -> Columns:
        return as_columns(proposal["value"])

    def records(self) -> list[dict[str, Any]]:
        """Every row whole: ``rows`` with the ``extra`` columns (for Python readers)."""
        extra = self.extra if len(self.extra) == len(self.rows) else ({} for _ in self.rows)
        return [row | more for row, more in zip(self.rows, extra)]

    def frame(self) -> pd.DataFrame:
        """Every row whole under the ``columns``' labels, built column by column (a
        static copy of 100k rows: no dict per row)."""
        every = self.rows.columns | (self.extra.columns if len(self.extra) == len(self.rows) else {})
        return pd.DataFrame({c["label"]: every.get(c["key"], [None] * len(self.rows)) for c in self.columns},
                            columns=[c["label"] for c in self.columns])

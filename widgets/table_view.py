"""The node table: a small anywidget with sortable columns and a synced selection.

Python owns the data (``columns`` and ``rows``); the browser sorts and reports row
clicks by setting ``selected``. Setting ``selected`` from Python marks the row and
scrolls it into view. Rows travel column by column (:mod:`.columns`: a key is sent
once, not once per row, and each column in a short form; decoded by ``columns.js``,
which the graph view shares).
"""
from __future__ import annotations

import math
import pathlib
from typing import Any

import anywidget
import traitlets

from . import esm
from .columns import rows_from_json, rows_to_json

_HERE = pathlib.Path(__file__).parent


class TableView(anywidget.AnyWidget):
    """A sortable table whose rows each have a unique ``name``."""

    _esm = esm.join(esm.TABLE_VIEW)
    _css = _HERE / "table_view.css"

    #: [{"key": str, "label": str, "numeric": bool, "digits": int}]
    columns = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: [{"name": str, <key>: str | number | None, ...}]
    rows = traitlets.List(traitlets.Dict()).tag(sync=True, to_json=lambda rows, _: rows_to_json(rows),
                                                from_json=lambda value, _: rows_from_json(value))
    #: the ``name`` of the selected row, or ""
    selected = traitlets.Unicode("").tag(sync=True)
    sort_by = traitlets.Unicode("").tag(sync=True)
    descending = traitlets.Bool(False).tag(sync=True)

    @traitlets.validate("rows")
    def _clean_rows(self, proposal: dict[str, Any]) -> list[dict[str, Any]]:
        """NaN is not JSON: a missing number travels as None. Only rows with a NaN are
        copied (100k copies of rows without one would cost a full garbage collection)."""
        return [{k: None if _nan(v) else v for k, v in row.items()} if any(map(_nan, row.values())) else row
                for row in proposal["value"]]


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)

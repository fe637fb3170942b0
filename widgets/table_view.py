"""The node table: a small anywidget with sortable columns and a synced selection.

Python owns the data (``columns`` and ``rows``); the browser sorts and reports row
clicks by setting ``selected``. Setting ``selected`` from Python marks the row and
scrolls it into view. Rows travel column by column (:func:`rows_to_json`): a key is
sent once, not once per row, and a column of few distinct values as codes into them
(decoded by ``columns.js``, which the graph view shares).
"""
from __future__ import annotations

import math
import pathlib
from typing import Any

import anywidget
import traitlets

from . import esm

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
        """NaN is not JSON: a missing number travels as None."""
        return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
                for row in proposal["value"]]


def rows_to_json(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"n": len(rows), "keys": [key, ...], "columns": [column, ...]}``: a column is the
    value of each row (None where a row lacks the key), or, when it repeats few values
    (ops, targets, module paths, shapes, FLOPs), ``{"values": [distinct values], "codes":
    [index per row]}``, or ``{"values": [v]}`` when every row has ``v`` (e.g. no times
    yet). columns.js reads this and also a plain list of rows."""
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return {"n": len(rows), "keys": keys, "columns": [_column([row.get(k) for row in rows]) for k in keys]}


def _column(values: list) -> list | dict[str, list]:
    """A column of few distinct values as codes; values are told apart by type too (1,
    1.0 and True are one dict key, but not one JSON value); lists stay as they are."""
    distinct: dict[tuple[type, Any], int] = {}
    for v in values:
        if isinstance(v, (list, dict)):
            return values
        distinct.setdefault((type(v), v), len(distinct))
    if len(distinct) == 1 and values:
        return {"values": [values[0]]}
    if 2 * len(distinct) > len(values):
        return values
    return {"values": [v for _, v in distinct], "codes": [distinct[type(v), v] for v in values]}


def rows_from_json(value: Any) -> list[dict[str, Any]]:
    """The rows back from :func:`rows_to_json` (or a plain list of rows)."""
    if isinstance(value, list):
        return value
    n = value.get("n")
    columns = [c if isinstance(c, list) else [c["values"][i] for i in c["codes"]] if "codes" in c
               else c["values"] * n for c in value["columns"]]
    return [dict(zip(value["keys"], values)) for values in zip(*columns)]

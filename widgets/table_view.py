"""The node table: a small anywidget with sortable columns and a synced selection.

Python owns the data (``columns`` and ``rows``); the browser sorts and reports row
clicks by setting ``selected``. Setting ``selected`` from Python marks the row and
scrolls it into view. Rows travel column by column (:func:`rows_to_json`): a key is
sent once, not once per row, and a column of few distinct values as codes into them.
"""
from __future__ import annotations

import math
import pathlib
from typing import Any

import anywidget
import traitlets

_HERE = pathlib.Path(__file__).parent


class TableView(anywidget.AnyWidget):
    """A sortable table whose rows each have a unique ``name``."""

    _esm = _HERE / "table_view.js"
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


def rows_to_json(rows: list[dict[str, Any]]) -> dict[str, list]:
    """``{"keys": [key, ...], "columns": [column, ...]}``: a column is the value of each
    row (None where a row lacks the key), or, when it is text repeating few values (ops,
    targets, module paths, shapes), ``{"values": [distinct values], "codes": [index per row]}``.
    table_view.js reads this and also a plain list of rows."""
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return {"keys": keys, "columns": [_column([row.get(k) for row in rows]) for k in keys]}


def _column(values: list) -> list | dict[str, list]:
    """Text columns of few distinct values as codes (numbers stay as they are: 1, 1.0
    and True are one dict key)."""
    if not all(v is None or isinstance(v, str) for v in values):
        return values
    distinct = {v: i for i, v in enumerate(dict.fromkeys(values))}
    if 2 * len(distinct) > len(values):
        return values
    return {"values": list(distinct), "codes": [distinct[v] for v in values]}


def rows_from_json(value: Any) -> list[dict[str, Any]]:
    """The rows back from :func:`rows_to_json` (or a plain list of rows)."""
    if isinstance(value, list):
        return value
    columns = [c if isinstance(c, list) else [c["values"][i] for i in c["codes"]] for c in value["columns"]]
    return [dict(zip(value["keys"], values)) for values in zip(*columns)]

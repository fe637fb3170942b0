"""Records sent to the browser column by column (decoded by ``columns.js``).

``{"n": len(rows), "keys": [key, ...], "columns": [column, ...]}``: each key is sent
once, not once per row, and each column in the shortest of a few forms, so that 100k
node records are a few MB: its values as they are; ``{"values": [v]}`` (every row has
``v``, e.g. no times yet); ``{"start": a}`` (``a, a+1, ...``: node indices);
``{"values", "codes"}`` (few distinct values, an index into them per row: ops, targets)
or ``{"values", "runs"}`` (the same, as ``[code, count, ...]`` runs: module paths come in
runs); ``{"stems", "codes", "steps"}`` (FX node names ``<stem><number>``: the stem's code
and how much the number grew since the previous name of that stem, None without one).
A missing number (NaN; infinity too: JSON has neither) travels as None.
"""
from __future__ import annotations

import itertools
import json
import math
import operator
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

_NAME = re.compile(r"(.*?)(0|[1-9][0-9]*)?$", re.S)


class Columns(Sequence):
    """Rows held column by column (``{key: values}``, every column ``n`` long), read as
    a sequence of row dicts. Each column is encoded once, when first sent, and shared
    with the Columns :meth:`pick` makes of it; the payload (:meth:`json`) is made once:
    sending the same Columns again costs nothing, and a widget trait holding it is one
    string to traitlets and ipywidgets, not 100k records to walk."""

    __slots__ = ("columns", "n", "_texts", "_json")

    def __init__(self, columns: Mapping[str, Sequence[Any]] | None = None, n: int | None = None):
        self.columns = dict(columns or {})
        self.n = n if n is not None else len(next(iter(self.columns.values()), ()))
        self._texts: dict[str, str] = {}
        self._json: str | None = None

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]]) -> Columns:
        """``rows`` column by column (None where a row lacks a key or has NaN/infinity)."""
        keys = dict.fromkeys(k for row in rows for k in row)
        return cls({k: [None if _not_finite(v := row.get(k)) else v for row in rows] for k in keys}, len(rows))

    def pick(self, keys: Sequence[str]) -> Columns:
        """The columns ``keys`` (those there are), sharing this one's encodings."""
        picked = Columns({k: self.columns[k] for k in keys if k in self.columns}, self.n)
        picked._texts = self._texts
        return picked

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        return {k: v[i] for k, v in self.columns.items()}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        keys = list(self.columns)
        return (dict(zip(keys, values)) for values in zip(*self.columns.values())) if keys \
            else iter([{} for _ in range(self.n)])

    def encoded(self) -> dict[str, Any]:
        """The module doc's form, as a JSON-able dict."""
        return json.loads(self.json())

    def json(self) -> str:
        """The module doc's form as JSON text, made once."""
        if self._json is None:
            for key, values in self.columns.items():
                if key not in self._texts:
                    self._texts[key] = _encode(list(values))
            body = ",".join(self._texts[k] for k in self.columns)
            self._json = f'{{"n":{self.n},"keys":{_dumps(list(self.columns))},"columns":[{body}]}}'
        return self._json


def as_columns(value: Columns | Sequence[Mapping[str, Any]] | None) -> Columns:
    """``value`` if it is Columns, else its rows (a list of dicts) column by column."""
    return value if isinstance(value, Columns) else Columns.from_rows(value or [])


def rows_to_json(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``rows`` column by column (None where a row lacks a key); see the module doc."""
    return Columns.from_rows(rows).encoded()


def rows_from_json(value: Any) -> list[dict[str, Any]]:
    """The rows back from :func:`rows_to_json` or its JSON text (or a plain list of rows)."""
    if isinstance(value, str):
        value = json.loads(value)
    if isinstance(value, list):
        return value
    n = value["n"]
    return list(Columns({k: _values(c, n) for k, c in zip(value["keys"], value["columns"])}, n))


def _encode(values: list) -> str:
    """One column's shortest form as JSON text; NaN or infinity as None, looked for
    only when there is one (a scan costs ~30 ms at 100k rows)."""
    try:
        return _dumps(_column(values))
    except ValueError:  # out of range float values (NaN, infinity) are not JSON compliant
        return _dumps(_column([None if _not_finite(v) else v for v in values]))


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _not_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _column(values: list) -> list | dict[str, Any]:
    """The shortest form of one column. Numbers are told apart by type too (1, 1.0 and
    True are one dict key, but not one JSON value); lists and dicts stay as they are.
    C-level loops (map, compress) where a Python one would cost ~0.1 s at 100k rows."""
    types = set(map(type, values))
    if list in types or dict in types or tuple in types:
        return values
    if types == {int} and len(values) > 1 and values == list(range(values[0], values[0] + len(values))):
        return {"start": values[0]}
    # Keyed by (type, value) only where types mix: tuples per row cost ~20 ms at 100k rows.
    keys = values if len(types - {type(None)}) <= 1 else list(zip(map(type, values), values))
    distinct = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    if len(distinct) == 1:
        return {"values": [values[0]]}
    if 2 * len(distinct) > len(values):
        return _names(values) if types == {str} else values
    codes = list(map(distinct.__getitem__, keys))
    starts = [0, *itertools.compress(range(1, len(codes)), map(operator.ne, codes[1:], codes))]
    runs = [x for start, end in zip(starts, [*starts[1:], len(codes)]) for x in (codes[start], end - start)]
    return {"values": list(distinct) if keys is values else [v for _, v in distinct]} | (
        {"runs": runs} if len(runs) < len(codes) else {"codes": codes})


def _names(values: list[str]) -> list[str] | dict[str, Any]:
    """Distinct text such as FX node names (``tanh_12``) as stems and number steps."""
    stems: dict[str, int] = {}
    last: dict[str, int] = {}
    codes, steps = [], []
    for v in values:
        stem, number = _NAME.match(v).groups()
        codes.append(stems.setdefault(stem, len(stems)))
        if number is None:
            steps.append(None)
        else:
            steps.append(int(number) - last.get(stem, 0))
            last[stem] = int(number)
    if 2 * len(stems) > len(values):
        return values
    return {"stems": list(stems), "codes": codes, "steps": steps}


def _values(column: Any, n: int) -> list:
    """One column's values back (the inverse of :func:`_column`)."""
    if isinstance(column, list):
        return column
    if "start" in column:
        return list(range(column["start"], column["start"] + n))
    if "stems" in column:
        last: dict[int, int] = {}
        out = []
        for code, step in zip(column["codes"], column["steps"]):
            if step is None:
                out.append(column["stems"][code])
            else:
                last[code] = last.get(code, 0) + step
                out.append(f"{column['stems'][code]}{last[code]}")
        return out
    values = column["values"]
    if "runs" in column:
        runs = column["runs"]
        return [values[runs[i]] for i in range(0, len(runs), 2) for _ in range(runs[i + 1])]
    return [values[i] for i in column["codes"]] if "codes" in column else values * n

"""Records sent to the browser column by column (decoded by ``columns.js``).

``{"n": len(rows), "keys": [key, ...], "columns": [column, ...]}``: each key is sent
once, not once per row, and each column in the shortest of a few forms, so that 100k
node records are a few MB: its values as they are; ``{"values": [v]}`` (every row has
``v``, e.g. no times yet); ``{"start": a}`` (``a, a+1, ...``: node indices);
``{"values", "codes"}`` (few distinct values, an index into them per row: ops, targets)
or ``{"values", "runs"}`` (the same, as ``[code, count, ...]`` runs: module paths come in
runs); ``{"stems", "codes", "steps"}`` (FX node names ``<stem><number>``: the stem's code
and how much the number grew since the previous name of that stem, None without one).
"""
from __future__ import annotations

import itertools
import re
from typing import Any

_NAME = re.compile(r"(.*?)(0|[1-9][0-9]*)?$", re.S)


def rows_to_json(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``rows`` column by column (None where a row lacks a key); see the module doc."""
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return {"n": len(rows), "keys": keys, "columns": [_column([row.get(k) for row in rows]) for k in keys]}


def rows_from_json(value: Any) -> list[dict[str, Any]]:
    """The rows back from :func:`rows_to_json` (or a plain list of rows)."""
    if isinstance(value, list):
        return value
    n = value["n"]
    columns = [_values(c, n) for c in value["columns"]]
    return [dict(zip(value["keys"], values)) for values in zip(*columns)] if columns else [{} for _ in range(n)]


def _column(values: list) -> list | dict[str, Any]:
    """The shortest form of one column. Numbers are told apart by type too (1, 1.0 and
    True are one dict key, but not one JSON value); lists and dicts stay as they are."""
    types = set(map(type, values))
    if list in types or dict in types:
        return values
    keys = values if types <= {str, type(None)} else list(zip(map(type, values), values))
    distinct = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    if len(distinct) == 1:
        return {"values": [values[0]]}
    if types == {int} and values == list(range(values[0], values[0] + len(values))):
        return {"start": values[0]}
    if 2 * len(distinct) > len(values):
        return _names(values) if types == {str} else values
    codes = [distinct[k] for k in keys]
    runs = [x for code, run in itertools.groupby(codes) for x in (code, sum(1 for _ in run))]
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

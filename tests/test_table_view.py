"""TableView on the kernel side: its synced state, JSON-safe rows, messages from the
browser, and CSS/JS that stay inside the fxviz- namespace. The sorting itself is
tested in tests/js/table_view.test.mjs; a browser drives it in the e2e tests."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("anywidget")

from test_graph_view import _selectors, from_browser  # noqa: E402  (same helpers, one copy)

from fxviz.widgets import TableView  # noqa: E402

WIDGETS = Path(__file__).resolve().parents[1] / "widgets"
COLUMNS = [{"key": "name", "label": "name"}, {"key": "time_us", "label": "time", "numeric": True, "digits": 1}]


def test_synced_state_and_defaults():
    table = TableView()
    assert {"columns", "data", "extra", "selected", "sort_by", "descending"} <= set(table.trait_names(sync=True))
    state = table.get_state()
    assert (json.loads(state["data"]), state["selected"], state["sort_by"], state["descending"]) == (
        {"n": 0, "keys": [], "columns": []}, "", "", False)
    assert "export default { render }" in table._esm


def test_missing_numbers_travel_as_null():
    table = TableView(columns=COLUMNS, rows=[{"name": "x", "time_us": float("nan")}, {"name": "y", "time_us": 2.5}])
    assert list(table.rows) == [{"name": "x", "time_us": None}, {"name": "y", "time_us": 2.5}]
    sent = json.loads(table.get_state()["data"])  # the rows travel as one JSON text
    assert sent == {"n": 2, "keys": ["name", "time_us"], "columns": [["x", "y"], [None, 2.5]]}


def test_columns_are_encoded_once_and_extra_columns_travel_apart():
    """The same Columns set again sends nothing; its picks share its encodings; columns
    measured later (``extra``) change only ``extra``; ``rows`` reads them whole."""
    from fxviz.present.columns import Columns

    every = Columns({"name": ["a", "b"], "op": ["x", "y"], "time_us": [1.0, None]})
    rows = every.pick(["name", "op", "missing"])
    assert list(rows.columns) == ["name", "op"] and rows.json() is rows.json()
    assert every.json().startswith('{"n":2,"keys":["name","op","time_us"],"columns":[["a","b"],["x","y"]')
    assert every._texts is rows._texts and set(every._texts) == {"name", "op", "time_us"}
    assert json.loads(Columns({"t": [float("nan"), float("inf"), 1.5]}).json())["columns"] == [[None, None, 1.5]]
    table = TableView(columns=COLUMNS, rows=rows)
    sent = []
    table.observe(lambda change: sent.append(change["name"]), ["data", "extra"])
    table.data = rows
    table.extra = every.pick(["time_us"])
    assert sent == ["extra"]
    assert list(table.rows) == [{"name": "a", "op": "x", "time_us": 1.0}, {"name": "b", "op": "y", "time_us": None}]
    frame = table.frame()  # under the columns' labels
    assert list(frame) == ["name", "time"] and frame["time"].fillna(-1).tolist() == [1.0, -1]
    table.extra = Columns({"time_us": [1.0]})  # not these rows' (another step's): none, None in the column
    assert list(table.rows) == [{"name": "a", "op": "x", "time_us": None}, {"name": "b", "op": "y", "time_us": None}]
    table.rows = [{"name": "c", "time_us": 2.0}]  # rows set whole: no extra columns left
    assert (list(table.rows), len(table.extra)) == ([{"name": "c", "time_us": 2.0}], 0)


def test_rows_travel_column_by_column_and_come_back_whole():
    from fxviz.present.columns import rows_from_json, rows_to_json

    rows = [{"name": "x", "flops": 4}, {"name": "y", "shape": "2×3"}]
    sent = rows_to_json(rows)
    assert sent == {"n": 2, "keys": ["name", "flops", "shape"], "columns": [["x", "y"], [4, None], [None, "2×3"]]}
    assert rows_from_json(sent) == [{"name": "x", "flops": 4, "shape": None}, {"name": "y", "flops": None, "shape": "2×3"}]
    # A column of few distinct values (ops, module paths) travels as codes into them.
    many = [{"name": f"n{i}", "op": ("call_function", "placeholder")[i % 2]} for i in range(1000)]
    sent = rows_to_json(many)
    assert sent["columns"][1] == {"values": ["call_function", "placeholder"], "codes": [i % 2 for i in range(1000)]}
    assert rows_from_json(sent) == many
    assert len(json.dumps(sent)) < 0.5 * len(json.dumps(many))
    # Numbers repeat too (FLOPs, bytes), told apart by type; a column of one value is sent once.
    coded = [{"flops": (1, 1.0, True)[i % 3], "time_us": None} for i in range(9)]
    sent = rows_to_json(coded)
    assert sent["columns"] == [{"values": [1, 1.0, True], "codes": [0, 1, 2] * 3}, {"values": [None]}]
    assert [[type(v) for v in row.values()] for row in rows_from_json(sent)] == \
        [[type(row["flops"]), type(None)] for row in coded]


def test_every_column_form_comes_back_whole_in_python_and_in_the_browser(decode_in_node):
    """Node indices as a start, FX names as stems and steps, module paths as runs, ops as
    codes, no times as one value: under 15 % of the records as JSON; columns.js (under node)
    reads back what rows_from_json does."""
    from fxviz.present.columns import rows_from_json, rows_to_json

    ops = ("tanh", "sigmoid", "neg")
    names = ["x", "_0", "_1", "add", "conv_01"] + [f"{ops[i % 3]}_{i // 3}" if i > 2 else ops[i] for i in range(3000)]
    rows = [{"index": i, "name": name, "op": ops[i % 3], "module_path": f"blocks.{i // 24}", "time_us": None,
             "flops": (4, 4.0, None)[i % 3]} for i, name in enumerate(names)]
    sent = rows_to_json(rows)
    forms = dict(zip(sent["keys"], sent["columns"]))
    assert forms["index"] == {"start": 0} and forms["time_us"] == {"values": [None]}
    assert forms["name"]["stems"][:5] == ["x", "_", "add", "conv_0", "tanh"] and forms["name"]["steps"][:3] == [None, 0, 1]
    assert forms["module_path"]["runs"][:4] == [0, 24, 1, 24] and len(forms["op"]["codes"]) == len(rows)
    assert rows_from_json(sent) == rows and [type(r["flops"]) for r in rows_from_json(sent)][:3] == [int, float, type(None)]
    assert len(json.dumps(sent)) < 0.15 * len(json.dumps(rows))
    assert decode_in_node("columns.js", "rowsOf", sent) == rows
    assert decode_in_node("columns.js", "rowsOf", json.dumps(sent)) == rows  # as the widget sends it: JSON text


def test_row_clicks_and_header_clicks_reach_python():
    table = TableView(columns=COLUMNS, rows=[{"name": "x", "time_us": 1.0}])
    seen = []
    table.observe(lambda change: seen.append((change["name"], change["new"])), ["selected", "sort_by", "descending"])
    from_browser(table, selected="x")
    from_browser(table, sort_by="time_us", descending=True)
    assert seen == [("selected", "x"), ("sort_by", "time_us"), ("descending", True)]


@pytest.mark.parametrize("css", ["table_view.css", "explorer.css"])
def test_every_css_rule_is_scoped_by_a_prefixed_class(css):
    text = (WIDGETS / css).read_text()
    selectors = _selectors(text)
    assert len(selectors) > 10
    assert [s for s in selectors if not s.startswith(".fxviz-")] == []
    assert [n for n in re.findall(r"@keyframes\s+([\w-]+)", text) if not n.startswith("fxviz-")] == []  # global names


def test_every_class_the_script_sets_is_prefixed():
    js = (WIDGETS / "table_view.js").read_text()
    names = re.findall(r'h\("\w+", "([^"]*)"', js) + re.findall(r'classList\.\w+\("([^"]+)"', js)
    assert len(names) > 5
    assert all(n == "" or n.startswith("fxviz-") for n in names), names

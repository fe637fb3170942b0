// Pure helpers of widgets/table_view.js; run with `node --test tests/js/`.
// Importing the module at all checks that it touches no `document` at load.
import assert from "node:assert/strict";
import { test } from "node:test";

import widget, {
  ariaSort, compareValues, defaultWidth, fitWidths, formatCell, hiddenNote, nextSort, resized, rowsOf, scrollToRow, shownRows,
  sortRows, visibleRange,
} from "../../widgets/table_view.js";

const ROWS = [
  { name: "x", op: "placeholder", time_us: null },
  { name: "relu_10", op: "call_function", time_us: 4.5 },
  { name: "conv1", op: "call_module", time_us: 120 },
  { name: "relu_2", op: "call_function", time_us: 4.5 },
  { name: "output", op: "output", time_us: Number.NaN },
];
const names = (rows) => rows.map((r) => r.name);

test("the module exports an anywidget with render", () => {
  assert.equal(typeof widget.render, "function");
});

test("numbers sort by value, largest first when descending, missing values last", () => {
  assert.deepEqual(names(sortRows(ROWS, "time_us", true)), ["conv1", "relu_10", "relu_2", "x", "output"]);
  assert.deepEqual(names(sortRows(ROWS, "time_us", false)), ["relu_10", "relu_2", "conv1", "x", "output"]);
});

test("ties keep their original order in both directions", () => {
  const asc = names(sortRows(ROWS, "time_us", false));
  const desc = names(sortRows(ROWS, "time_us", true));
  assert.ok(asc.indexOf("relu_10") < asc.indexOf("relu_2"));
  assert.ok(desc.indexOf("relu_10") < desc.indexOf("relu_2"));
});

test("text sorts naturally: relu_2 before relu_10", () => {
  assert.deepEqual(names(sortRows(ROWS, "name", false)), ["conv1", "output", "relu_2", "relu_10", "x"]);
  assert.ok(compareValues("relu_2", "relu_10") < 0);
  assert.ok(compareValues(3, 20) < 0);
});

test("sorting returns a new array and leaves the input alone", () => {
  const before = names(ROWS);
  const sorted = sortRows(ROWS, "name", true);
  assert.notEqual(sorted, ROWS);
  assert.deepEqual(names(ROWS), before);
  assert.deepEqual(names(sortRows(ROWS, "", false)), before);
});

test("a header click flips the current column, and starts a new one by its kind", () => {
  const numeric = { key: "time_us", label: "time", numeric: true };
  const text = { key: "name", label: "name" };
  assert.deepEqual(nextSort({ sort_by: "", descending: false }, numeric), { sort_by: "time_us", descending: true });
  assert.deepEqual(nextSort({ sort_by: "time_us", descending: true }, numeric), { sort_by: "time_us", descending: false });
  assert.deepEqual(nextSort({ sort_by: "time_us", descending: true }, text), { sort_by: "name", descending: false });
});

test("cells: numbers with the column's digits and separators, missing values blank, text as is", () => {
  assert.equal(formatCell(1234567, { key: "f", label: "f", numeric: true }), "1,234,567");
  assert.equal(formatCell(4.25, { key: "t", label: "t", numeric: true, digits: 1 }), "4.3");
  assert.equal(formatCell(null, { key: "t", label: "t", numeric: true }), "");
  assert.equal(formatCell(Number.NaN, { key: "t", label: "t", numeric: true }), "");
  assert.equal(formatCell("<script>", { key: "n", label: "n" }), "<script>");
  const error = { key: "e", label: "e", numeric: true, significant: 2 };
  assert.equal(formatCell(0.000123456, error), "0.00012");
  assert.equal(formatCell(1.5e-9, error), "1.5e-9");
  assert.equal(formatCell(0, error), "0");
});

test("aria-sort names the direction of the sorted column only", () => {
  const state = { sort_by: "name", descending: true };
  assert.equal(ariaSort("name", state), "descending");
  assert.equal(ariaSort("op", state), "none");
  assert.equal(ariaSort("name", { sort_by: "name", descending: false }), "ascending");
});

test("only the rows under the viewport, plus a margin, are drawn", () => {
  assert.deepEqual(visibleRange(0, 300, 22, 100000, 10), { start: 0, end: 25 });
  const middle = visibleRange(22 * 50000, 300, 22, 100000, 10);
  assert.deepEqual(middle, { start: 49990, end: 50025 });
  assert.deepEqual(visibleRange(22 * 99990, 300, 22, 100000, 10), { start: 99980, end: 100000 });
  assert.deepEqual(visibleRange(0, 0, 22, 3, 10), { start: 0, end: 3 }); // not attached yet: a few rows
});

test("scrolling to a row moves as little as possible, and not at all when it is in view", () => {
  // 10 rows of 22 px visible under a 22 px header in a 242 px viewport
  assert.equal(scrollToRow(5, 0, 242, 22, 22), 0);
  assert.equal(scrollToRow(20, 0, 242, 22, 22), 21 * 22 - 242 + 22);
  assert.equal(scrollToRow(3, 220, 242, 22, 22), 66);
});

test("columns start at a width by kind and resize, never below a legible minimum", () => {
  assert.equal(defaultWidth({ key: "index", label: "#", numeric: true }), 76); // "100,000"
  assert.equal(defaultWidth({ key: "flops", label: "FLOPs", numeric: true }), 96);
  assert.equal(defaultWidth({ key: "name", label: "name" }), 150);
  assert.equal(defaultWidth({ key: "name", label: "name", width: 220 }), 220);
  assert.equal(resized(150, 30.4), 180);
  assert.equal(resized(150, -500), 36);
});

test("rowsOf reads the kernel's columns, a plain list of rows, or nothing", () => {
  const sent = { n: 2, keys: ["name", "flops"], columns: [["x", "y"], [4, null]] };
  assert.deepEqual(rowsOf(sent), [{ name: "x", flops: 4 }, { name: "y", flops: null }]);
  const coded = { n: 3, keys: ["op"], columns: [{ values: ["call_function", "output"], codes: [0, 0, 1] }] };
  assert.deepEqual(rowsOf(coded), [{ op: "call_function" }, { op: "call_function" }, { op: "output" }]);
  assert.deepEqual(rowsOf([{ name: "x" }]), [{ name: "x" }]);
  assert.deepEqual(rowsOf({ n: 0, keys: [], columns: [] }), []);
  assert.deepEqual(rowsOf(undefined), []);
  const same = { n: 3, keys: ["name", "time"], columns: [["a", "b", "c"], { values: [""] }] };
  assert.deepEqual(rowsOf(same), [{ name: "a", time: "" }, { name: "b", time: "" }, { name: "c", time: "" }]);
});

test("columns fit the pane: text columns share the room, numbers and the user's widths stay", () => {
  const cols = [{ key: "index", label: "#", numeric: true }, { key: "name", label: "name" },
    { key: "target", label: "target" }, { key: "time_us", label: "time", numeric: true },
    { key: "share", label: "share", numeric: true }];
  const narrow = fitWidths(cols, 700, new Map());
  const total = [...narrow.values()].reduce((a, b) => a + b, 0);
  assert.ok(total <= 700, `${total} px in a 700 px pane: share cut off`);
  assert.equal(narrow.get("time_us"), 96);
  assert.equal(narrow.get("name"), narrow.get("target"));
  assert.ok(fitWidths(cols, 2000, new Map()).get("name") > 150); // a wide pane: no empty stretch
  assert.equal(fitWidths(cols, 300, new Map()).get("name"), 72); // never below a legible minimum
  assert.equal(fitWidths(cols, 700, new Map([["name", 300]])).get("name"), 300); // resized by the user
  assert.equal(fitWidths(cols, 0, new Map()).get("name"), 150); // not laid out yet: the default
});

test("rows whose hide column is true are left out and counted; none hidden without a column", () => {
  const rows = [{ name: "w", weight: true }, { name: "conv", weight: false }, { name: "b", weight: true }, { name: "x" }];
  const { shown, hidden } = shownRows(rows, "weight");
  assert.deepEqual(names(shown), ["conv", "x"]);
  assert.equal(hidden, 2);
  assert.equal(hiddenNote(hidden, "weight"), "2 weights not listed: the graph's Weights button shows them here and in the graph");
  assert.equal(hiddenNote(1, "weight").split(" ").slice(0, 2).join(" "), "1 weight");
  assert.deepEqual(shownRows(rows, ""), { shown: rows, hidden: 0 });
  assert.equal(hiddenNote(0, "weight"), "");
});

// Pure helpers of widgets/columns.js and the times the graph view writes into its node
// records; run with `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { addColumns, columnsOf, rowsOf } from "../../widgets/columns.js";
import { addTimes, nodesOf } from "../../widgets/gv_graph.js";

const SENT = { n: 3, keys: ["name", "op"], columns: [["a", "b", "c"], { values: ["x", "y"], codes: [0, 1, 0] }] };

test("rows come from the column-wise form, its JSON text (what widgets send) or a plain list", () => {
  const rows = [{ name: "a", op: "x" }, { name: "b", op: "y" }, { name: "c", op: "x" }];
  assert.deepEqual(rowsOf(SENT), rows);
  assert.deepEqual(rowsOf(JSON.stringify(SENT)), rows);
  assert.deepEqual(rowsOf(rows), rows);
  assert.deepEqual(rowsOf(""), []);
});

test("columnsOf gives columns by key only for the same number of rows", () => {
  assert.deepEqual([...columnsOf(JSON.stringify(SENT), 3).keys()], ["name", "op"]);
  assert.equal(columnsOf(SENT, 4).size, 0);
  assert.equal(columnsOf(undefined, 3).size, 0);
});

test("addColumns writes extra columns into the rows and drops those it wrote before", () => {
  const rows = rowsOf(SENT);
  const times = { n: 3, keys: ["time_us"], columns: [[1.5, null, 2]] };
  const written = addColumns(rows, JSON.stringify(times));
  assert.deepEqual(written, ["time_us"]);
  assert.deepEqual(rows.map((r) => r.time_us), [1.5, null, 2]);
  assert.deepEqual(addColumns(rows, { n: 0, keys: [], columns: [] }, written), []);
  assert.deepEqual(rows[0], { name: "a", op: "x" });
});

test("addTimes writes tooltip times from time_us and share, and clears them when times go", () => {
  const nodes = nodesOf(JSON.stringify(SENT));
  addTimes(nodes, { n: 3, keys: ["time_us", "share"], columns: [[12.34, null, 1], [50, null, 25.04]] });
  assert.deepEqual(Object.values(nodes).map((r) => r.time), ["12.3 µs (50.0 %)", undefined, "1.0 µs (25.0 %)"]);
  addTimes(nodes, "");
  assert.deepEqual(Object.values(nodes).map((r) => r.time), [undefined, undefined, undefined]);
  const own = { x: { op: "placeholder", time: "3 µs" } }; // a record sent with its own time keeps it
  addTimes(own, undefined);
  assert.equal(own.x.time, "3 µs");
});

// The report's Details records, read back from the columns fxviz/report/page.py sends; run with `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { rowsOf } from "../../widgets/columns.js";
import { detailsByName } from "../../widgets/report_host.js";

test("each node's details come back by name, in label order, without the rows it lacks", () => {
  const sent = {
    n: 2,
    keys: ["op", "name", "source", "shape", "inputs", "users"],
    columns: [{ values: ["call_function"] }, ["relu", "constructor"], ["m.py:3", null], ["2×4", "unknown"],
      [[], [["args[0]: relu", "relu"]]], [["constructor"], []]],
  };
  const details = detailsByName(rowsOf(sent));
  assert.deepEqual(details.relu, { rows: [["op", "call_function"], ["name", "relu"], ["source", "m.py:3"],
    ["shape", "2×4"]], inputs: [], users: ["constructor"] });
  assert.deepEqual(details.constructor.rows.map(([label]) => label), ["op", "name", "shape"]);
  assert.deepEqual(details.constructor.inputs, [["args[0]: relu", "relu"]]);
  assert.ok(!("toString" in details));  // only the nodes: no Object methods
});

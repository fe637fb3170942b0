// Pure helpers of widgets/report_host.js; run with `node --test tests/js/`.
// Importing the module at all checks that it touches no `document` at load.
import assert from "node:assert/strict";
import { test } from "node:test";

import { HostModel, diffLineClass, focusAfter, focusText, parentPath } from "../../widgets/report_host.js";

test("expanding a module focuses it; collapsing one focuses its parent", () => {
  assert.equal(focusAfter(["layer1", "layer2"], ["layer2"]), "layer1");
  assert.equal(focusAfter(["layer1.1"], ["layer1.1", "layer1.0"]), "layer1");
  assert.equal(focusAfter([], ["layer3"]), "");
  assert.equal(focusAfter(["a"], ["a"]), null);
  assert.equal(parentPath("a.b.c"), "a.b");
  assert.equal(parentPath("a"), "");
});

test("the status says what is open", () => {
  assert.match(focusText(""), /top level/);
  assert.match(focusText("*"), /Explorer/);
  assert.equal(focusText("layer2.0"), "open: layer2.0 (other modules collapsed)");
  assert.equal(focusText("block@1", { "block@1": "block #2 · Block" }), "open: block #2 · Block (other modules collapsed)");
  assert.equal(focusText("valueOf", {}), "open: valueOf (other modules collapsed)");
});

test("unified diff lines get their class", () => {
  assert.deepEqual(["--- a", "+++ b", "@@ -1 +1 @@", "+x", "-y", " z"].map(diffLineClass),
    ["fxviz-diff-file", "fxviz-diff-file", "fxviz-diff-hunk", "fxviz-diff-insert", "fxviz-diff-delete", ""]);
});

test("the host model fires only on real changes and hands saves to the host", () => {
  const saved = [];
  const model = new HostModel({ selected: "", collapsed: ["a"] }, (c) => saved.push(c));
  const seen = [];
  model.on("change:selected", () => seen.push(model.get("selected")));
  model.set("selected", "x");
  model.set("selected", "x");
  model.save_changes();
  assert.deepEqual(seen, ["x"]);
  assert.deepEqual(saved, [{ selected: "x" }]);
  // a "kernel" update assigns every key before any event fires
  model.on("change:collapsed", () => seen.push(`${model.get("selected")}|${model.get("collapsed")}`));
  model.update({ collapsed: ["b"], selected: "y" });
  assert.deepEqual(seen, ["x", "y|b", "y"]);
  assert.deepEqual(saved, [{ selected: "x" }]);  // a kernel update is not sent back
});

test("a check's badge: its class and text as Python gave them", async () => {
  const { badgeParts } = await import("../../widgets/report_host.js");
  assert.deepEqual(badgeParts({ status: "mismatch", text: "mismatch (max abs 0.0123, max rel 0.5)", slug: "mismatch",
    message: "" }), { slug: "mismatch", text: "mismatch (max abs 0.0123, max rel 0.5)" });
  assert.deepEqual(badgeParts({ status: "not checked yet", text: "not checked yet", slug: "pending", message: "" }),
    { slug: "pending", text: "not checked yet" });
});

test("the history names each step's pass, parameters and selection", async () => {
  const { stepText } = await import("../../widgets/report_host.js");
  assert.equal(stepText({ index: 0, pass_name: "trace", params: "", selection: [] }), "0 · trace");
  assert.equal(stepText({ index: 2, pass_name: "replace", params: "op='relu'", selection: ["a", "b"] }),
    "2 · replace(op='relu') on a, b");
});

test("with no node selected, Details shows the whole graph, reasons as text", async () => {
  const { detailsContent } = await import("../../widgets/report_panels.js");
  /** A stand-in for the page's element factory: text stays text (textContent). */
  const h = (tag, cls = "", text = "") => ({ tag, cls, text, children: [], append(...c) { this.children.push(...c); } });
  const texts = (el) => [el.text, ...el.children.flatMap(texts)].filter(Boolean);
  const overview = { rows: [["captured by", "torch.export"], ["nodes", "3: placeholder 1"]], method: "export",
    tried: [["symbolic", "Cannot trace <script>"]] };
  const [box] = detailsContent(h, undefined, () => {}, overview);
  assert.equal(box.cls, "fxviz-overview");
  const shown = texts(box);
  assert.deepEqual(shown.slice(0, 5), ["The whole graph", "captured by", "torch.export", "nodes", "3: placeholder 1"]);
  assert.ok(shown.includes('Before export, tracer="auto" tried:') && shown.includes(": Cannot trace <script>"));
  assert.equal(shown.at(-1), "Select a node in the graph.");
  const alone = detailsContent(h, undefined, () => {}, { rows: [], method: "symbolic", tried: [] });
  assert.ok(!texts(alone[0]).some((t) => t.includes("tried")));  // nothing passed over: no list
  assert.deepEqual(texts(detailsContent(h, undefined, () => {})[0]), ["Select a node in the graph."]);
});

test("a node hidden in a collapsed module opens its module's focus, else the deepest drawn ancestor's", async () => {
  const { revealFocus } = await import("../../widgets/report_host.js");
  const views = { "": 0, "*": 1, layer1: 2, "layer1.0": 3 };
  assert.equal(revealFocus("layer1.0", views), "layer1.0");
  assert.equal(revealFocus("layer1.0.conv1", views), "layer1.0");
  assert.equal(revealFocus("layer1.1.bn", views), "layer1");
  assert.equal(revealFocus("layer2", views), null);
  assert.equal(revealFocus("", views), null);
});

test("a call's box inside a loop's iteration: revealed and collapsed by the report's own box tree", async () => {
  const { revealFocus, focusAfter, parentBox } = await import("../../widgets/report_host.js");
  // the second call of `update` lies in the box of iteration 2, which a dotted path cannot tell
  const parents = { "update@1": "<iteration 2>", "<iteration 2>": "", constructor: "x" };
  const views = { "": 0, "<iteration 2>": 1, "update@1": 2 };
  assert.equal(parentBox("update@1", parents), "<iteration 2>");
  assert.equal(parentBox("update@1.fc", parents), "update@1");  // not listed: the dotted parent
  assert.equal(parentBox("constructor", {}), "");  // an own key only, never Object's
  assert.equal(revealFocus("update@1.fc", views, parents), "update@1");
  assert.equal(revealFocus("update@1.fc", { "": 0, "<iteration 2>": 1 }, parents), "<iteration 2>");
  assert.equal(revealFocus("update@1.fc", { "": 0, "<iteration 2>": 1 }), null);  // without the tree: lost
  assert.equal(focusAfter(["update@1.fc"], ["update@1.fc", "update@1"], parents), "<iteration 2>");
  assert.equal(revealFocus("toString", { "": 0 }), null);
});

test("grey italic (undone) steps are explained below the history and in their title", async () => {
  const { historyLegend, UNDONE_TITLE } = await import("../../widgets/report_host.js");
  assert.equal(historyLegend([{ undone: false }]), "");
  assert.match(historyLegend([{ undone: false }, { undone: true }, { undone: true }]),
    /^Steps in grey italics \(2\) were undone in the session: Redo would bring them back/);
  assert.match(UNDONE_TITLE, /grey italics: undone in the session/i);
});

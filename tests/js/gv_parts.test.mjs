// The pure parts of the graph view's concern modules (gv_stage, gv_select, gv_search,
// gv_pointer, gv_toolbar, gv_keys); run with `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  DRAG_THRESHOLD, anchorsView, dragView, legendView, markedElements, searchKey, setClass, toolbarAction, undoAction,
  viewportKey, worldBox,
} from "../../widgets/graph_view.js";

const NODES = {
  x: { op: "placeholder", module_path: "", users: ["conv"] },
  conv: { op: "call_module", module_path: "enc.conv", inputs: ["x"], users: ["relu"] },
  relu: { op: "call_function", module_path: "enc", inputs: ["conv"], users: [] },
};
const key = (k, mods = {}) => ({ key: k, ctrlKey: false, metaKey: false, altKey: false, shiftKey: false,
  target: null, ...mods });

test("worldBox turns client rectangles into world units at the view's zoom", () => {
  assert.deepEqual(worldBox({ left: 110, top: 70, width: 40, height: 20 }, { left: 10, top: 20 }, 2),
    { x: 50, y: 25, width: 20, height: 10 });
});

test("only nodes and collapsed modules anchor the view across drawings", () => {
  assert.deepEqual(["fx-relu", "fxco-3", "fxcl-1", "fxst-0"].map(anchorsView), [true, true, false, false]);
});

test("search keys: Escape clears, Enter and Shift+Enter step through the matches, wrapping", () => {
  assert.deepEqual(searchKey("Escape", false, 0, -1), { clear: true });
  assert.deepEqual(searchKey("Enter", false, 3, -1), { cursor: 0 });
  assert.deepEqual(searchKey("Enter", false, 3, 2), { cursor: 0 });
  assert.deepEqual(searchKey("Enter", true, 3, 0), { cursor: 2 });
  assert.equal(searchKey("Enter", false, 0, -1), null); // nothing found: Enter does nothing
  assert.equal(searchKey("a", false, 3, 0), null);
});

test("viewport keys: Escape clears a selection, arrows walk, modified keys are not ours", () => {
  assert.deepEqual(viewportKey(key("Escape"), NODES, "conv", null), { clear: true });
  assert.equal(viewportKey(key("Escape"), NODES, "", null), undefined);
  assert.equal(viewportKey(key("ArrowDown", { ctrlKey: true }), NODES, "conv", null), undefined);
  assert.equal(viewportKey(key("a"), NODES, "conv", null), undefined);
  assert.equal(viewportKey(key("ArrowDown"), NODES, "conv", null).step.name, "relu");
  assert.deepEqual(viewportKey(key("ArrowUp"), NODES, "x", null), { step: null }); // a dead end, still ours
});

test("a press becomes a drag past the threshold and then pans by the pointer's travel", () => {
  const press = { x: 100, y: 100, view: { x: 5, y: 6, k: 2 }, id: 1 };
  assert.equal(dragView(press, { x: 100 + DRAG_THRESHOLD, y: 100 }, false), null);
  assert.deepEqual(dragView(press, { x: 110, y: 90 }, false), { x: 15, y: -4, k: 2 });
  assert.deepEqual(dragView(press, { x: 101, y: 100 }, true), { x: 6, y: 6, k: 2 }); // dragging: every move pans
});

test("toolbar buttons: view changes, or the collapsed list to send", () => {
  const elements = { "fxcl-1": { kind: "cluster", name: "enc" }, "fx-x": { kind: "node", name: "x" } };
  const state = { elements, collapsed: ["enc"], nodes: NODES };
  assert.deepEqual(toolbarAction("fit", state), { fit: true });
  assert.deepEqual(toolbarAction("in", state), { zoom: 1.25 });
  assert.deepEqual(toolbarAction("out", state), { zoom: 0.8 });
  assert.deepEqual(toolbarAction("selection", state), { selection: true });
  assert.deepEqual(toolbarAction("collapse-all", state), { collapsed: ["enc"] });
  assert.deepEqual(toolbarAction("expand-level", state), { collapsed: ["enc.conv"] });
  assert.deepEqual(toolbarAction("expand-all", state), { collapsed: [] });
  assert.deepEqual(toolbarAction("weights", state), { show_weights: true }); // a toggle
  assert.deepEqual(toolbarAction("weights", { ...state, showWeights: true }), { show_weights: false });
  assert.equal(toolbarAction(undefined, state), null);
});

test("the legend shows the mode's words from Python and safe colours", () => {
  const modes = [{ name: "bytes", label: "bytes moved", unit: "bytes read and written" }];
  assert.deepEqual(legendView(modes, "bytes", [{ label: "bytes 0", color: "#ffffcc" },
    { label: "bytes 1e+04", color: "red;background:url(x)" }]), {
    title: "bytes moved (bytes read and written)",
    entries: [{ text: "0", color: "#ffffcc" }, { text: "1e+04", color: "transparent" }],
  });
});

test("Ctrl/⌘+Z undoes and with Shift redoes, except in a text field", () => {
  assert.equal(undoAction(key("z", { ctrlKey: true })), "undo");
  assert.equal(undoAction(key("Z", { metaKey: true, shiftKey: true })), "redo");
  assert.equal(undoAction(key("z")), null);
  assert.equal(undoAction(key("z", { ctrlKey: true, altKey: true })), null);
  const field = { closest: (sel) => (sel.includes("input") ? field : null) };
  assert.equal(undoAction(key("z", { ctrlKey: true, target: field })), null);
  assert.equal(undoAction(key("z", { ctrlKey: true, target: { closest: () => null } })), "undo");
});

/** A stand-in for a drawn element: its id and a classList over a Set. */
const drawn = (id, ...classes) => {
  const set = new Set(classes);
  return { id, classes: set, classList: { add: (c) => set.add(c), remove: (c) => set.delete(c) } };
};

test("setClass gives a class to exactly the wanted elements, keeping others' classes", () => {
  const [a, b, c] = [drawn("fx-a", "node", "fxviz-marked"), drawn("fx-b", "node", "fxviz-marked"), drawn("fx-c", "node")];
  setClass([a, b], [b, c], "fxviz-marked");
  assert.deepEqual([a, b, c].map((e) => [...e.classes]),
    [["node"], ["node", "fxviz-marked"], ["node", "fxviz-marked"]]);
  setClass([b, c], [], "fxviz-marked"); // cleared
  assert.deepEqual([a, b, c].map((e) => e.classes.has("fxviz-marked")), [false, false, false]);
});

test("marked nodes stand for their own boxes or, once, the collapsed box hiding them; undrawn ones for none", () => {
  const relu = drawn("fx-relu"), encoder = drawn("fxco-3");
  const elementFor = (name) => ({ relu, encoder_0: encoder, encoder_1: encoder })[name] ?? null;
  const found = markedElements(["encoder_0", "relu", "encoder_1", "gone"], elementFor);
  assert.deepEqual([...found].map((e) => e.id), ["fxco-3", "fx-relu"]);
  assert.equal(markedElements([], elementFor).size, 0);
});

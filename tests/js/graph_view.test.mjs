// Pure helpers of widgets/graph_view.js; run with `node --test tests/js/`.
// Importing the module at all checks that it touches no `document` at load.
import assert from "node:assert/strict";
import { test } from "node:test";

import widget, {
  SCALE_MAX, SCALE_MIN, NATURAL_SCALE,
  MIN_LABEL_PX,
  anchorView, applyClick, byDistance, collapseAll, countText, ensureVisible, expandOneLevel, fitBox,
  indexElements, initialView, keepInView, legendText, legendTitle, locate, minScale, modeLabel,
  moduleElementId, nextIndex, readableScale, revealView, safeColor, searchNodes, tooltipFor,
  walkStep, wheelAction, wheelFactor, zoomAt,
} from "../../widgets/graph_view.js";
import { SEARCH_ALIASES } from "../../widgets/gv_graph.js";

/** screen = world * k + (x, y) */
const toScreen = (view, p) => ({ x: p.x * view.k + view.x, y: p.y * view.k + view.y });
const close = (a, b, eps = 1e-9) => assert.ok(Math.abs(a - b) < eps, `${a} != ${b}`);

const NODES = {
  x: { op: "placeholder", target: "x", module_path: "", shape: "1×3", time: "" },
  encoder_0: { op: "call_module", target: "encoder.0", module_path: "encoder.0", shape: "1×4", time: "3 µs" },
  encoder_1: { op: "call_module", target: "encoder.1", module_path: "encoder.1", shape: "1×4", time: "1 µs" },
  relu: { op: "call_function", target: "torch.relu", module_path: "head", shape: "1×4", time: "" },
  output: { op: "output", target: "output", module_path: "", shape: "", time: "" },
};

const ELEMENTS = {
  "fx-x": { kind: "node", name: "x" },
  "fxcl-1": { kind: "cluster", name: "head" },
  "fx-relu": { kind: "node", name: "relu" },
  "fxco-2": { kind: "collapsed", name: "encoder" },
  "fxst-1": { kind: "stub", name: "x" },
  "fx-output": { kind: "node", name: "output" },
};

test("the module exports an anywidget with render", () => {
  assert.equal(typeof widget.render, "function");
});

test("zoomAt keeps the point under the cursor fixed", () => {
  const view = { x: 30, y: -20, k: 1.5 };
  const cursor = { x: 200, y: 120 };
  const world = { x: (cursor.x - view.x) / view.k, y: (cursor.y - view.y) / view.k };
  const zoomed = zoomAt(view, 2, cursor.x, cursor.y);
  close(zoomed.k, 3);
  const after = toScreen(zoomed, world);
  close(after.x, cursor.x);
  close(after.y, cursor.y);
});

test("zoomAt clamps the scale", () => {
  assert.equal(zoomAt({ x: 0, y: 0, k: 1 }, 1e6, 0, 0).k, SCALE_MAX);
  assert.equal(zoomAt({ x: 0, y: 0, k: 1 }, 1e-6, 0, 0).k, SCALE_MIN);
});

test("wheelFactor zooms in for wheel up, out for down, in bounded steps", () => {
  assert.ok(wheelFactor(-100, 0) > 1);
  assert.ok(wheelFactor(100, 0) < 1);
  close(wheelFactor(-3, 1), wheelFactor(-48, 0)); // lines are 16 px
  assert.equal(wheelFactor(-1e5, 0), wheelFactor(-100, 0));
  close(wheelFactor(100, 0) * wheelFactor(-100, 0), 1);
});

test("fitBox centres the box and fits it inside the padding", () => {
  const box = { x: 10, y: 20, width: 1000, height: 200 };
  const v = fitBox(box, 500, 400, 20);
  close(v.k, 460 / 1000);
  const tl = toScreen(v, box);
  const br = toScreen(v, { x: box.x + box.width, y: box.y + box.height });
  close(tl.x, 20);
  close(br.x, 480);
  close((tl.y + br.y) / 2, 200); // centred vertically
});

test("fitBox never enlarges a small graph past its natural size", () => {
  assert.equal(fitBox({ x: 0, y: 0, width: 10, height: 10 }, 800, 600).k, NATURAL_SCALE);
  assert.equal(fitBox({ x: 0, y: 0, width: 10, height: 10 }, 800, 600, 16, 2).k, 2);
});

test("fitBox gives null for an empty box or an unattached viewport", () => {
  assert.equal(fitBox({ x: 0, y: 0, width: 0, height: 10 }, 800, 600), null);
  assert.equal(fitBox({ x: 0, y: 0, width: 10, height: 10 }, 0, 0), null);
});

test("ensureVisible leaves a visible box alone and centres a hidden one", () => {
  const view = { x: 0, y: 0, k: 2 };
  const visible = { x: 50, y: 50, width: 20, height: 10 };
  assert.equal(ensureVisible(view, visible, 400, 300), view);
  const far = { x: 1000, y: 900, width: 20, height: 10 };
  const moved = ensureVisible(view, far, 400, 300);
  assert.equal(moved.k, 2);
  const c = toScreen(moved, { x: 1010, y: 905 });
  close(c.x, 200);
  close(c.y, 150);
});

test("anchorView puts a world point at a given screen point, same zoom", () => {
  const v = anchorView({ x: 5, y: 5, k: 0.5 }, { x: 100, y: 80 }, { x: 400, y: 20 });
  assert.equal(v.k, 0.5);
  const p = toScreen(v, { x: 400, y: 20 });
  close(p.x, 100);
  close(p.y, 80);
});

test("searchNodes matches name, target and module path, case-insensitively, in graph order", () => {
  assert.deepEqual(searchNodes(NODES, "ENCODER"), ["encoder_0", "encoder_1"]);
  assert.deepEqual(searchNodes(NODES, "torch.relu"), ["relu"]); // target only
  assert.deepEqual(searchNodes(NODES, "head"), ["relu"]); // module path only
  assert.deepEqual(searchNodes(NODES, "  "), []);
  assert.deepEqual(searchNodes(NODES, "nothing-like-this"), []);
});

// Targets as fxviz writes them on each front-end (graph.readable_target).
const ATTENTION_NODES = {
  x: { op: "placeholder", target: "x", module_path: "" },
  qkv: { op: "call_module", target: "blocks.0.attn.qkv (Linear)", module_path: "blocks.0.attn.qkv" },
  sdpa: { op: "call_function", target: "torch._C._nn.scaled_dot_product_attention", module_path: "blocks.0.attn" },
  flash: { op: "call_function", target: "aten._scaled_dot_product_flash_attention_for_cpu.default", module_path: "blocks.1" },
  flex: { op: "call_function", target: "flex_attention", module_path: "blocks.2" },
  softmax: { op: "call_function", target: "aten._softmax.default", module_path: "head" },
  addmm: { op: "call_function", target: "aten.addmm.default", module_path: "head" },
  bmm: { op: "call_function", target: "torch.bmm", module_path: "head" },
  ln: { op: "call_module", target: "blocks.0.norm1 (LayerNorm)", module_path: "blocks.0.norm1" },
  rms: { op: "call_function", target: "aten.rms_norm.default", module_path: "blocks.1" },
  conv: { op: "call_module", target: "stem.conv (Conv2d)", module_path: "stem.conv" },
  aten_conv: { op: "call_function", target: "aten.convolution.default", module_path: "stem" },
  output: { op: "output", target: "output", module_path: "" },
};

test("searchNodes finds attention by 'attention', 'attn', 'sdpa' and 'softmax' on every front-end", () => {
  const kernels = ["sdpa", "flash", "flex"];
  assert.deepEqual(searchNodes(ATTENTION_NODES, "sdpa"), kernels);
  assert.deepEqual(searchNodes(ATTENTION_NODES, "Attention"), ["qkv", ...kernels]); // the module path "attn" too
  assert.deepEqual(searchNodes(ATTENTION_NODES, "attn"), ["qkv", ...kernels]);
  assert.deepEqual(searchNodes(ATTENTION_NODES, "softmax"), [...kernels, "softmax"]);
});

test("searchNodes finds matmuls, norms and convolutions by their common names", () => {
  assert.deepEqual(searchNodes(ATTENTION_NODES, "matmul"), ["qkv", "sdpa", "flash", "flex", "addmm", "bmm"]);
  assert.deepEqual(searchNodes(ATTENTION_NODES, "mm"), searchNodes(ATTENTION_NODES, "matmul"));
  assert.deepEqual(searchNodes(ATTENTION_NODES, "norm"), ["ln", "rms"]);
  assert.deepEqual(searchNodes(ATTENTION_NODES, "layernorm"), ["ln"]); // underscores and case aside
  assert.deepEqual(searchNodes(ATTENTION_NODES, "RMS_Norm"), ["rms"]);
  assert.deepEqual(searchNodes(ATTENTION_NODES, "conv"), ["conv", "aten_conv"]);
  assert.deepEqual(searchNodes(ATTENTION_NODES, "convolution"), ["conv", "aten_conv"]);
  assert.deepEqual(searchNodes(ATTENTION_NODES, "linear"), ["qkv", "addmm"]);
});

test("searchNodes takes only the alias table's own words: 'constructor' is a word like any other", () => {
  assert.ok(Object.values(SEARCH_ALIASES).every((terms) => terms.length > 0));
  assert.deepEqual(searchNodes(ATTENTION_NODES, "constructor"), []);
  assert.deepEqual(searchNodes(ATTENTION_NODES, "toString"), []);
});

test("nextIndex cycles both ways and starts at the right end", () => {
  assert.equal(nextIndex(-1, 3, 1), 0);
  assert.equal(nextIndex(-1, 3, -1), 2);
  assert.equal(nextIndex(2, 3, 1), 0);
  assert.equal(nextIndex(0, 3, -1), 2);
  assert.equal(nextIndex(-1, 0, 1), -1);
});

test("countText says how many matched and which one is current", () => {
  assert.equal(countText(0, -1, ""), "");
  assert.equal(countText(0, -1, "zz"), "no match");
  assert.equal(countText(1, -1, "x"), "1 match");
  assert.equal(countText(4, -1, "x"), "4 matches");
  assert.equal(countText(4, 1, "x"), "2 / 4");
});

test("locate finds a node's own id, else its innermost collapsed module", () => {
  const index = indexElements({ ...ELEMENTS, "fxco-3": { kind: "collapsed", name: "encoder.1" } });
  assert.equal(locate(index, NODES, "relu"), "fx-relu");
  assert.equal(locate(index, NODES, "encoder_0"), "fxco-2");
  assert.equal(locate(index, NODES, "encoder_1"), "fxco-3");
  assert.equal(locate(index, NODES, ""), null);
  assert.equal(locate(index, NODES, "missing"), null);
});

test("locate does not confuse a module with one that shares its prefix", () => {
  const nodes = { a: { module_path: "encoder2.lin" } };
  assert.equal(locate(indexElements(ELEMENTS), nodes, "a"), null);
});

test("moduleElementId finds a module drawn collapsed or as a cluster", () => {
  assert.equal(moduleElementId(ELEMENTS, "encoder"), "fxco-2");
  assert.equal(moduleElementId(ELEMENTS, "head"), "fxcl-1");
  assert.equal(moduleElementId(ELEMENTS, "relu"), null);
});

test("applyClick: node selects, stub selects its producer, background clears", () => {
  const state = { selected: "", collapsed: ["encoder"] };
  assert.deepEqual(applyClick(ELEMENTS, "fx-relu", state), { selected: "relu" });
  assert.deepEqual(applyClick(ELEMENTS, "fxst-1", state), { selected: "x" });
  assert.equal(applyClick(ELEMENTS, "fx-relu", { ...state, selected: "relu" }), null);
  assert.deepEqual(applyClick(ELEMENTS, null, { ...state, selected: "relu" }), { selected: "" });
  assert.equal(applyClick(ELEMENTS, null, state), null);
  assert.equal(applyClick(ELEMENTS, "edge1", state), null);
});

test("applyClick: cluster label collapses, summary node expands", () => {
  const state = { selected: "relu", collapsed: ["encoder"] };
  assert.deepEqual(applyClick(ELEMENTS, "fxcl-1", state), { collapsed: ["encoder", "head"] });
  assert.deepEqual(applyClick(ELEMENTS, "fxco-2", state), { collapsed: [] });
  assert.deepEqual(state.collapsed, ["encoder"], "the model's list is not mutated");
});

test("tooltipFor describes nodes, stubs and modules", () => {
  const node = tooltipFor(ELEMENTS, NODES, "fx-relu");
  assert.equal(node.title, "relu");
  assert.deepEqual(node.rows, [["op", "call_function"], ["target", "torch.relu"],
    ["shape", "1×4"], ["module", "head"]]); // empty time left out
  assert.equal(tooltipFor(ELEMENTS, NODES, "fxst-1").title, "x");
  const collapsed = tooltipFor(ELEMENTS, NODES, "fxco-2");
  assert.deepEqual(collapsed.rows, [["nodes", "2"]]);
  assert.match(collapsed.hint, /expand/);
  assert.match(tooltipFor(ELEMENTS, NODES, "fxcl-1").hint, /collapse/);
  assert.equal(tooltipFor(ELEMENTS, NODES, "edge1"), null);
});

/** The modes as Python sends them (fxviz.colour_modes.views()). */
const MODES = [
  { name: "op", label: "op kind", unit: "" },
  { name: "time", label: "time share", unit: "% of the step's node time" },
  { name: "flops", label: "FLOPs", unit: "floating-point operations per forward" },
];

test("modeLabel takes the words the model sends and passes unknown modes through", () => {
  assert.equal(modeLabel(MODES, "flops"), "FLOPs");
  assert.equal(modeLabel(MODES, "custom"), "custom");
  assert.equal(modeLabel([{ name: "bytes", label: "bytes moved" }], "bytes"), "bytes moved");
  assert.equal(modeLabel([], "op"), "op");
});

test("safeColor accepts hex colours only", () => {
  assert.equal(safeColor("#a1b2c3"), "#a1b2c3");
  assert.equal(safeColor("red; background: url(x)"), "transparent");
  assert.equal(safeColor(undefined), "transparent");
});

test("initialView shows a small graph whole and starts a tall one legible at its top", () => {
  const small = { x: 0, y: 0, width: 200, height: 300 };
  assert.deepEqual(initialView(small, 800, 600), fitBox(small, 800, 600));
  const readable = readableScale(11);
  close(readable * 11, MIN_LABEL_PX); // names of 11 units are drawn MIN_LABEL_PX tall
  const tall = { x: 0, y: 0, width: 300, height: 6000 };
  const v = initialView(tall, 800, 600, readable);
  assert.equal(v.k, readable);
  assert.equal(v.y, 16); // the top of the graph (its inputs) is in view
  close(v.x, (800 - 300 * readable) / 2);
  assert.ok(fitBox(tall, 800, 600).k < readable);
  // Wider than the view too: starts at its left edge rather than centred off-screen.
  const wide = initialView({ x: 0, y: 0, width: 4000, height: 6000 }, 800, 600, readable);
  assert.equal(wide.k, readable);
  assert.equal(wide.x, 16);
});

test("minScale stops zooming out at the whole graph, never below SCALE_MIN", () => {
  const readable = readableScale(11);
  const whole = fitBox({ x: 0, y: 0, width: 300, height: 6000 }, 800, 600).k;
  close(minScale({ x: 0, y: 0, width: 300, height: 6000 }, 800, 600, readable), whole);
  assert.equal(minScale({ x: 0, y: 0, width: 300, height: 1e7 }, 800, 600, readable), SCALE_MIN);
  // A small graph may still be zoomed out to the legible size.
  assert.equal(minScale({ x: 0, y: 0, width: 20, height: 20 }, 800, 600, readable), readable);
  assert.equal(zoomAt({ x: 0, y: 0, k: 1 }, 0.001, 0, 0, 0.4).k, 0.4);
});

test("keepInView pans a graph that left the viewport back, keeping the zoom", () => {
  const box = { x: 0, y: 0, width: 100, height: 1000 };
  const inside = { x: 10, y: -200, k: 0.5 };
  assert.deepEqual(keepInView(inside, box, 800, 600), inside);
  const below = keepInView({ x: 10, y: -5000, k: 0.5 }, box, 800, 600);
  assert.equal(below.k, 0.5);
  assert.equal(below.x, 10);
  assert.ok(below.y + 1000 * 0.5 >= 48, "the graph's bottom is back on screen");
  const right = keepInView({ x: 5000, y: 0, k: 1 }, box, 800, 600);
  assert.ok(right.x <= 800 - 48 && right.x + 100 >= 48, JSON.stringify(right));
});

test("revealView zooms a speck in to legible and centres it; leaves a legible visible one", () => {
  const box = { x: 100, y: 100, width: 50, height: 20 };
  const v = revealView({ x: 0, y: 0, k: 0.1 }, box, 800, 600, 0.9);
  assert.equal(v.k, 0.9);
  const c = toScreen(v, { x: 125, y: 110 });
  close(c.x, 400);
  close(c.y, 300);
  const fine = { x: 0, y: 0, k: 2 };
  assert.deepEqual(revealView(fine, box, 800, 600, 0.9), fine);
});

test("byDistance orders names nearest first", () => {
  const pts = [["a", { x: 0, y: 0 }], ["b", { x: 9, y: 9 }], ["c", { x: 4, y: 5 }]];
  assert.deepEqual(byDistance(pts, { x: 5, y: 5 }), ["c", "b", "a"]);
});

test("wheelAction: the page scrolls unless Ctrl/Cmd is held or the graph has focus", () => {
  assert.equal(wheelAction({ ctrlKey: false, metaKey: false }, false), "page");
  assert.equal(wheelAction({ ctrlKey: true, metaKey: false }, false), "zoom");
  assert.equal(wheelAction({ ctrlKey: false, metaKey: true }, false), "zoom");
  assert.equal(wheelAction({ ctrlKey: false, metaKey: false }, true), "zoom");
});

test("collapseAll keeps only the outermost modules", () => {
  const elements = {
    "fxcl-1": { kind: "cluster", name: "layer1" },
    "fxcl-2": { kind: "cluster", name: "layer1.0" },
    "fxco-3": { kind: "collapsed", name: "layer1.1" },
    "fxco-4": { kind: "collapsed", name: "layer2" },
    "fxcl-5": { kind: "cluster", name: "layer10.0" }, // its parent is not drawn as a box
    "fx-x": { kind: "node", name: "x" },
  };
  assert.deepEqual(collapseAll(elements), ["layer1", "layer10.0", "layer2"]);
});

test("expandOneLevel replaces each collapsed module by its submodules", () => {
  const nodes = {
    a: { module_path: "layer1.0.conv1" }, b: { module_path: "layer1.1" },
    c: { module_path: "layer1" }, d: { module_path: "layer10.0" }, e: { module_path: "fc" },
  };
  assert.deepEqual(expandOneLevel(["layer1", "fc"], nodes), ["layer1.0", "layer1.1"]);
  assert.deepEqual(expandOneLevel([], nodes), []);
});

test("walkStep: Up to an input, Down to a user, Left/Right among the alternatives", () => {
  const nodes = {
    x: { users: ["a", "b"] }, a: { inputs: ["x"], users: ["add"] },
    b: { inputs: ["x"], users: ["add"] }, add: { inputs: ["a", "b"] },
  };
  const down = walkStep(nodes, "x", "ArrowDown", null);
  assert.equal(down.name, "a");
  const right = walkStep(nodes, "a", "ArrowRight", down.walk);
  assert.equal(right.name, "b");
  assert.equal(walkStep(nodes, "b", "ArrowRight", right.walk).name, "a"); // wraps
  assert.equal(walkStep(nodes, "b", "ArrowLeft", right.walk).name, "a");
  assert.equal(walkStep(nodes, "add", "ArrowUp", null).name, "a");
  assert.equal(walkStep(nodes, "x", "ArrowUp", null), null); // an input has no inputs
  assert.equal(walkStep(nodes, "add", "ArrowLeft", down.walk), null); // not part of that walk
  assert.equal(walkStep(nodes, "gone", "ArrowDown", null), null);
});

test("legend heading carries the unit; heat labels lose the repeated mode name", () => {
  assert.equal(legendTitle(MODES, "time"), "time share (% of the step's node time)");
  assert.ok(legendTitle(MODES, "flops").startsWith("FLOPs ("));
  assert.equal(legendTitle(MODES, "op"), "op kind");
  assert.equal(legendTitle([{ name: "p75", label: "slow quartile", unit: "µs" }], "p75"), "slow quartile (µs)");
  assert.equal(legendText("time", "time 4.1"), "4.1");
  assert.equal(legendText("flops", "flops 5.9e+07"), "5.9e+07");
  assert.equal(legendText("op", "call_module"), "call_module");
});

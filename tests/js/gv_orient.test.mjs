// Orientation in the graph view: where the first view and Fit start, and the overview
// (minimap) maths. Run with `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  MINIMAP_MIN, MINIMAP_STRETCH, NATURAL_SCALE, fitBox, initialView, inputNames, minimapFrame, minimapLayout,
  minimapTarget, readableScale, startTarget, topRow, unionBox, overviewNeeded,
} from "../../widgets/graph_view.js";

const readable = readableScale(11);
/** The screen box of world box `b` under view `v`. */
const onScreen = (v, b) => ({ x: b.x * v.k + v.x, y: b.y * v.k + v.y, width: b.width * v.k, height: b.height * v.k });
const inPane = (r, width, height) => r.x >= 0 && r.y >= 0 && r.x + r.width <= width && r.y + r.height <= height;
const close = (a, b, eps = 1e-9) => assert.ok(Math.abs(a - b) < eps, `${a} != ${b}`);

test("a wide graph's first view starts at its input, wherever it is along the top row", () => {
  // regnety: 46 parameter boxes along the top, the input `x` at the right end of them.
  const graph = { x: 0, y: 0, width: 6000, height: 9000 };
  const x = { x: 5200, y: 4, width: 60, height: 30 };
  const v = initialView(graph, 900, 600, readable, [x]);
  assert.equal(v.k, Math.min(readable, NATURAL_SCALE));
  const r = onScreen(v, x);
  assert.ok(inPane(r, 900, 600), JSON.stringify(r));
  close(r.x + r.width / 2, 450); // centred across
  close(v.y, 16); // the top of the graph
  // Without the inputs (no node records yet), as before: from the left edge, at the top.
  assert.deepEqual(initialView(graph, 900, 600, readable, []), initialView(graph, 900, 600, readable));
  assert.equal(initialView(graph, 900, 600, readable).x, 16);
});

test("a start near an edge is not centred past the graph's edge: no empty stretch beside it", () => {
  const graph = { x: 0, y: 0, width: 6000, height: 9000 };
  const right = { x: 5900, y: 4, width: 90, height: 30 };
  const v = initialView(graph, 900, 600, readable, [right]);
  const g = onScreen(v, graph);
  close(g.x + g.width, 900 - 16); // the graph's right edge 16 px in from the pane's
  assert.ok(inPane(onScreen(v, right), 900, 600));
  const left = { x: 10, y: 4, width: 90, height: 30 };
  close(initialView(graph, 900, 600, readable, [left]).x, 16);
});

test("a start below the first screenful is brought to the top; a small graph is still shown whole", () => {
  const graph = { x: 0, y: 0, width: 6000, height: 9000 };
  const low = { x: 3000, y: 2000, width: 60, height: 30 };
  const v = initialView(graph, 900, 600, readable, [low]);
  close(onScreen(v, low).y, 16);
  const small = { x: 0, y: 0, width: 200, height: 300 };
  assert.deepEqual(initialView(small, 800, 600, readable, [low]), fitBox(small, 800, 600));
});

test("Fit after Collapse all: a short wide drawing is centred down, its start across", () => {
  // A few collapsed boxes beside a long row of parameters: wider than the pane, not tall.
  const graph = { x: 0, y: 0, width: 5000, height: 200 };
  const start = { x: 4000, y: 20, width: 120, height: 40 };
  const v = initialView(graph, 900, 600, readable, [start]);
  const g = onScreen(v, graph);
  close(g.y + g.height / 2, 300);
  const r = onScreen(v, start);
  assert.ok(inPane(r, 900, 600));
  close(r.x + r.width / 2, 450);
});

test("several inputs: all in view when they fit side by side, else the first", () => {
  const a = { x: 100, y: 0, width: 50, height: 20 }, b = { x: 400, y: 0, width: 50, height: 20 };
  assert.deepEqual(startTarget([a, b], 600), unionBox([a, b]));
  assert.deepEqual(unionBox([a, b]), { x: 100, y: 0, width: 350, height: 20 });
  assert.equal(startTarget([a, b], 300), a);
  assert.equal(startTarget([], 300), null);
});

test("the top row: boxes whose top is above the highest box's middle, left to right", () => {
  const boxes = [{ x: 300, y: 2, width: 40, height: 20 }, { x: 10, y: 8, width: 40, height: 20 },
    { x: 50, y: 60, width: 40, height: 20 }];
  assert.deepEqual(topRow(boxes).map((b) => b.x), [10, 300]);
  assert.deepEqual(topRow([]), []);
});

test("the user's inputs: placeholders, not the parameters export or dynamo lifted to inputs", () => {
  const nodes = {
    b_bn_running_mean: { op: "placeholder", target: "bn.running_mean" },
    l_self_modules_fc_parameters_weight_: { op: "placeholder", target: "fc.weight" },
    x: { op: "placeholder", target: "x" },
    args: { op: "placeholder", target: "*args" },
    l_x_: { op: "placeholder", target: "L_x_" },
    conv: { op: "call_module", target: "conv" },
  };
  assert.deepEqual(inputNames(nodes), ["x", "args", "l_x_"]);
  // Only lifted ones: every placeholder, rather than none.
  assert.deepEqual(inputNames({ w: { op: "placeholder", target: "fc.weight" } }), ["w"]);
  assert.deepEqual(inputNames({}), []);
});

test("the overview is needed only while the graph reaches well beyond the pane", () => {
  const graph = { x: 0, y: 0, width: 400, height: 300 };
  assert.equal(overviewNeeded({ x: 10, y: 10, k: 1 }, graph, 800, 600), false); // on screen
  assert.equal(overviewNeeded({ x: -50, y: 10, k: 1 }, graph, 800, 600), false); // moved, still small
  assert.equal(overviewNeeded({ x: 10, y: 10, k: 2.5 }, graph, 800, 600), false); // a little beyond: scrolled
  assert.equal(overviewNeeded({ x: 10, y: 10, k: 3.1 }, graph, 800, 600), true); // 1240 px across a pane of 800
});

test("overview layout: within its room, a thin graph stretched at most MINIMAP_STRETCH, never a hairline", () => {
  const square = minimapLayout({ x: 0, y: 0, width: 1000, height: 1000 }, 800, 600);
  assert.equal(square.sx, square.sy);
  assert.ok(square.width <= 180 && square.height <= 240);
  const tall = minimapLayout({ x: 0, y: 0, width: 300, height: 30000 }, 800, 600);
  close(tall.sx, tall.sy * MINIMAP_STRETCH);
  const chain = minimapLayout({ x: 0, y: 0, width: 300, height: 3000 }, 800, 600);
  close(chain.sx * 300, 80); // stretched only up to 80 px across
  close(tall.height, 240); // 40 % of the pane down, at most 240 px
  assert.ok(tall.width >= MINIMAP_MIN);
  close(tall.ox, (tall.width - 300 * tall.sx) / 2); // centred across its box
});

test("overview frame and click: the part on screen, and going to a point keeps the zoom", () => {
  const graph = { x: 0, y: 0, width: 2000, height: 4000 };
  const layout = minimapLayout(graph, 800, 600);
  const view = { x: -500, y: -1000, k: 1 }; // world (500, 1000) at the pane's top left
  const f = minimapFrame(view, graph, 800, 600, layout);
  close(f.x, 500 * layout.sx + layout.ox);
  close(f.y, 1000 * layout.sy + layout.oy);
  close(f.width, 800 * layout.sx);
  close(f.height, 600 * layout.sy);
  // A click at the frame's centre changes nothing; anywhere else centres that point.
  const same = minimapTarget(view, { x: f.x + f.width / 2, y: f.y + f.height / 2 }, graph, 800, 600, layout);
  close(same.x, view.x);
  close(same.y, view.y);
  const p = { x: layout.ox + 100 * layout.sx, y: layout.oy + 3000 * layout.sy };
  const to = minimapTarget({ ...view, k: 2 }, p, graph, 800, 600, layout);
  assert.equal(to.k, 2);
  close(100 * to.k + to.x, 400);
  close(3000 * to.k + to.y, 300);
  // Clipped to the overview when the view shows beyond the graph.
  const out = minimapFrame({ x: 300, y: 200, k: 0.1 }, graph, 800, 600, layout);
  assert.deepEqual([out.x, out.y], [0, 0]);
  assert.ok(out.width <= layout.width && out.height <= layout.height);
});

test("a start that is on screen with the graph's left edge is shown from that edge, as a page is read", () => {
  const graph = { x: 0, y: 0, width: 3000, height: 9000 };
  const near = { x: 180, y: 4, width: 90, height: 30 }; // clusters reach left of it (T5's encoder)
  const v = initialView(graph, 900, 600, readable, [near]);
  close(v.x, 16); // the left edge in view, not cut off to centre the input
  assert.ok(inPane(onScreen(v, near), 900, 600));
});

test("two inputs far apart (an encoder's and a decoder's): from the left edge when the first is then on screen", () => {
  const graph = { x: 0, y: 0, width: 3000, height: 9000 };
  const encoder = { x: 180, y: 4, width: 90, height: 30 }, decoder = { x: 2600, y: 3000, width: 90, height: 30 };
  const v = initialView(graph, 900, 600, readable, [encoder, decoder]);
  close(v.x, 16);
  assert.ok(inPane(onScreen(v, encoder), 900, 600));
});

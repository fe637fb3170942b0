// @ts-check
/**
 * Graph view, the overview (minimap): a small copy of the drawing in the viewport's
 * corner with the part on screen framed; a click or drag on it goes there. Shown only
 * while the graph on screen is well beyond the pane (a graph a little taller than the
 * pane is scrolled, not mapped: the overview would hide part of it). The maths is pure
 * and exported.
 */

/** @typedef {import("./gv_view.js").View} View */
/** @typedef {import("./gv_view.js").Box} Box */
/** @typedef {import("./gv_view.js").Point} Point */
/** @typedef {{sx: number, sy: number, width: number, height: number, ox: number, oy: number}} Layout
 * sx/sy: overview px per world unit across and down; width/height: the overview's size
 * (px); ox/oy: where the drawing starts in it (a thin graph is centred in a box no
 * thinner than MINIMAP_MIN). */

/** The overview's room (px) across and down: a share of the pane, within these bounds. */
const ROOM = { across: [0.2, 180], down: [0.4, 240] };
/** How far beyond the pane (across or down, as drawn now) a graph must reach to get an overview. */
export const OVERVIEW_BEYOND = 1.5;
/** Its smallest side (px): a tall thin graph still leaves something to click. */
export const MINIMAP_MIN = 40;
/** How much more a thin graph's short side may be stretched than its long side (up to
 * THIN px), so a chain thousands of units tall shows its boxes, not a hairline. */
export const MINIMAP_STRETCH = 4;
const THIN = 80;

/**
 * Whether an overview helps: the graph as drawn now reaches well beyond the pane.
 * @param {View} view @param {Box} graph @param {number} width @param {number} height
 */
export function overviewNeeded(view, graph, width, height) {
  return graph.width * view.k > OVERVIEW_BEYOND * width || graph.height * view.k > OVERVIEW_BEYOND * height;
}

/**
 * The overview's scales and size for `graph` in a width x height pane.
 * @param {Box} graph @param {number} width @param {number} height
 * @returns {Layout}
 */
export function minimapLayout(graph, width, height) {
  const room = (/** @type {number} */ side, /** @type {number[]} */ [share, most]) =>
    Math.max(MINIMAP_MIN, Math.min(most, side * share));
  const across = room(width, ROOM.across) / graph.width, down = room(height, ROOM.down) / graph.height;
  const s = Math.min(across, down);
  const stretched = (/** @type {number} */ most, /** @type {number} */ side) =>
    Math.min(most, s * MINIMAP_STRETCH, Math.max(s, THIN / side));
  const sx = stretched(across, graph.width), sy = stretched(down, graph.height);
  const w = Math.max(MINIMAP_MIN, graph.width * sx), h = Math.max(MINIMAP_MIN, graph.height * sy);
  return { sx, sy, width: w, height: h, ox: (w - graph.width * sx) / 2, oy: (h - graph.height * sy) / 2 };
}

/**
 * The part of the graph on screen as a rectangle in overview px, clipped to the overview.
 * @param {View} view @param {Box} graph @param {number} width @param {number} height @param {Layout} layout
 * @returns {Box}
 */
export function minimapFrame(view, graph, width, height, layout) {
  const at = (/** @type {number} */ screen, /** @type {number} */ offset, /** @type {number} */ origin,
    /** @type {number} */ s, /** @type {number} */ o) => ((screen - offset) / view.k - origin) * s + o;
  const x0 = Math.max(0, at(0, view.x, graph.x, layout.sx, layout.ox));
  const y0 = Math.max(0, at(0, view.y, graph.y, layout.sy, layout.oy));
  const x1 = Math.min(layout.width, at(width, view.x, graph.x, layout.sx, layout.ox));
  const y1 = Math.min(layout.height, at(height, view.y, graph.y, layout.sy, layout.oy));
  return { x: x0, y: y0, width: Math.max(0, x1 - x0), height: Math.max(0, y1 - y0) };
}

/**
 * The view, at the same zoom, centred on the graph point under overview point `p` (px).
 * @param {View} view @param {Point} p @param {Box} graph @param {number} width @param {number} height
 * @param {Layout} layout
 * @returns {View}
 */
export function minimapTarget(view, p, graph, width, height, layout) {
  const wx = (p.x - layout.ox) / layout.sx + graph.x, wy = (p.y - layout.oy) / layout.sy + graph.y;
  return { k: view.k, x: width / 2 - wx * view.k, y: height / 2 - wy * view.k };
}

/**
 * @param {{h: import("./gv_dom.js").Maker, viewport: HTMLElement, go: (view: View) => void,
 *   on: (target: EventTarget, type: string, fn: (e: any) => void) => void}} parts
 *   go: show that view (the stage's setView)
 */
export function createMinimap({ h, viewport, go, on }) {
  const box = h("div", "fxviz-gv-minimap");
  box.title = "Overview: the framed part is on screen; click or drag to go elsewhere";
  box.hidden = true;
  const frame = h("div", "fxviz-gv-minimap-frame");
  viewport.append(box);
  /** @type {SVGSVGElement | null} */
  let copy = null;
  /** What `update` last showed, for a click to go from. */
  let shown = /** @type {{view: View, graph: Box, layout: Layout} | null} */ (null);

  /** A new drawing: its copy, without ids (they stay the view's) or text (unreadable this small).
   * @param {SVGSVGElement | null} svg */
  function draw(svg) {
    copy = svg && /** @type {SVGSVGElement} */ (svg.cloneNode(true));
    if (copy) {
      for (const e of [copy, ...copy.querySelectorAll("[id], text")]) {
        if (e.localName === "text") e.remove();
        else e.removeAttribute("id");
      }
      copy.setAttribute("preserveAspectRatio", "none"); // a thin graph is stretched (MINIMAP_STRETCH)
    }
    box.replaceChildren(...(copy ? [copy, frame] : []));
    shown = null;
    box.hidden = true;
  }

  /** Show the frame of `view`; hidden unless the graph reaches well beyond the pane.
   * @param {View} view @param {Box} graph */
  function update(view, graph) {
    const width = viewport.clientWidth, height = viewport.clientHeight;
    const needed = copy && width > 0 && graph.width > 0 && graph.height > 0
      && overviewNeeded(view, graph, width, height);
    box.hidden = !needed;
    if (!copy || !needed) return;
    const layout = minimapLayout(graph, width, height);
    shown = { view, graph, layout };
    box.style.width = `${layout.width}px`;
    box.style.height = `${layout.height}px`;
    copy.setAttribute("width", String(graph.width * layout.sx));
    copy.setAttribute("height", String(graph.height * layout.sy));
    copy.style.left = `${layout.ox}px`;
    copy.style.top = `${layout.oy}px`;
    const f = minimapFrame(view, graph, width, height, layout);
    Object.assign(frame.style, { left: `${f.x}px`, top: `${f.y}px`, width: `${f.width}px`, height: `${f.height}px` });
  }

  /** @param {PointerEvent} e */
  function goTo(e) {
    if (!shown) return;
    const r = box.getBoundingClientRect();
    const { view, graph, layout } = shown;
    go(minimapTarget(view, { x: e.clientX - r.left, y: e.clientY - r.top }, graph, viewport.clientWidth,
      viewport.clientHeight, layout));
  }

  // The overview's own pointer: none of it reaches the viewport (no pan, no deselect).
  on(box, "pointerdown", (/** @type {PointerEvent} */ e) => {
    e.stopPropagation();
    if (e.button !== 0) return;
    box.setPointerCapture(e.pointerId);
    goTo(e);
  });
  on(box, "pointermove", (/** @type {PointerEvent} */ e) => {
    e.stopPropagation();
    if ((e.buttons & 1) && box.hasPointerCapture(e.pointerId)) goTo(e);
  });
  for (const type of ["pointerup", "click", "dblclick"]) on(box, type, (/** @type {Event} */ e) => e.stopPropagation());

  return { draw, update };
}

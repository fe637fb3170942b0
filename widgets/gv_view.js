// @ts-check
/**
 * Graph view, pan and zoom: pure view maths (no `document`), imported by
 * graph_view.js and by `node --test`.
 */

/** Pan/zoom state: screen = world * k + (x, y); world units are SVG user units.
 * @typedef {{x: number, y: number, k: number}} View */
/** @typedef {{x: number, y: number, width: number, height: number}} Box */
/** @typedef {{x: number, y: number}} Point */

/** The furthest any zoom goes out; the usual floor is higher (see minScale). */
export const SCALE_MIN = 0.05;
export const SCALE_MAX = 8;
/** Graphviz draws in points and a browser shows 1pt as 4/3 px: "fit" never enlarges past that. */
export const NATURAL_SCALE = 4 / 3;
/** Pointer travel (px) below which a press-and-release is a click, not a drag. */
export const DRAG_THRESHOLD = 4;

/** @param {number} v @param {number} lo @param {number} hi */
export function clamp(v, lo, hi) {
  return Math.min(hi, Math.max(lo, v));
}

/**
 * Zoom by `factor` keeping the screen point (px, py) fixed, the scale kept in [lo, hi].
 * @param {View} view @param {number} factor @param {number} px @param {number} py
 * @param {number} [lo] @param {number} [hi]
 * @returns {View}
 */
export function zoomAt(view, factor, px, py, lo = SCALE_MIN, hi = SCALE_MAX) {
  const k = clamp(view.k * factor, lo, Math.max(lo, hi));
  const f = k / view.k;
  return { k, x: px - (px - view.x) * f, y: py - (py - view.y) * f };
}

/**
 * Zoom factor for one wheel event. Deltas are capped so a single notch of a
 * coarse mouse wheel cannot jump by orders of magnitude.
 * @param {number} deltaY @param {number} deltaMode 0 pixels, 1 lines, 2 pages
 */
export function wheelFactor(deltaY, deltaMode) {
  const px = deltaMode === 1 ? deltaY * 16 : deltaMode === 2 ? deltaY * 400 : deltaY;
  return Math.exp(-clamp(px, -100, 100) * 0.002);
}

/**
 * The view that centres `box` in a width x height viewport, as large as fits.
 * @param {Box} box @param {number} width @param {number} height
 * @param {number} [padding] screen pixels kept free on each side
 * @param {number} [maxScale]
 * @returns {View | null} null when the box or the viewport is empty
 */
export function fitBox(box, width, height, padding = 16, maxScale = NATURAL_SCALE) {
  if (!(box.width > 0 && box.height > 0 && width > 0 && height > 0)) return null;
  const room = (/** @type {number} */ side) => Math.max(side - 2 * padding, side / 2);
  const k = clamp(
    Math.min(room(width) / box.width, room(height) / box.height), SCALE_MIN, maxScale);
  return {
    k,
    x: (width - box.width * k) / 2 - box.x * k,
    y: (height - box.height * k) / 2 - box.y * k,
  };
}

/** Node names are never drawn smaller than this (screen px) at a first view, Fit or a
 * search: at 11 px a name of 11 units is read easily and its 8-unit shape line still is. */
export const MIN_LABEL_PX = 11;

/**
 * The smallest zoom at which labels drawn at `fontSize` SVG units are legible.
 * @param {number} fontSize
 */
export function readableScale(fontSize) {
  return MIN_LABEL_PX / (fontSize > 0 ? fontSize : 11);
}

/**
 * The view "Fit" and a new graph get: the whole graph when it fits at a legible
 * zoom, else legible, starting at the top and across at `starts` (the drawn boxes of
 * the inputs: a wide graph's inputs may be anywhere along its top row), so the first
 * thing seen is where the graph begins, never an empty stretch of it: from the left
 * edge when the starts are then in view, else centred on them. Never smaller than legible.
 * @param {Box} box @param {number} width @param {number} height
 * @param {number} [readable] the legible zoom (see readableScale)
 * @param {Box[]} [starts] in graph order
 * @returns {View | null}
 */
export function initialView(box, width, height, readable = readableScale(11), starts = []) {
  const whole = fitBox(box, width, height);
  if (!whole || whole.k >= readable) return whole;
  const k = Math.min(readable, NATURAL_SCALE);
  const target = startTarget(starts, (width - 32) / k);
  /** The pan along one axis: `at` (world) placed at screen `place`, the graph's own
   * edges kept within 16 px of the pane's when it is larger than the pane. */
  const axis = (/** @type {number} */ lo, /** @type {number} */ size, /** @type {number} */ room,
    /** @type {number} */ at, /** @type {number} */ place) => {
    if (size * k <= room - 32) return (room - size * k) / 2 - lo * k;
    return clamp(place - at * k, room - 16 - (lo + size) * k, 16 - lo * k);
  };
  // Across: from the graph's left edge, as a page is read, when the first input is then on
  // screen; else centred on the starts (a wide graph's inputs may be far along its top row).
  const fromLeft = axis(box.x, box.width, width, box.x, 16);
  const first = starts[0]; // in graph order: the first input (T5's input_ids, before decoder_input_ids)
  const startShown = !first || (first.x + first.width) * k + fromLeft <= width - 16;
  const x = startShown ? fromLeft : axis(box.x, box.width, width, center(target).x, width / 2);
  // The top of the graph, unless that leaves the start below the pane: then the start at the top.
  const below = target && (target.y + target.height - box.y) * k > height - 32;
  const y = axis(box.y, box.height, height, below && target ? target.y : box.y, 16);
  return { k, x, y };
}

/**
 * What a first view centres across: all the starts when they fit in `room` (world
 * units) side by side, else the first one; null without starts.
 * @param {Box[]} starts @param {number} room
 * @returns {Box | null}
 */
export function startTarget(starts, room) {
  if (!starts.length) return null;
  const union = unionBox(starts);
  return union.width <= room ? union : starts[0];
}

/**
 * The boxes of the top row (those starting above the top box's middle), left to right:
 * where a drawing laid out top to bottom begins, when its inputs are not known.
 * @param {Box[]} boxes
 * @returns {Box[]}
 */
export function topRow(boxes) {
  if (!boxes.length) return [];
  const top = boxes.reduce((a, b) => (b.y < a.y ? b : a));
  return boxes.filter((b) => b.y < top.y + top.height / 2).sort((a, b) => a.x - b.x);
}

/** The smallest box holding every box of `boxes` (one at least). @param {Box[]} boxes @returns {Box} */
export function unionBox(boxes) {
  const x = Math.min(...boxes.map((b) => b.x)), y = Math.min(...boxes.map((b) => b.y));
  const right = Math.max(...boxes.map((b) => b.x + b.width)), bottom = Math.max(...boxes.map((b) => b.y + b.height));
  return { x, y, width: right - x, height: bottom - y };
}

/**
 * The floor of zooming out: the whole graph at once, but never below SCALE_MIN and
 * never forced above legible (a small graph may still be zoomed out to `readable`).
 * @param {Box} box @param {number} width @param {number} height @param {number} readable
 */
export function minScale(box, width, height, readable) {
  const whole = fitBox(box, width, height);
  return whole ? clamp(whole.k, SCALE_MIN, Math.min(readable, NATURAL_SCALE)) : SCALE_MIN;
}

/**
 * Same zoom, panned as little as needed so that at least `margin` px of `box`
 * stay on screen: the graph never leaves the viewport blank.
 * @param {View} view @param {Box} box @param {number} width @param {number} height
 * @param {number} [margin]
 * @returns {View}
 */
export function keepInView(view, box, width, height, margin = 48) {
  const axis = (/** @type {number} */ offset, /** @type {number} */ start,
    /** @type {number} */ size, /** @type {number} */ room) => {
    const lo = start * view.k + offset;
    const hi = lo + size * view.k;
    const m = Math.min(margin, (hi - lo) / 2, room / 2);
    if (hi < m) return offset + (m - hi);
    if (lo > room - m) return offset - (lo - (room - m));
    return offset;
  };
  return { k: view.k, x: axis(view.x, box.x, box.width, width),
    y: axis(view.y, box.y, box.height, height) };
}

/**
 * The view that shows `box` at a legible zoom at least: the same view when the box
 * is on screen and legible, else centred on it (zooming in to `readable` if needed).
 * Used by search, so a match is never left a speck.
 * @param {View} view @param {Box} box @param {number} width @param {number} height
 * @param {number} readable
 * @returns {View}
 */
export function revealView(view, box, width, height, readable) {
  const k = Math.max(view.k, Math.min(readable, SCALE_MAX));
  if (k === view.k) return ensureVisible(view, box, width, height);
  const c = center(box);
  return { k, x: width / 2 - c.x * k, y: height / 2 - c.y * k };
}

/**
 * The names in `points` ordered by distance to `p`, nearest first: what stays
 * still when a new drawing replaces the old one and nothing is selected.
 * @param {Array<[string, Point]>} points @param {Point} p
 * @returns {string[]}
 */
export function byDistance(points, p) {
  const d = (/** @type {Point} */ q) => (q.x - p.x) ** 2 + (q.y - p.y) ** 2;
  return [...points].sort((a, b) => d(a[1]) - d(b[1])).map(([name]) => name);
}

/**
 * What a wheel event does: "zoom" when Ctrl/⌘ is held (also a trackpad pinch) or
 * the graph has focus, else "page" (the notebook scrolls, as embedded maps do).
 * @param {{ctrlKey: boolean, metaKey: boolean}} e @param {boolean} focused
 * @returns {"zoom" | "page"}
 */
export function wheelAction(e, focused) {
  return e.ctrlKey || e.metaKey || focused ? "zoom" : "page";
}

/**
 * `view` unchanged when `box` is already on screen (so clicking a node never
 * moves the graph), else the same zoom centred on it.
 * @param {View} view @param {Box} box @param {number} width @param {number} height
 * @param {number} [margin]
 * @returns {View}
 */
export function ensureVisible(view, box, width, height, margin = 24) {
  const left = box.x * view.k + view.x;
  const top = box.y * view.k + view.y;
  const inside = left >= margin && top >= margin
    && left + box.width * view.k <= width - margin
    && top + box.height * view.k <= height - margin;
  if (inside) return view;
  const c = center(box);
  return { k: view.k, x: width / 2 - c.x * view.k, y: height / 2 - c.y * view.k };
}

/**
 * Same zoom, panned so that world point `world` lies at screen point `screen`:
 * keeps an anchor still while the SVG under it is re-laid out.
 * @param {View} view @param {Point} screen @param {Point} world
 * @returns {View}
 */
export function anchorView(view, screen, world) {
  return { k: view.k, x: screen.x - world.x * view.k, y: screen.y - world.y * view.k };
}

/** @param {Box} box @returns {Point} */
export function center(box) {
  return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
}

/** @param {Box} box @param {number} by @returns {Box} */
export function grow(box, by) {
  return { x: box.x - by, y: box.y - by, width: box.width + 2 * by, height: box.height + 2 * by };
}

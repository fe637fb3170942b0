// @ts-check
/**
 * fxviz graph view: the Graphviz SVG of one step with pan/zoom, selection, search,
 * collapsible module clusters, colour modes and a legend.
 *
 * An anywidget front-end. All state lives in the model's traitlets (see
 * docs/CONTRACTS.md); this file has no imports because anywidget loads it from a
 * string. The helpers above `render` are pure and touch no `document`, so
 * `node --test` can import them.
 */

/** Pan/zoom state: screen = world * k + (x, y); world units are SVG user units.
 * @typedef {{x: number, y: number, k: number}} View */
/** @typedef {{x: number, y: number, width: number, height: number}} Box */
/** @typedef {{x: number, y: number}} Point */
/** @typedef {{kind: "node" | "cluster" | "collapsed" | "stub", name: string}} ElementRecord */
/** @typedef {Record<string, ElementRecord>} Elements */
/** @typedef {{op?: string, target?: string, module_path?: string, shape?: string, time?: string,
 *   inputs?: string[], users?: string[]}} NodeRecord */
/** @typedef {Record<string, NodeRecord>} Nodes */
/** @typedef {{nodeIds: Map<string, string>, modules: Array<[string, string]>}} ElementIndex */
/** @typedef {{selected?: string, collapsed?: string[]}} Changes */
/** @typedef {{title: string, rows: Array<[string, string]>, hint: string}} Tooltip */

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
 * zoom, else legible and starting at the top (the inputs), centred across; the
 * rest is reached by panning. Never smaller than legible.
 * @param {Box} box @param {number} width @param {number} height
 * @param {number} [readable] the legible zoom (see readableScale)
 * @returns {View | null}
 */
export function initialView(box, width, height, readable = readableScale(11)) {
  const whole = fitBox(box, width, height);
  if (!whole || whole.k >= readable) return whole;
  const k = Math.min(readable, NATURAL_SCALE);
  const x = box.width * k <= width ? (width - box.width * k) / 2 - box.x * k : 16 - box.x * k;
  return { k, x, y: 16 - box.y * k };
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

/**
 * FX node names (in graph order) whose name, target or module path contains
 * `query`, case-insensitively. An empty query matches nothing.
 * @param {Nodes} nodes @param {string} query
 * @returns {string[]}
 */
export function searchNodes(nodes, query) {
  const q = query.trim().toLowerCase();
  if (!q) return [];
  return Object.keys(nodes).filter((name) => {
    const r = nodes[name] || {};
    return [name, r.target, r.module_path].some(
      (s) => typeof s === "string" && s.toLowerCase().includes(q));
  });
}

/**
 * The next position when cycling through `n` matches; -1 means "none yet".
 * @param {number} cursor @param {number} n @param {1 | -1} step
 */
export function nextIndex(cursor, n, step) {
  if (n === 0) return -1;
  if (cursor < 0) return step > 0 ? 0 : n - 1;
  return (cursor + step + n) % n;
}

/** @param {number} n @param {number} cursor @param {string} query */
export function countText(n, cursor, query) {
  if (!query.trim()) return "";
  if (n === 0) return "no match";
  if (cursor >= 0) return `${cursor + 1} / ${n}`;
  return n === 1 ? "1 match" : `${n} matches`;
}

/**
 * Lookup tables for `locate`: FX node name -> SVG id, and the collapsed modules
 * (path, id), longest path first so the innermost collapsed module wins.
 * @param {Elements} elements
 * @returns {ElementIndex}
 */
export function indexElements(elements) {
  const nodeIds = new Map();
  /** @type {Array<[string, string]>} */
  const modules = [];
  for (const [id, rec] of Object.entries(elements || {})) {
    if (rec.kind === "node") nodeIds.set(rec.name, id);
    else if (rec.kind === "collapsed") modules.push([rec.name, id]);
  }
  modules.sort((a, b) => b[0].length - a[0].length);
  return { nodeIds, modules };
}

/**
 * The SVG id that stands for FX node `name`: its own node, or the summary node
 * of the collapsed module that hides it; null when it is not drawn.
 * @param {ElementIndex} index @param {Nodes} nodes @param {string} name
 * @returns {string | null}
 */
export function locate(index, nodes, name) {
  if (!name) return null;
  const own = index.nodeIds.get(name);
  if (own) return own;
  const path = nodes[name]?.module_path;
  if (typeof path !== "string") return null;
  for (const [module, id] of index.modules) {
    if (path === module || path.startsWith(module + ".")) return id;
  }
  return null;
}

/**
 * The id of the element that draws module `path` (collapsed or as a cluster).
 * @param {Elements} elements @param {string} path
 * @returns {string | null}
 */
export function moduleElementId(elements, path) {
  for (const [id, rec] of Object.entries(elements || {})) {
    if ((rec.kind === "collapsed" || rec.kind === "cluster") && rec.name === path) return id;
  }
  return null;
}

/**
 * The traitlet changes a click on SVG element `id` asks for (`null` id: the
 * background). A node or a stub selects (a stub its producer), a cluster label
 * collapses its module, a collapsed module expands; null when nothing changes.
 * @param {Elements} elements @param {string | null} id
 * @param {{selected: string, collapsed: string[]}} state
 * @returns {Changes | null}
 */
export function applyClick(elements, id, state) {
  if (id === null) return state.selected ? { selected: "" } : null;
  const rec = elements[id];
  if (!rec) return null;
  switch (rec.kind) {
    case "node":
    case "stub":
      return rec.name === state.selected ? null : { selected: rec.name };
    case "cluster":
      return state.collapsed.includes(rec.name) ? null : { collapsed: [...state.collapsed, rec.name] };
    case "collapsed":
      return { collapsed: state.collapsed.filter((p) => p !== rec.name) };
    default:
      return null;
  }
}

/**
 * The outermost modules drawn (as clusters or collapsed): collapsing them all
 * leaves one box per top-level module.
 * @param {Elements} elements
 * @returns {string[]}
 */
export function collapseAll(elements) {
  const paths = new Set(Object.values(elements || {})
    .filter((r) => r.kind === "cluster" || r.kind === "collapsed").map((r) => r.name));
  const hasAncestor = (/** @type {string} */ p) => {
    for (let i = p.lastIndexOf("."); i > 0; i = p.lastIndexOf(".", i - 1)) {
      if (paths.has(p.slice(0, i))) return true;
    }
    return false;
  };
  return [...paths].filter((p) => !hasAncestor(p)).sort();
}

/**
 * `collapsed` with each module opened one level: a collapsed module is replaced by
 * its direct submodules (from the nodes' module paths), which stay collapsed. Paths
 * that are not modules drawn as boxes are ignored by the renderer.
 * @param {string[]} collapsed @param {Nodes} nodes
 * @returns {string[]}
 */
export function expandOneLevel(collapsed, nodes) {
  const open = new Set(collapsed);
  /** @type {Set<string>} */
  const next = new Set();
  for (const rec of Object.values(nodes || {})) {
    const path = rec.module_path || "";
    for (const top of open) {
      if (!path.startsWith(top + ".")) continue;
      const seg = path.slice(top.length + 1).split(".")[0];
      next.add(`${top}.${seg}`);
    }
  }
  return [...next].sort();
}

/** @typedef {{from: string, names: string[], at: number}} Walk */

/**
 * Arrow-key walk through the graph from the selected node `name`: Up goes to its
 * first input, Down to its first user; Left/Right step through the other inputs
 * (or users) of the node the last Up/Down came from.
 * @param {Nodes} nodes @param {string} name @param {string} key
 * @param {Walk | null} walk the previous Up/Down move
 * @returns {{name: string, walk: Walk | null} | null} null when there is nowhere to go
 */
export function walkStep(nodes, name, key, walk) {
  const rec = nodes[name];
  if (!rec) return null;
  if (key === "ArrowUp" || key === "ArrowDown") {
    const names = ((key === "ArrowUp" ? rec.inputs : rec.users) || []).filter((n) => n in nodes);
    return names.length ? { name: names[0], walk: { from: name, names, at: 0 } } : null;
  }
  if ((key === "ArrowLeft" || key === "ArrowRight") && walk && walk.names[walk.at] === name) {
    if (walk.names.length < 2) return null;
    const at = (walk.at + (key === "ArrowRight" ? 1 : walk.names.length - 1)) % walk.names.length;
    return { name: walk.names[at], walk: { ...walk, at } };
  }
  return null;
}

/** @param {NodeRecord | undefined} rec @returns {Array<[string, string]>} */
function nodeRows(rec) {
  if (!rec) return [];
  /** @type {Array<[string, string | undefined]>} */
  const rows = [["op", rec.op], ["target", rec.target], ["shape", rec.shape],
    ["time", rec.time], ["module", rec.module_path]];
  return /** @type {Array<[string, string]>} */ (rows.filter(([, v]) => v));
}

/**
 * What the hover tooltip says about SVG element `id` (plain strings: the caller
 * puts them in with textContent).
 * @param {Elements} elements @param {Nodes} nodes @param {string} id
 * @returns {Tooltip | null}
 */
export function tooltipFor(elements, nodes, id) {
  const rec = elements[id];
  if (!rec) return null;
  switch (rec.kind) {
    case "node":
      return { title: rec.name, rows: nodeRows(nodes[rec.name]), hint: "" };
    case "stub":
      return { title: rec.name, rows: nodeRows(nodes[rec.name]),
        hint: "Input from a distant node: click to select it" };
    case "collapsed": {
      const inside = Object.values(nodes).filter((r) => r.module_path === rec.name
        || (r.module_path || "").startsWith(rec.name + ".")).length;
      return { title: rec.name, rows: [["nodes", String(inside)]],
        hint: "Collapsed module: click to expand" };
    }
    case "cluster":
      return { title: rec.name, rows: [], hint: "Module: click its label to collapse" };
    default:
      return null;
  }
}

/** @type {Record<string, string>} */
const MODE_LABELS = { op: "op kind", time: "time share", flops: "FLOPs", diff: "diff vs previous" };
/** The unit of a heat scale's numbers (the core's legend labels carry none). @type {Record<string, string>} */
const MODE_UNITS = { time: "% of the step's node time", flops: "floating-point operations per forward" };

/** @param {string} mode */
export function modeLabel(mode) {
  return MODE_LABELS[mode] ?? mode;
}

/** The legend's heading: the mode and its unit, e.g. "time share (% of ...)". @param {string} mode */
export function legendTitle(mode) {
  const unit = MODE_UNITS[mode];
  return unit ? `${modeLabel(mode)} (${unit})` : modeLabel(mode);
}

/**
 * A legend entry as shown: the core writes heat stops as "time 4.1"; the heading
 * already names the mode, so the number stands alone.
 * @param {string} mode @param {string} label
 */
export function legendText(mode, label) {
  const text = String(label);
  return text.startsWith(`${mode} `) ? text.slice(mode.length + 1) : text;
}

/** A legend colour as CSS, or transparent when it is not a hex colour. @param {unknown} color */
export function safeColor(color) {
  return typeof color === "string" && /^#[0-9a-f]{3,8}$/i.test(color) ? color : "transparent";
}

const SVG_NS = "http://www.w3.org/2000/svg";
/** Everything Graphviz emits; anything else (script, foreignObject, style, use,
 * image, animate/set, non-SVG namespaces) is dropped. */
const SVG_ALLOWED = new Set(["svg", "g", "title", "desc", "polygon", "polyline", "ellipse",
  "circle", "path", "text", "tspan", "a", "defs", "linearGradient", "radialGradient", "stop",
  "rect", "line"]);

/**
 * Defensive cleaning of a parsed SVG before it enters the page. The core already
 * escapes user text; this is insurance against a bug there: it removes elements
 * Graphviz never writes, event-handler attributes and non-fragment links.
 * @param {Element} root the <svg> element
 * @returns {number} how many elements and attributes were removed
 */
export function sanitizeSvg(root) {
  let removed = 0;
  for (const e of [root, ...root.querySelectorAll("*")]) {
    if (e !== root && (e.namespaceURI !== SVG_NS || !SVG_ALLOWED.has(e.localName))) {
      e.remove();
      removed += 1;
      continue;
    }
    for (const a of [...e.attributes]) {
      const isLink = a.localName === "href" && !a.value.trim().startsWith("#");
      if (isLink || /^on/i.test(a.localName)) {
        e.removeAttributeNode(a);
        removed += 1;
      }
    }
  }
  return removed;
}

/** @typedef {{
 *   get(key: string): any, set(key: string, value: any): void, save_changes(): void,
 *   on(event: string, cb: () => void): void, off(event: string, cb: () => void): void,
 * }} Model */

/**
 * @param {{model: Model, el: HTMLElement}} ctx
 * @returns {() => void} cleanup: removes every listener and empties `el`
 */
function render({ model, el }) {
  const doc = el.ownerDocument;
  const listeners = new AbortController();
  // Not passive: the wheel and Enter handlers must be able to preventDefault.
  const on = (/** @type {EventTarget} */ target, /** @type {string} */ type,
    /** @type {(e: any) => void} */ fn) =>
    target.addEventListener(type, fn, { signal: listeners.signal, passive: false });
  /** @type {Array<[string, () => void]>} */
  const modelListeners = [];
  const onModel = (/** @type {string} */ key, /** @type {() => void} */ fn) => {
    model.on(`change:${key}`, fn);
    modelListeners.push([`change:${key}`, fn]);
  };
  /** @template {keyof HTMLElementTagNameMap} T @param {T} tag @param {string} cls
   * @param {string} [text] @returns {HTMLElementTagNameMap[T]} */
  const h = (tag, cls, text) => {
    const e = doc.createElement(tag);
    e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };

  // --- DOM -------------------------------------------------------------
  const root = h("div", "fxviz-gv");
  const toolbar = h("div", "fxviz-gv-toolbar");
  const search = h("input", "fxviz-gv-search");
  search.type = "text"; // not "search": its native clear button ignores the Lab theme
  search.placeholder = "Find node, target, module";
  search.title = "Enter: next match · Shift+Enter: previous · Esc: clear";
  search.setAttribute("aria-label", "Find nodes by name, target or module path");
  const count = h("span", "fxviz-gv-count");
  const modeBox = h("label", "fxviz-gv-mode", "Colour");
  const modeSelect = h("select", "fxviz-gv-select");
  modeBox.append(modeSelect);
  const buttons = h("span", "fxviz-gv-buttons");
  /** @type {Record<string, HTMLButtonElement>} */
  const button = {};
  for (const [action, label, title] of [
    ["fit", "Fit", "Show the whole graph if it is legible, else its top (the inputs) at a legible size"],
    ["in", "+", "Zoom in (Ctrl/\u2318 + wheel, or the wheel once the graph has focus)"],
    ["out", "\u2212", "Zoom out"],
    ["selection", "Selected", "Zoom to the selected node"],
    ["collapse-all", "Collapse all", "Draw every top-level module as one box"],
    ["expand-level", "Expand a level", "Open each collapsed module one level"],
    ["expand-all", "Expand all", "Open every module"]]) {
    const b = h("button", "fxviz-gv-btn", label);
    b.type = "button";
    b.title = title;
    b.dataset.action = action;
    button[action] = b;
    buttons.append(b);
  }
  const status = h("span", "fxviz-gv-status");
  toolbar.append(search, count, modeBox, buttons, status);

  const viewport = h("div", "fxviz-gv-viewport");
  // Focusable: with focus the wheel zooms and the arrow keys walk the graph.
  viewport.tabIndex = 0;
  viewport.setAttribute("aria-label",
    "Graph: drag to pan, Ctrl/\u2318 + wheel to zoom, arrow keys walk inputs and users");
  const canvas = h("div", "fxviz-gv-canvas");
  const message = h("div", "fxviz-gv-message");
  const hint = h("div", "fxviz-gv-hint", "Ctrl/\u2318 + scroll to zoom, or click the graph first");
  hint.hidden = true;
  // The legend sits below the drawing, never over its nodes.
  const legend = h("div", "fxviz-gv-legend");
  const tip = h("div", "fxviz-gv-tip");
  tip.hidden = true;
  viewport.append(canvas, message, hint, tip);
  root.append(toolbar, viewport, legend);
  el.replaceChildren(root);

  // --- state -----------------------------------------------------------
  /** @type {View} */
  let view = { x: 0, y: 0, k: 1 };
  /** Ids are looked up per widget, not with document.getElementById: the same
   * graph may be shown twice on one page. @type {Map<string, Element>} */
  let byId = new Map();
  let index = indexElements(model.get("elements"));
  /** @type {{width: number, height: number} | null} */
  let svgSize = null;
  let needsFit = false;
  /** @type {string[]} */
  let matches = [];
  let cursor = -1;
  /** Set by a collapse/expand click: keep that module still on the next re-render.
   * @type {{path: string, screen: Point} | null} */
  let pendingAnchor = null;
  /** @type {{x: number, y: number, view: View, id: number} | null} */
  let press = null;
  let dragging = false;
  let suppressClick = false;
  let hoverId = "";
  /** Legible zoom for the drawing on screen (from its label font size). */
  let readable = readableScale(11);
  /** The last Up/Down arrow move, for Left/Right. @type {Walk | null} */
  let walk = null;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let hintTimer;

  const nodes = () => /** @type {Nodes} */ (model.get("nodes") || {});
  const elements = () => /** @type {Elements} */ (model.get("elements") || {});
  const width = () => viewport.clientWidth;
  const height = () => viewport.clientHeight;

  /** @param {View} v */
  function setView(v) {
    view = v;
    canvas.style.transform = `translate(${v.x}px, ${v.y}px) scale(${v.k})`;
  }

  /** World box of a drawn element (measured, so Graphviz's own transforms don't matter).
   * @param {Element} e @returns {Box} */
  function boxOf(e) {
    const r = e.getBoundingClientRect();
    const c = canvas.getBoundingClientRect();
    return { x: (r.left - c.left) / view.k, y: (r.top - c.top) / view.k,
      width: r.width / view.k, height: r.height / view.k };
  }

  /** @param {Element} e @returns {Point} */
  function screenCenter(e) {
    const p = center(boxOf(e));
    return { x: p.x * view.k + view.x, y: p.y * view.k + view.y };
  }

  const graphBox = () => /** @type {Box} */ ({ x: 0, y: 0, ...(svgSize || { width: 0, height: 0 }) });

  function fit() {
    const v = svgSize && initialView(graphBox(), width(), height(), readable);
    needsFit = !v;
    if (v) setView(v);
  }

  /** Zoom keeping screen point (px, py) still, no further out than the whole graph.
   * @param {number} factor @param {number} px @param {number} py */
  function zoomBy(factor, px, py) {
    setView(zoomAt(view, factor, px, py, minScale(graphBox(), width(), height(), readable)));
  }

  /** @param {number} factor */
  function zoomCentered(factor) {
    zoomBy(factor, width() / 2, height() / 2);
  }

  function selectedElement() {
    const id = locate(index, nodes(), model.get("selected"));
    return (id && byId.get(id)) || null;
  }

  function zoomToSelection() {
    const e = selectedElement();
    const v = e && fitBox(grow(boxOf(e), 60), width(), height(), 16, 2);
    if (v) setView(v);
  }

  /** @param {Record<string, unknown>} changes */
  function send(changes) {
    for (const [key, value] of Object.entries(changes)) model.set(key, value);
    model.save_changes();
  }

  // --- SVG -------------------------------------------------------------
  /** @param {string} text */
  function showSvg(text) {
    canvas.replaceChildren();
    byId = new Map();
    svgSize = null;
    message.hidden = false;
    if (!text) {
      message.textContent = "No graph to show.";
      return;
    }
    const parsed = new DOMParser().parseFromString(text, "image/svg+xml");
    const parsedRoot = parsed.documentElement;
    if (parsedRoot.namespaceURI !== SVG_NS || parsedRoot.localName !== "svg"
        || parsed.getElementsByTagName("parsererror").length) {
      message.textContent = "The graph could not be displayed (invalid SVG).";
      return;
    }
    sanitizeSvg(parsedRoot);
    // Our tooltip replaces the browser's native one from <title>: drop them to avoid both.
    for (const t of parsedRoot.querySelectorAll("title")) t.remove();
    const svg = /** @type {SVGSVGElement} */ (doc.importNode(parsedRoot, true));
    const vb = svg.viewBox.baseVal;
    const w = vb && vb.width > 0 ? vb.width : parseFloat(svg.getAttribute("width") || "0");
    const hgt = vb && vb.height > 0 ? vb.height : parseFloat(svg.getAttribute("height") || "0");
    // One SVG unit = one CSS pixel at k = 1, so world and screen maths agree.
    svg.setAttribute("width", String(w));
    svg.setAttribute("height", String(hgt));
    canvas.append(svg);
    for (const g of svg.querySelectorAll("g[id]")) byId.set(g.id, g);
    svgSize = { width: w, height: hgt };
    const label = svg.querySelector("g.node text[font-size]");
    readable = readableScale(parseFloat(label?.getAttribute("font-size") || "11"));
    message.hidden = true;
  }

  /** What should stay still on screen across a re-render (a new step, undo, a new
   * colouring): a module just (un)collapsed, else the selected node, else the node
   * nearest the centre of the view (or the next nearest that survives). */
  function takeAnchor() {
    if (pendingAnchor) {
      const { path, screen } = pendingAnchor;
      pendingAnchor = null;
      return [{ screen, find: () => moduleElementId(elements(), path) }];
    }
    const selected = model.get("selected");
    const old = selectedElement();
    if (old) return [{ screen: screenCenter(old), find: () => locate(index, nodes(), selected) }];
    /** @type {Array<[string, Point]>} */
    const drawn = [];
    for (const [id, e] of byId) {
      if (id.startsWith("fx-") || id.startsWith("fxco-")) drawn.push([id, screenCenter(e)]);
    }
    const screens = new Map(drawn);
    return byDistance(drawn, { x: width() / 2, y: height() / 2 }).slice(0, 50)
      .map((id) => ({ screen: /** @type {Point} */ (screens.get(id)), find: () => id }));
  }

  function onSvg() {
    const anchors = width() > 0 && svgSize ? takeAnchor() : [];
    const first = !svgSize;
    hideTip();
    showSvg(model.get("svg"));
    refreshMarks();
    if (!svgSize) return;
    if (first || needsFit) return fit();
    for (const anchor of anchors) {
      const id = anchor.find();
      const e = id && byId.get(id);
      if (!e) continue;
      setView(anchorView(view, anchor.screen, center(boxOf(e))));
      break;
    }
    // The same zoom always; the selection on screen if there is one; never a blank pane.
    const selected = selectedElement();
    if (selected) setView(ensureVisible(view, boxOf(selected), width(), height()));
    setView(keepInView(view, graphBox(), width(), height()));
  }

  // --- selection and search marks -----------------------------------------
  function applySelection() {
    for (const e of canvas.querySelectorAll(".fxviz-selected")) e.classList.remove("fxviz-selected");
    const e = selectedElement();
    if (e) e.classList.add("fxviz-selected");
    button.selection.disabled = !e;
    return e;
  }

  function applyMatches() {
    for (const e of canvas.querySelectorAll(".fxviz-match")) e.classList.remove("fxviz-match");
    const query = search.value;
    root.classList.toggle("fxviz-gv-searching", query.trim() !== "");
    for (const name of matches) {
      const id = locate(index, nodes(), name);
      const e = id && byId.get(id);
      if (e) e.classList.add("fxviz-match");
    }
    count.textContent = countText(matches.length, cursor, query);
  }

  function runSearch() {
    matches = searchNodes(nodes(), search.value);
    cursor = -1;
    applyMatches();
  }

  function refreshMarks() {
    index = indexElements(elements());
    applySelection();
    runSearch();
  }

  /** @param {boolean} [legible] also zoom in to a legible size (search, arrow keys) */
  function onSelected(legible = false) {
    const e = applySelection();
    if (!e || width() <= 0) return;
    const box = boxOf(e);
    setView(legible ? revealView(view, box, width(), height(), readable)
      : ensureVisible(view, box, width(), height()));
  }

  /** Select `name` from the front-end and show it legibly. @param {string} name */
  function selectAndReveal(name) {
    if (name !== model.get("selected")) send({ selected: name });
    onSelected(true);
  }

  // --- toolbar, legend, status -------------------------------------------
  function renderModes() {
    const modes = /** @type {string[]} */ (model.get("color_modes") || []);
    modeSelect.replaceChildren(...modes.map((m) => {
      const o = h("option", "", modeLabel(m));
      o.value = m;
      return o;
    }));
    modeSelect.value = model.get("color_mode");
    modeBox.hidden = modes.length < 2;
  }

  function renderLegend() {
    const items = /** @type {Array<{label: string, color: string}>} */ (model.get("legend") || []);
    const mode = model.get("legend_mode") || model.get("color_mode");
    legend.replaceChildren(h("span", "fxviz-gv-legend-title", legendTitle(mode)),
      ...items.map(({ label, color }) => {
        const item = h("span", "fxviz-gv-legend-item");
        const swatch = h("span", "fxviz-gv-swatch");
        swatch.style.backgroundColor = safeColor(color);
        item.append(swatch, h("span", "fxviz-gv-legend-label", legendText(mode, label)));
        return item;
      }));
    legend.hidden = items.length === 0;
  }

  function renderStatus() {
    status.textContent = model.get("status") || "";
  }

  // --- tooltip -----------------------------------------------------------
  /** The id of the node, or of the cluster whose label, under event target `t`.
   * @param {EventTarget | null} t */
  function hitId(t) {
    if (!(t instanceof Element) || !canvas.contains(t)) return null;
    const node = t.closest("g.node");
    if (node) return node.id;
    const label = t.closest("text");
    const parent = label && label.parentElement;
    return parent && parent.matches("g.cluster") ? parent.id : null;
  }

  function hideTip() {
    tip.hidden = true;
    hoverId = "";
  }

  /** @param {string} id @param {number} px @param {number} py */
  function showTip(id, px, py) {
    if (id !== hoverId) {
      const t = tooltipFor(elements(), nodes(), id);
      if (!t) return hideTip();
      hoverId = id;
      const rows = t.rows.flatMap(([k, v]) => [h("span", "fxviz-gv-tip-key", k),
        h("span", "fxviz-gv-tip-value", v)]);
      const grid = h("div", "fxviz-gv-tip-rows");
      grid.append(...rows);
      tip.replaceChildren(h("div", "fxviz-gv-tip-title", t.title), grid);
      if (t.hint) tip.append(h("div", "fxviz-gv-tip-hint", t.hint));
      tip.hidden = false;
    }
    const x = Math.min(px + 14, width() - tip.offsetWidth - 4);
    const y = py + 18 + tip.offsetHeight > height() ? py - tip.offsetHeight - 10 : py + 18;
    tip.style.left = `${Math.max(4, x)}px`;
    tip.style.top = `${Math.max(4, y)}px`;
  }

  // --- pointer and keyboard ------------------------------------------------
  /** @param {MouseEvent} e @returns {Point} */
  const local = (e) => {
    const r = viewport.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  };

  on(viewport, "wheel", (/** @type {WheelEvent} */ e) => {
    if (wheelAction(e, doc.activeElement === viewport) === "page") {
      // Left to the page (the notebook scrolls); say once how to zoom instead.
      hint.hidden = false;
      clearTimeout(hintTimer);
      hintTimer = setTimeout(() => { hint.hidden = true; }, 1500);
      return;
    }
    e.preventDefault();
    hideTip();
    hint.hidden = true;
    const p = local(e);
    zoomBy(wheelFactor(e.deltaY, e.deltaMode), p.x, p.y);
  });

  const release = (/** @type {PointerEvent} */ e) => {
    if (!press || press.id !== e.pointerId) return;
    if (dragging) {
      suppressClick = true;
      root.classList.remove("fxviz-gv-dragging");
    }
    press = null;
    dragging = false;
  };
  on(viewport, "pointerdown", (/** @type {PointerEvent} */ e) => {
    suppressClick = false;
    if (e.button !== 0) return;
    viewport.focus({ preventScroll: true });
    const p = local(e);
    press = { ...p, view, id: e.pointerId };
  });

  on(viewport, "pointermove", (/** @type {PointerEvent} */ e) => {
    const p = local(e);
    // A press released outside the widget never sent us its pointerup.
    if (press && !(e.buttons & 1)) release(e);
    if (press && press.id === e.pointerId) {
      const dx = p.x - press.x;
      const dy = p.y - press.y;
      if (!dragging && Math.hypot(dx, dy) > DRAG_THRESHOLD) {
        dragging = true;
        viewport.setPointerCapture(e.pointerId);
        root.classList.add("fxviz-gv-dragging");
        hideTip();
      }
      if (dragging) {
        setView({ k: press.view.k, x: press.view.x + dx, y: press.view.y + dy });
        return;
      }
    }
    const id = hitId(e.target);
    if (id) showTip(id, p.x, p.y);
    else hideTip();
  });

  on(viewport, "pointerup", release);
  on(viewport, "pointercancel", release);
  on(viewport, "pointerleave", hideTip);

  on(viewport, "click", (/** @type {MouseEvent} */ e) => {
    if (suppressClick) {
      suppressClick = false;
      return;
    }
    const id = hitId(e.target);
    const changes = applyClick(elements(), id, {
      selected: model.get("selected") || "", collapsed: model.get("collapsed") || [] });
    if (!changes) return;
    const target = id && byId.get(id);
    if (changes.collapsed && id && target) {
      pendingAnchor = { path: elements()[id].name, screen: screenCenter(target) };
    }
    send(changes);
  });

  on(toolbar, "click", (/** @type {MouseEvent} */ e) => {
    const b = e.target instanceof Element ? e.target.closest("button") : null;
    const action = b && b.dataset.action;
    if (action === "fit") fit();
    else if (action === "in") zoomCentered(1.25);
    else if (action === "out") zoomCentered(0.8);
    else if (action === "selection") zoomToSelection();
    else if (action === "collapse-all") send({ collapsed: collapseAll(elements()) });
    else if (action === "expand-level") send({ collapsed: expandOneLevel(model.get("collapsed") || [], nodes()) });
    else if (action === "expand-all") send({ collapsed: [] });
  });

  on(viewport, "keydown", (/** @type {KeyboardEvent} */ e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "Escape" && model.get("selected")) {
      send({ selected: "" });
      return;
    }
    const step = walkStep(nodes(), model.get("selected") || "", e.key, walk);
    if (!e.key.startsWith("Arrow")) return;
    e.preventDefault(); // arrows move through the graph, not the page
    if (!step) return;
    walk = step.walk;
    selectAndReveal(step.name);
  });

  // Undo/redo anywhere in the workbench that holds this view (the Explorer), but
  // not in a text field, where Ctrl+Z undoes typing.
  const onUndoKey = (/** @type {KeyboardEvent} */ e) => {
    const t = e.target;
    if (!(e.ctrlKey || e.metaKey) || e.altKey || e.key.toLowerCase() !== "z") return;
    if (t instanceof Element && t.closest("input, textarea, select, [contenteditable]")) return;
    e.preventDefault();
    e.stopPropagation(); // JupyterLab would undo a cell operation
    model.send({ action: e.shiftKey ? "redo" : "undo" });
  };

  on(search, "input", runSearch);
  on(search, "keydown", (/** @type {KeyboardEvent} */ e) => {
    if (e.key === "Escape") {
      search.value = "";
      runSearch();
    } else if (e.key === "Enter" && matches.length) {
      e.preventDefault();
      cursor = nextIndex(cursor, matches.length, e.shiftKey ? -1 : 1);
      selectAndReveal(matches[cursor]);
      applyMatches();
    }
  });

  on(modeSelect, "change", () => send({ color_mode: modeSelect.value }));

  // The widget may be rendered before it is attached: fit once it has a size.
  const resize = new ResizeObserver(() => {
    attachKeys();
    if (needsFit && width() > 0) fit();
  });
  resize.observe(viewport);
  // The Explorer puts this view in its tree after rendering it: listen once attached.
  let keyTarget = /** @type {Element | null} */ (null);
  const attachKeys = () => {
    const target = el.closest(".fxviz-explorer") || root;
    if (target === keyTarget) return;
    keyTarget?.removeEventListener("keydown", /** @type {any} */ (onUndoKey));
    keyTarget = target;
    // Focusable, so a click anywhere in the workbench gives it the keys.
    if (target !== root && !target.hasAttribute("tabindex")) target.setAttribute("tabindex", "-1");
    target.addEventListener("keydown", /** @type {any} */ (onUndoKey), { signal: listeners.signal });
  };
  attachKeys();
  on(root, "focusin", attachKeys);
  on(root, "pointerdown", attachKeys);

  // --- model ---------------------------------------------------------------
  onModel("svg", onSvg);
  onModel("elements", refreshMarks);
  onModel("nodes", refreshMarks);
  onModel("selected", onSelected);
  onModel("color_modes", renderModes);
  onModel("color_mode", () => {
    modeSelect.value = model.get("color_mode");
    renderLegend();
  });
  onModel("legend", renderLegend);
  onModel("legend_mode", renderLegend);
  onModel("status", renderStatus);

  renderModes();
  renderLegend();
  renderStatus();
  onSvg();

  return () => {
    listeners.abort();
    clearTimeout(hintTimer);
    for (const [event, fn] of modelListeners) model.off(event, fn);
    resize.disconnect();
    el.replaceChildren();
  };
}

export default { render };

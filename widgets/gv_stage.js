// @ts-check
/**
 * Graph view, the stage: the drawing on screen and the pan/zoom over it. Shows a new
 * SVG keeping still what the user looked at (a module just (un)collapsed, the selected
 * node, else the node nearest the centre), fits, zooms, finds drawn elements by FX
 * node name. The maths is gv_view.js's; this module owns the state.
 */
import {
  anchorView, byDistance, center, ensureVisible, fitBox, grow, initialView, keepInView, minScale,
  readableScale, revealView, topRow, zoomAt,
} from "./gv_view.js";
import { indexElements, locate, moduleElementId } from "./gv_graph.js";
import { importSvg } from "./gv_svg.js";

/** @typedef {import("./gv_view.js").View} View */
/** @typedef {import("./gv_view.js").Box} Box */
/** @typedef {import("./gv_view.js").Point} Point */
/** @typedef {import("./gv_graph.js").Elements} Elements */
/** @typedef {import("./gv_graph.js").Nodes} Nodes */
/** @typedef {{screen: Point, find: () => string | null | undefined}} Anchor */

/** The nodes nearest the centre tried as anchors, nearest first. */
const ANCHOR_TRIES = 50;

/**
 * The world box of a drawn element from its and the canvas's client rectangles
 * (measured, so Graphviz's own transforms don't matter).
 * @param {{left: number, top: number, width: number, height: number}} r
 * @param {{left: number, top: number}} c @param {number} k
 * @returns {Box}
 */
export function worldBox(r, c, k) {
  return { x: (r.left - c.left) / k, y: (r.top - c.top) / k, width: r.width / k, height: r.height / k };
}

/** Whether a drawn id stands for something that can anchor the view (a node or a
 * collapsed module; not a cluster, whose box changes with what is inside).
 * @param {string} id */
export function anchorsView(id) {
  return id.startsWith("fx-") || id.startsWith("fxco-");
}

/**
 * The user's inputs in graph order: placeholders, less the parameters torch.export or
 * dynamo lifted to inputs (their target is the qualified name, not the node's); every
 * placeholder when that leaves none.
 * @param {Nodes} nodes
 * @returns {string[]}
 */
export function inputNames(nodes) {
  const all = Object.keys(nodes).filter((name) => nodes[name].op === "placeholder");
  const own = all.filter((name) => {
    const target = String(nodes[name].target ?? name);
    return target.toLowerCase() === name.toLowerCase() || target.replace(/^\*+/, "") === name;
  });
  return own.length ? own : all;
}

/**
 * @param {{doc: Document, viewport: HTMLElement, canvas: HTMLElement, message: HTMLElement,
 *   nodes: () => Nodes, elements: () => Elements, selected: () => string,
 *   onView: (view: View, graph: Box) => void, onDraw: (svg: SVGSVGElement | null) => void}} parts
 *   onView: after every pan or zoom; onDraw: a new drawing (null: none)
 */
export function createStage({ doc, viewport, canvas, message, nodes, elements, selected, onView, onDraw }) {
  /** @type {View} */
  let view = { x: 0, y: 0, k: 1 };
  /** Ids are looked up per widget, not with document.getElementById: the same
   * graph may be shown twice on one page. @type {Map<string, Element>} */
  let byId = new Map();
  let index = indexElements(elements());
  /** @type {{width: number, height: number} | null} */
  let svgSize = null;
  let needsFit = false;
  /** The view the last fit set, while the user has not moved it. @type {View | null} */
  let fitted = null;
  /** Legible zoom for the drawing on screen (from its label font size). */
  let readable = readableScale(11);
  /** Set by a collapse/expand click: keep that module still on the next re-render.
   * @type {{path: string, screen: Point} | null} */
  let pendingAnchor = null;
  /** A node selected from the front-end (a search hit) that a collapsed box hides:
   * once the kernel's new drawing shows it, it is zoomed to legibly too. */
  let pendingReveal = "";

  const width = () => viewport.clientWidth;
  const height = () => viewport.clientHeight;
  const graphBox = () => /** @type {Box} */ ({ x: 0, y: 0, ...(svgSize || { width: 0, height: 0 }) });

  /** @param {View} v */
  function setView(v) {
    view = v;
    canvas.style.transform = `translate(${v.x}px, ${v.y}px) scale(${v.k})`;
    onView(v, graphBox());
  }

  /** @param {Element} e @returns {Box} */
  const boxOf = (e) => worldBox(e.getBoundingClientRect(), canvas.getBoundingClientRect(), view.k);

  /** @param {Element} e @returns {Point} */
  function screenCenter(e) {
    const p = center(boxOf(e));
    return { x: p.x * view.k + view.x, y: p.y * view.k + view.y };
  }

  /** Where the drawing starts: the drawn boxes of the inputs (or the collapsed boxes
   * hiding them), else (no node records yet) the top row of drawn boxes. */
  function startBoxes() {
    const found = new Set(inputNames(nodes()).map(elementFor).filter((e) => e !== null));
    if (found.size) return [...found].map(boxOf);
    return topRow([...byId].filter(([id]) => anchorsView(id)).map(([, e]) => boxOf(e)));
  }

  function fit() {
    const v = svgSize && width() > 0 ? initialView(graphBox(), width(), height(), readable, startBoxes()) : null;
    needsFit = !v;
    if (v) setView(v);
    fitted = v;
  }

  /** Zoom keeping screen point (px, py) still, no further out than the whole graph.
   * @param {number} factor @param {number} px @param {number} py */
  function zoomBy(factor, px, py) {
    setView(zoomAt(view, factor, px, py, minScale(graphBox(), width(), height(), readable)));
  }

  /** The drawn element of FX node `name` (or of the collapsed box hiding it). @param {string} name */
  function elementFor(name) {
    const id = locate(index, nodes(), name);
    return (id && byId.get(id)) || null;
  }

  function zoomToSelection() {
    const e = elementFor(selected());
    const v = e && fitBox(grow(boxOf(e), 60), width(), height(), 16, 2);
    if (v) setView(v);
  }

  /** Bring `e` into view at a legible size. @param {Element} e */
  function reveal(e) {
    if (pendingReveal === selected()) pendingReveal = "";
    if (width() > 0) setView(revealView(view, boxOf(e), width(), height(), readable));
  }

  /** Reveal node `name` legibly once a drawing shows it, unless it is drawn now. @param {string} name */
  function revealWhenDrawn(name) {
    pendingReveal = elementFor(name) ? "" : name;
  }

  /** Keep module `path` (element `e`, just clicked) still on the next drawing.
   * @param {string} path @param {Element} e */
  function anchorModule(path, e) {
    pendingAnchor = { path, screen: screenCenter(e) };
  }

  /** @param {string} text */
  function showSvg(text) {
    canvas.replaceChildren();
    onDraw(null);
    byId = new Map();
    svgSize = null;
    message.hidden = false;
    if (!text) {
      message.textContent = "No graph to show.";
      return;
    }
    const svg = importSvg(doc, text);
    if (!svg) {
      message.textContent = "The graph could not be displayed (invalid SVG).";
      return;
    }
    canvas.append(svg);
    onDraw(svg);
    for (const g of svg.querySelectorAll("g[id]")) byId.set(g.id, g);
    svgSize = { width: svg.width.baseVal.value, height: svg.height.baseVal.value };
    const label = svg.querySelector("g.node text[font-size]");
    readable = readableScale(parseFloat(label?.getAttribute("font-size") || "11"));
    message.hidden = true;
  }

  /** What should stay still on screen across a re-render, best first. @returns {Anchor[]} */
  function takeAnchors() {
    if (pendingAnchor) {
      const { path, screen } = pendingAnchor;
      pendingAnchor = null;
      return [{ screen, find: () => moduleElementId(elements(), path) }];
    }
    const name = selected();
    const old = elementFor(name);
    if (old) return [{ screen: screenCenter(old), find: () => locate(index, nodes(), name) }];
    /** @type {Array<[string, Point]>} */
    const drawn = [];
    for (const [id, e] of byId) if (anchorsView(id)) drawn.push([id, screenCenter(e)]);
    const screens = new Map(drawn);
    return byDistance(drawn, { x: width() / 2, y: height() / 2 }).slice(0, ANCHOR_TRIES)
      .map((id) => ({ screen: /** @type {Point} */ (screens.get(id)), find: () => id }));
  }

  /** Show drawing `text`; `marked()` re-applies the selection and search marks to it. The
   * same zoom always; the selection on screen if there is one; never a blank pane.
   * @param {string} text @param {() => void} marked */
  function draw(text, marked) {
    const anchors = width() > 0 && svgSize ? takeAnchors() : [];
    const first = !svgSize;
    showSvg(text);
    marked();
    if (!svgSize) return;
    if (first || needsFit) return fit();
    for (const anchor of anchors) {
      const id = anchor.find();
      const e = id && byId.get(id);
      if (!e) continue;
      setView(anchorView(view, anchor.screen, center(boxOf(e))));
      break;
    }
    const e = elementFor(selected());
    if (e && pendingReveal && pendingReveal === selected()) reveal(e);
    else if (e) setView(ensureVisible(view, boxOf(e), width(), height()));
    setView(keepInView(view, graphBox(), width(), height()));
  }

  return {
    width, height, setView, fit, zoomBy, zoomToSelection, elementFor, reveal, revealWhenDrawn, anchorModule, draw,
    view: () => view,
    byId: (/** @type {string} */ id) => byId.get(id),
    reindex: () => { index = indexElements(elements()); },
    /** The widget may be rendered before it has a size: fit once it has one; a new
     * size redraws the overview's frame. */
    resized: () => {
      if (needsFit && width() > 0) fit();
      else onView(view, graphBox());
    },
    /** Node records that came after the first drawing say where the inputs are: fit
     * again unless the user has moved the view since. */
    refitIfUntouched: () => { if (fitted && view === fitted) fit(); },
  };
}

// @ts-check
/**
 * fxviz graph view: the Graphviz SVG of one step with pan/zoom, selection, search,
 * collapsible module clusters, colour modes and a legend.
 *
 * An anywidget front-end. All state lives in the model's traitlets (see
 * docs/CONTRACTS.md). The pure helpers live in gv_*.js, plain ES modules that a
 * browser page imports as they are; anywidget needs one module, so graph_view.py
 * joins them with this file (local imports dropped) into `GraphView._esm`.
 */
import {
  DRAG_THRESHOLD, anchorView, byDistance, center, ensureVisible, fitBox, grow, initialView, keepInView,
  minScale, readableScale, revealView, wheelAction, wheelFactor, zoomAt,
} from "./gv_view.js";
import {
  applyClick, collapseAll, countText, expandOneLevel, indexElements, locate, moduleElementId, nextIndex,
  searchNodes, walkStep,
} from "./gv_graph.js";
import { legendText, legendTitle, modeLabel, safeColor, tooltipFor } from "./gv_labels.js";
import { importSvg } from "./gv_svg.js";
import { buildDom, elementMaker } from "./gv_dom.js";
import { createTooltip } from "./gv_tooltip.js";

export * from "./gv_view.js";
export * from "./gv_graph.js";
export * from "./gv_labels.js";
export * from "./gv_svg.js";
export * from "./gv_dom.js";
export * from "./gv_tooltip.js";

/** @typedef {import("./gv_view.js").View} View */
/** @typedef {import("./gv_view.js").Box} Box */
/** @typedef {import("./gv_view.js").Point} Point */
/** @typedef {import("./gv_graph.js").Elements} Elements */
/** @typedef {import("./gv_graph.js").Nodes} Nodes */
/** @typedef {import("./gv_graph.js").NodeRecord} NodeRecord */
/** @typedef {import("./gv_graph.js").Walk} Walk */

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
  const h = elementMaker(doc);
  const { root, toolbar, search, count, modeBox, modeSelect, button, status, viewport, canvas, message, hint,
    legend, tip } = buildDom(h);
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
  /** A node selected from the front-end (a search hit) that a collapsed box hides:
   * once the kernel's new drawing shows it, it is zoomed to legibly too. */
  let pendingReveal = "";
  /** @type {{x: number, y: number, view: View, id: number} | null} */
  let press = null;
  let dragging = false;
  let suppressClick = false;
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
    const svg = importSvg(doc, text);
    if (!svg) {
      message.textContent = "The graph could not be displayed (invalid SVG).";
      return;
    }
    canvas.append(svg);
    for (const g of svg.querySelectorAll("g[id]")) byId.set(g.id, g);
    svgSize = { width: svg.width.baseVal.value, height: svg.height.baseVal.value };
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
    if (selected) showSelected(selected, false);
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
    showSelected(e, legible);
  }

  /** Pan to the selected element `e`; zoom in to legible when asked or when it is the
   * hidden node a search asked for. @param {Element} e @param {boolean} legible */
  function showSelected(e, legible) {
    const box = boxOf(e);
    if (pendingReveal && pendingReveal === model.get("selected")) {
      legible = true;
      pendingReveal = "";
    }
    setView(legible ? revealView(view, box, width(), height(), readable)
      : ensureVisible(view, box, width(), height()));
  }

  /** Select `name` from the front-end and show it legibly. @param {string} name */
  function selectAndReveal(name) {
    if (name !== model.get("selected")) send({ selected: name });
    pendingReveal = selectedElement() ? "" : name;
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
  const tooltip = createTooltip({ tip, canvas, h, width, height,
    describe: (/** @type {string} */ id) => tooltipFor(elements(), nodes(), id) });
  const hideTip = tooltip.hide;

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
    const id = tooltip.hitId(e.target);
    if (id) tooltip.show(id, p.x, p.y);
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
    const id = tooltip.hitId(e.target);
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

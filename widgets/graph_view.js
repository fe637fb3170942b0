// @ts-check
/**
 * fxviz graph view: the Graphviz SVG of one step with pan/zoom, selection, search,
 * collapsible module clusters, colour modes and a legend.
 *
 * An anywidget front-end. All state lives in the model's traitlets (see
 * docs/CONTRACTS.md). `render` only wires the parts together, one module per concern:
 * gv_stage.js (the drawing, pan and zoom), gv_minimap.js (the overview), gv_select.js (selection, arrow keys),
 * gv_search.js, gv_pointer.js (wheel, drag, hover, clicks), gv_toolbar.js (buttons,
 * colour modes, legend), gv_keys.js (undo/redo), gv_tooltip.js; the pure helpers are
 * in columns.js (records sent column-wise), gv_view.js, gv_graph.js, gv_labels.js,
 * gv_svg.js and gv_dom.js. They are plain ES modules that a browser page imports as
 * they are; anywidget needs one module, so graph_view.py joins them with this file
 * (local imports dropped) into `GraphView._esm`.
 */
import { addTimes, nodesOf } from "./gv_graph.js";
import { tooltipFor } from "./gv_labels.js";
import { buildDom, elementMaker } from "./gv_dom.js";
import { createTooltip } from "./gv_tooltip.js";
import { createStage } from "./gv_stage.js";
import { createMinimap } from "./gv_minimap.js";
import { createSelection } from "./gv_select.js";
import { createSearch } from "./gv_search.js";
import { attachPointer } from "./gv_pointer.js";
import { createToolbar } from "./gv_toolbar.js";
import { createUndoKeys } from "./gv_keys.js";

export * from "./columns.js";
export * from "./gv_view.js";
export * from "./gv_graph.js";
export * from "./gv_labels.js";
export * from "./gv_svg.js";
export * from "./gv_dom.js";
export * from "./gv_tooltip.js";
export * from "./gv_stage.js";
export * from "./gv_minimap.js";
export * from "./gv_select.js";
export * from "./gv_search.js";
export * from "./gv_pointer.js";
export * from "./gv_toolbar.js";
export * from "./gv_keys.js";

/** @typedef {import("./gv_graph.js").Elements} Elements */
/** @typedef {import("./gv_graph.js").Nodes} Nodes */

/** @typedef {{
 *   get(key: string): any, set(key: string, value: any): void, save_changes(): void,
 *   on(event: string, cb: () => void): void, off(event: string, cb: () => void): void,
 *   send(content: any): void,
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

  /** The decoded node records, decoded once per value the kernel sends; times (sent
   * apart, when measured) are written into them. */
  let sentNodes = /** @type {unknown} */ (undefined), sentTimes = sentNodes, decoded = /** @type {Nodes} */ ({});
  const nodes = () => {
    const value = model.get("nodes"), times = model.get("times");
    if (value !== sentNodes) [sentNodes, sentTimes, decoded] = [value, undefined, nodesOf(value)];
    if (times !== sentTimes) {
      sentTimes = times;
      addTimes(decoded, times);
    }
    return decoded;
  };
  const elements = () => /** @type {Elements} */ (model.get("elements") || {});
  const selected = () => /** @type {string} */ (model.get("selected"));
  const marked = () => /** @type {string[]} */ (model.get("marked") || []); // a report's model may lack it
  /** @param {Record<string, unknown>} changes */
  function send(changes) {
    for (const [key, value] of Object.entries(changes)) model.set(key, value);
    model.save_changes();
  }

  // The overview goes where it is clicked through the stage, made just below.
  const minimap = createMinimap({ h, viewport, go: (v) => stage.setView(v), on });
  const stage = createStage({ doc, viewport, canvas, message, nodes, elements, selected,
    onView: minimap.update, onDraw: minimap.draw });
  const tooltip = createTooltip({ tip, canvas, h, width: stage.width, height: stage.height,
    describe: (/** @type {string} */ id) => tooltipFor(elements(), nodes(), id) });
  const selection = createSelection({ canvas, viewport, selectionButton: button.selection, selected, marked, nodes,
    send, elementFor: stage.elementFor, show: stage.reveal, revealWhenDrawn: stage.revealWhenDrawn, on });
  const finder = createSearch({ search, count, root, canvas, nodes, elementFor: stage.elementFor,
    reveal: selection.reveal, on });
  const stopPointer = attachPointer({ doc, root, viewport, hint, stage, tooltip, elements, selected,
    collapsed: () => model.get("collapsed") || [], send, on });
  const bar = createToolbar({ model, h, toolbar, modeBox, modeSelect, legend, status, stage, nodes, elements,
    send, on });
  const keys = createUndoKeys({ el, root, send: (content) => model.send(content), signal: listeners.signal });

  /** The selection, marked nodes and search marks, on a new drawing or new element and node records. */
  function refreshMarks() {
    stage.reindex();
    selection.mark();
    selection.outline();
    finder.run();
  }

  function onSvg() {
    tooltip.hide();
    stage.draw(model.get("svg"), refreshMarks);
  }

  // The widget may be rendered before it is attached: fit once it has a size.
  const resize = new ResizeObserver(() => {
    keys.attach();
    stage.resized();
  });
  resize.observe(viewport);
  keys.attach();
  on(root, "focusin", keys.attach);
  on(root, "pointerdown", keys.attach);

  onModel("svg", onSvg);
  onModel("elements", refreshMarks);
  onModel("nodes", () => {
    refreshMarks();
    stage.refitIfUntouched();
  });
  onModel("selected", selection.follow);
  onModel("marked", selection.outline);
  onModel("color_modes", bar.renderModes);
  onModel("color_mode", bar.renderMode);
  onModel("legend", bar.renderLegend);
  onModel("legend_mode", bar.renderLegend);
  onModel("status", bar.renderStatus);
  onModel("show_weights", bar.renderWeights);

  bar.renderModes();
  bar.renderLegend();
  bar.renderStatus();
  bar.renderWeights();
  onSvg();

  return () => {
    listeners.abort();
    stopPointer();
    for (const [event, fn] of modelListeners) model.off(event, fn);
    resize.disconnect();
    el.replaceChildren();
  };
}

export default { render };

// @ts-check
/**
 * Graph view, the toolbar and legend: the zoom and collapse buttons, the colour-mode
 * menu (the words Python sends in `color_modes`), the legend strip and the status line.
 */
import { collapseAll, expandOneLevel } from "./gv_graph.js";
import { legendText, legendTitle, modeLabel, safeColor } from "./gv_labels.js";

/** @typedef {import("./gv_graph.js").Elements} Elements */
/** @typedef {import("./gv_graph.js").Nodes} Nodes */
/** @typedef {import("./gv_labels.js").Mode} Mode */
/** @typedef {import("./gv_dom.js").Maker} Maker */

/** Zoom factor of the + and − buttons. */
const ZOOM_STEP = 1.25;

/**
 * What a toolbar button does: a view change (`fit`, `zoom` by a factor, `selection`)
 * or the `collapsed` list to send; null for no button.
 * @param {string | undefined} action
 * @param {{elements: Elements, collapsed: string[], nodes: Nodes, showWeights?: boolean}} state
 * @returns {{fit: true} | {zoom: number} | {selection: true} | {collapsed: string[]}
 *   | {show_weights: boolean} | null}
 */
export function toolbarAction(action, { elements, collapsed, nodes, showWeights = false }) {
  switch (action) {
    case "fit": return { fit: true };
    case "in": return { zoom: ZOOM_STEP };
    case "out": return { zoom: 1 / ZOOM_STEP };
    case "selection": return { selection: true };
    case "collapse-all": return { collapsed: collapseAll(elements) };
    case "expand-level": return { collapsed: expandOneLevel(collapsed, nodes) };
    case "expand-all": return { collapsed: [] };
    case "weights": return { show_weights: !showWeights };
    default: return null;
  }
}

/**
 * The legend as shown: its heading (the mode and its unit) and each entry's text and
 * a safe colour.
 * @param {Mode[]} modes @param {string} mode @param {Array<{label: string, color: string}>} items
 */
export function legendView(modes, mode, items) {
  return { title: legendTitle(modes, mode),
    entries: items.map(({ label, color }) => ({ text: legendText(mode, label), color: safeColor(color) })) };
}

/**
 * @param {{model: {get(key: string): any}, h: Maker, toolbar: HTMLElement, modeBox: HTMLElement,
 *   modeSelect: HTMLSelectElement, legend: HTMLElement, status: HTMLElement,
 *   stage: ReturnType<typeof import("./gv_stage.js").createStage>,
 *   nodes: () => Nodes, elements: () => Elements, send: (changes: Record<string, unknown>) => void,
 *   on: (target: EventTarget, type: string, fn: (e: any) => void) => void}} parts
 */
export function createToolbar({ model, h, toolbar, modeBox, modeSelect, legend, status, stage, nodes, elements,
  send, on }) {
  const modes = () => /** @type {Mode[]} */ (model.get("color_modes") || []);

  function renderModes() {
    modeSelect.replaceChildren(...modes().map((m) => {
      const o = h("option", "", modeLabel(modes(), m.name));
      o.value = m.name;
      return o;
    }));
    modeSelect.value = model.get("color_mode");
    modeBox.hidden = modes().length < 2;
  }

  function renderLegend() {
    const items = /** @type {Array<{label: string, color: string}>} */ (model.get("legend") || []);
    const { title, entries } = legendView(modes(), model.get("legend_mode") || model.get("color_mode"), items);
    legend.replaceChildren(h("span", "fxviz-gv-legend-title", title), ...entries.map(({ text, color }) => {
      const item = h("span", "fxviz-gv-legend-item");
      const swatch = h("span", "fxviz-gv-swatch");
      swatch.style.backgroundColor = color;
      item.append(swatch, h("span", "fxviz-gv-legend-label", text));
      return item;
    }));
    legend.hidden = items.length === 0;
  }

  function renderStatus() {
    status.textContent = model.get("status") || "";
  }

  function renderMode() {
    modeSelect.value = model.get("color_mode");
    renderLegend();
  }

  on(toolbar, "click", (/** @type {MouseEvent} */ e) => {
    const b = e.target instanceof Element ? e.target.closest("button") : null;
    const action = toolbarAction(b?.dataset.action, { elements: elements(), collapsed: model.get("collapsed") || [],
      nodes: nodes(), showWeights: Boolean(model.get("show_weights")) });
    if (!action) return;
    if ("fit" in action) stage.fit();
    else if ("zoom" in action) stage.zoomBy(action.zoom, stage.width() / 2, stage.height() / 2);
    else if ("selection" in action) stage.zoomToSelection();
    else send(action);
  });
  on(modeSelect, "change", () => send({ color_mode: modeSelect.value }));

  /** The weights button: pressed while weights are drawn as nodes; hidden where the
   * host cannot redraw (the offline report's drawings are made in advance). */
  function renderWeights() {
    const weights = /** @type {HTMLButtonElement | null} */ (toolbar.querySelector('[data-action="weights"]'));
    if (!weights) return;
    const shown = model.get("show_weights");
    weights.hidden = shown === undefined || shown === null;
    weights.setAttribute("aria-pressed", String(Boolean(shown)));
  }

  return { renderModes, renderLegend, renderStatus, renderMode, renderWeights };
}

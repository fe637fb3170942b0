// @ts-check
/**
 * Graph view, its elements: the toolbar, the viewport (canvas, messages, tooltip)
 * and the legend strip below it. Only builds them; graph_view.js wires them up.
 */

/** @typedef {<T extends keyof HTMLElementTagNameMap>(tag: T, cls: string, text?: string) => HTMLElementTagNameMap[T]} Maker */

/**
 * `h(tag, cls, text)`: an element of `doc` with a class and (as textContent) text.
 * @param {Document} doc
 * @returns {Maker}
 */
export function elementMaker(doc) {
  return (tag, cls, text) => {
    const e = doc.createElement(tag);
    e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
}

/** [action, label, title] of the toolbar's buttons. */
const BUTTONS = [
  ["fit", "Fit", "Show the whole graph if it is legible, else where it starts (its inputs) at a legible size"],
  ["in", "+", "Zoom in (Ctrl/\u2318 + wheel, or the wheel once the graph has focus)"],
  ["out", "\u2212", "Zoom out"],
  ["selection", "Selected", "Zoom to the selected node"],
  ["collapse-all", "Collapse all", "Draw every top-level module as one box"],
  ["expand-level", "Expand a level", "Open each collapsed module one level"],
  ["expand-all", "Expand all", "Open every module that lays out quickly (the status line says what stays closed)"],
  ["weights", "Weights", "Draw parameters, buffers and constants as boxes of their own (else each op lists "
    + "the weights it reads: tooltip, Details, table)"],
];

/**
 * The view's elements, assembled under `root`.
 * @param {Maker} h
 */
export function buildDom(h) {
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
  for (const [action, label, title] of BUTTONS) {
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
  return { root, toolbar, search, count, modeBox, modeSelect, button, status, viewport, canvas, message, hint,
    legend, tip };
}

// @ts-check
/**
 * Graph view, words and colours: tooltips, colour-mode labels with units (from the
 * model: the core's table of modes), legend entries. Pure: the caller puts the
 * strings in with textContent.
 */

/** @typedef {import("./gv_graph.js").Elements} Elements */
/** @typedef {import("./gv_graph.js").Nodes} Nodes */
/** @typedef {import("./gv_graph.js").NodeRecord} NodeRecord */
/** @typedef {{title: string, rows: Array<[string, string]>, hint: string}} Tooltip */

/** @param {NodeRecord | undefined} rec @returns {Array<[string, string]>} */
function nodeRows(rec) {
  if (!rec) return [];
  /** @type {Array<[string, string | undefined]>} */
  const rows = [["op", rec.op], ["target", rec.target], ["shape", rec.shape],
    ["weights", rec.weights], ["time", rec.time], ["module", rec.module_path]];
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

/** A colour mode as the core's table describes it (fxviz/draw/colour_modes.py).
 * @typedef {{name: string, label?: string, unit?: string}} Mode */

/** The menu's words for mode `name`: its label from the model's `color_modes`, else the name.
 * @param {Mode[]} modes @param {string} name */
export function modeLabel(modes, name) {
  return modes.find((m) => m.name === name)?.label || name;
}

/** The legend's heading: the mode and its unit, e.g. "time share (% of ...)".
 * @param {Mode[]} modes @param {string} name */
export function legendTitle(modes, name) {
  const unit = modes.find((m) => m.name === name)?.unit;
  return unit ? `${modeLabel(modes, name)} (${unit})` : modeLabel(modes, name);
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

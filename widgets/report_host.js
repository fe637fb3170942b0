// @ts-check
/**
 * fxviz report page: a Session frozen into one HTML file (see fxviz/report/page.py).
 *
 * The graph is the Explorer's own graph view (graph_view.js, loaded from the page's
 * JSON as an ES module): `HostModel` (report_model.js) stands in for anywidget's model
 * and this file plays the kernel, answering the view's `save_changes` from drawings
 * made in advance. The page's elements come from report_panels.js; everything from
 * the user's model enters the DOM with textContent. report.py inlines the three
 * modules joined (fxviz.present.assets); `node --test` imports them as files.
 */
import { HostModel, focusAfter, focusText, revealFocus } from "./report_model.js";
import {
  TABLE_OPEN_MAX, badge, buildLayout, codeContent, detailsByName, detailsContent, diffContent, historyButtons,
  historyLegend, timingContent,
} from "./report_panels.js";

export * from "./report_model.js";
export * from "./report_panels.js";

/** @typedef {{svg: string, elements: Record<string, any>, legend: any[], collapsed: string[], error?: string}} Variant */

/** A base64 gzip JSON blob, inflated by the browser. @param {string} b64 */
async function inflate(b64) {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

/** @param {Document} doc */
async function main(doc) {
  const data = JSON.parse(doc.getElementById("fxviz-report-data")?.textContent || "{}");
  /** The widget front-end module whose source the page holds in element `id`. @param {string} id */
  const widget = async (id) => {
    const esm = JSON.parse(doc.getElementById(id)?.textContent || '""');
    return import(URL.createObjectURL(new Blob([esm], { type: "text/javascript" })));
  };
  const [graphModule, tableModule] = await Promise.all(
    [widget("fxviz-graph-view-esm"), widget("fxviz-table-view-esm")]);
  const [graphView, tableView] = [graphModule.default, tableModule.default];
  /** @type {Map<number, Promise<any>>} */
  const cache = new Map();
  /** @param {number} i */
  const blob = (i) => {
    if (!cache.has(i)) cache.set(i, inflate(data.blobs[i]));
    return /** @type {Promise<any>} */ (cache.get(i));
  };

  /** @param {string} tag @param {string} [cls] @param {string} [text] */
  const h = (tag, cls = "", text = "") => {
    const e = doc.createElement(tag);
    if (cls) e.className = cls;
    if (text) e.textContent = text;
    return e;
  };
  const root = /** @type {HTMLElement} */ (doc.getElementById("fxviz-report"));
  const { stepLabel, stepBadge, history, historyLegend: undoneLine, overview, explorerView, note, graphEl, panels, tabButtons, tableEl,
    tableBox, tableTitle, diffToggle, base, codeView } = buildLayout(h, doc, root, data,
    data.steps[data.current].n_nodes <= TABLE_OPEN_MAX);

  // --- state ---------------------------------------------------------------
  let stepIndex = data.current;
  let focus = "";
  const step = () => data.steps[stepIndex];
  /** @type {Record<string, any>} */
  let details = {};
  /** Counters of the latest graph and code requests: blobs inflate asynchronously, and
   * only the latest request may draw. */
  let drawing = 0;
  let coding = 0;

  const model = new HostModel({ svg: "", elements: {}, legend: [], nodes: {}, selected: "",
    collapsed: [], color_mode: "op", color_modes: data.color_modes, status: "" }, onSave);
  graphView.render({ model, el: graphEl });
  // The Explorer's node table; a row click selects like a click in the graph.
  const table = new HostModel({ columns: data.columns, data: [], selected: "", sort_by: "index",
    descending: false }, (changes) => {
    if ("selected" in changes) select(changes.selected);
  });
  tableView.render({ model: table, el: tableEl });

  /** Select node `name` in the graph and the table, and describe it; a node inside a
   * collapsed module is drawn by opening it, as the Explorer does. @param {string} name */
  async function select(name) {
    model.update({ selected: name });
    table.update({ selected: name });
    showNode();
    if (name && !drawn(name)) await reveal(name);
  }

  /** Whether node `name` is drawn as itself (not inside a collapsed box). @param {string} name */
  const drawn = (name) => `fx-${name}` in (model.get("elements") || {});

  /** The current step's node records (module paths), decoded when first needed. */
  let records = /** @type {{step: any, nodes: Record<string, any>} | null} */ (null);

  /** Open the focus that draws node `name`: its module's, else the nearest ancestor's. @param {string} name */
  async function reveal(name) {
    const s = step();
    if (records?.step !== s) records = { step: s, nodes: graphModule.nodesOf(s.nodes) };
    const boxes = s.boxes || { node: {}, parent: {} };  // a call's node lies in its call's box, not its module's
    const path = Object.hasOwn(boxes.node, name) ? boxes.node[name] : records.nodes[name]?.module_path;
    const f = typeof path === "string" ? revealFocus(path, s.views, boxes.parent) : null;
    if (f !== null && f !== focus) await showFocus(f);
  }

  /** Show focus `f` of the current step; false when the report has no such drawing.
   * @param {string} f */
  async function showFocus(f) {
    const id = step().views[f];
    if (id === undefined) return false;
    const ticket = ++drawing;
    const variant = /** @type {Variant} */ (await blob(id));
    if (ticket !== drawing) return true;  // a later click or step won while this one inflated
    focus = f;
    model.update({ svg: variant.svg, elements: variant.elements, legend: variant.legend,
      collapsed: variant.collapsed,
      status: `${step().n_nodes} nodes · step ${stepIndex} · ${focusText(f, step().boxes?.label)}` });
    note.textContent = variant.error || "";
    return true;
  }

  /** @param {Record<string, any>} changes */
  async function onSave(changes) {
    if ("selected" in changes) select(changes.selected);
    if ("collapsed" in changes) {
      const wanted = focusAfter(currentCollapsed, changes.collapsed, step().boxes?.parent);
      if (wanted === null || !(await showFocus(wanted))) {
        model.update({ collapsed: currentCollapsed });
        note.textContent = wanted === null ? "" : `"${wanted}" is not drawn in this report (it draws a few `
          + "views per step, one of each kind of module first): session.to_html(path, max_views=200) draws more.";
      }
    }
  }
  /** The collapsed list of the drawing on screen (the view sets its own on a click). */
  let currentCollapsed = /** @type {string[]} */ ([]);
  model.on("change:svg", () => { currentCollapsed = model.get("collapsed"); });

  // --- panels ----------------------------------------------------------------
  function showNode() {
    panels.details.replaceChildren(...detailsContent(h, details[model.get("selected")], select, step().overview));
    drawCode();
  }

  async function drawCode() {
    const s = step();
    const ticket = ++coding;
    if (diffToggle.checked && base.value !== "") {
      const text = /** @type {string} */ (await blob(data.diffs[`${base.value},${s.index}`]));
      if (ticket === coding) codeView.replaceChildren(...diffContent(h, text));
      return;
    }
    const code = /** @type {string} */ (await blob(s.code));
    if (ticket !== coding) return;
    codeView.replaceChildren(...codeContent(h, code, s.lines[model.get("selected")]));
    codeView.querySelector(".fxviz-report-line-marked")?.scrollIntoView({ block: "nearest" });
  }

  async function drawTiming() {
    const t = step().timing;
    panels.timing.replaceChildren(...timingContent(h, t, t ? await blob(t.chart) : undefined));
  }

  /** @param {number} i */
  async function showStep(i) {
    stepIndex = i;
    const s = step();
    stepLabel.textContent = `step ${i} of ${data.steps.length - 1} · ${s.pass_name}`;
    stepBadge.replaceChildren(badge(h, s.check));
    history.replaceChildren(...historyButtons(h, data.steps, stepIndex, showStep));
    undoneLine.textContent = historyLegend(data.steps);
    undoneLine.hidden = !undoneLine.textContent;
    details = detailsByName(graphModule.rowsOf(await blob(s.details)));
    const others = data.steps.filter((/** @type {any} */ o) => o.index !== i);
    base.replaceChildren(...others.map((/** @type {any} */ o) => {
      const opt = /** @type {HTMLOptionElement} */ (h("option", "", `step ${o.index} · ${o.pass_name}`));
      opt.value = String(o.index);
      return opt;
    }));
    base.value = String(i > 0 ? i - 1 : others[0]?.index ?? "");
    diffToggle.disabled = base.disabled = others.length === 0;
    const selected = model.get("selected") in details ? model.get("selected") : "";
    model.update({ nodes: s.nodes, selected });
    if (!(await showFocus(focus))) await showFocus("");
    showNode();
    drawTiming();
    tableTitle.textContent = `Node table (${s.n_nodes} nodes)`;
    await new Promise((resolve) => setTimeout(resolve, 0));  // the graph first
    await fillTable();
  }

  /** The current step's rows in the node table, once it is unfolded. */
  async function fillTable() {
    const s = step();
    if (!tableBox.open) return;
    const rows = await blob(s.rows);
    if (s === step()) table.update({ data: rows, selected: model.get("selected") });
  }

  /** @param {string} name */
  function showTab(name) {
    for (const b of tabButtons) b.classList.toggle("fxviz-report-tab-current", b.dataset.tab === name);
    for (const [key, panel] of Object.entries(panels)) panel.hidden = key !== name;
  }

  for (const b of tabButtons) b.addEventListener("click", () => showTab(b.dataset.tab || "details"));
  overview.addEventListener("click", () => showFocus(""));
  explorerView.addEventListener("click", () => showFocus("*"));
  diffToggle.addEventListener("change", drawCode);
  tableBox.addEventListener("toggle", fillTable);
  base.addEventListener("change", drawCode);
  showTab("details");
  await showStep(stepIndex);
  root.dataset.ready = "1";
}

if (typeof document !== "undefined" && document.getElementById("fxviz-report-data")) {
  main(document).catch((err) => {
    const root = document.getElementById("fxviz-report");
    if (root) root.textContent = `The report could not be shown: ${err}`;
    throw err;
  });
}

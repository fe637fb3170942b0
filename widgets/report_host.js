// @ts-check
/**
 * fxviz report page: a Session frozen into one HTML file (see fxviz/report.py).
 *
 * The graph is the Explorer's own graph view (graph_view.js, loaded from the page's
 * JSON as an ES module): `HostModel` stands in for anywidget's model and this file
 * plays the kernel, answering the view's `save_changes` from drawings made in advance.
 * Everything from the user's model enters the DOM with textContent. The helpers above
 * `main` are pure and touch no `document`, so `node --test` can import them.
 */

/** @typedef {{svg: string, elements: Record<string, any>, legend: any[], collapsed: string[], error?: string}} Variant */

/** Above this many nodes the node table starts folded. */
export const TABLE_OPEN_MAX = 1000;

/**
 * anywidget's model as the graph view uses it, with Backbone's semantics: `set` fires
 * `change:key` only when the value changes; `update` (the "kernel") assigns every key
 * before firing any event; `save_changes` hands what the view set to `onSave`.
 */
export class HostModel {
  /** @param {Record<string, any>} state @param {(changes: Record<string, any>) => void} onSave */
  constructor(state, onSave) {
    /** @type {Record<string, any>} */
    this.state = { ...state };
    this.onSave = onSave;
    /** @type {Map<string, Set<Function>>} */
    this.listeners = new Map();
    /** @type {Record<string, any>} */
    this.pending = {};
  }

  /** @param {string} key */
  get(key) {
    return this.state[key];
  }

  /** @param {string} key @param {any} value */
  set(key, value) {
    if (same(this.state[key], value)) return;
    this.state[key] = value;
    this.pending[key] = value;
    this.emit(key);
  }

  save_changes() {
    const changes = this.pending;
    this.pending = {};
    this.onSave(changes);
  }

  send() {}

  /** @param {string} event @param {Function} cb */
  on(event, cb) {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event)?.add(cb);
  }

  /** @param {string} event @param {Function} cb */
  off(event, cb) {
    this.listeners.get(event)?.delete(cb);
  }

  /** A change from the "kernel". @param {Record<string, any>} changes */
  update(changes) {
    const changed = Object.keys(changes).filter((k) => !same(this.state[k], changes[k]));
    Object.assign(this.state, changes);
    for (const key of changed) this.emit(key);
  }

  /** @param {string} key */
  emit(key) {
    for (const cb of [...(this.listeners.get(`change:${key}`) || [])]) cb(this, this.state[key]);
  }
}

/** @param {any} a @param {any} b */
function same(a, b) {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

/** `a.b.c` -> `a.b`; `a` -> `` (the top level). @param {string} path */
export function parentPath(path) {
  const i = path.lastIndexOf(".");
  return i < 0 ? "" : path.slice(0, i);
}

/**
 * The focus a click in the graph view asks for (see fxviz/report_views.py): expanding
 * a module focuses it, collapsing one focuses its parent; null when nothing changed.
 * @param {string[]} before @param {string[]} after
 * @returns {string | null}
 */
export function focusAfter(before, after) {
  const opened = before.find((p) => !after.includes(p));
  if (opened !== undefined) return opened;
  const closed = after.find((p) => !before.includes(p));
  return closed === undefined ? null : parentPath(closed);
}

/** CSS class of a unified diff line. @param {string} line */
export function diffLineClass(line) {
  if (line.startsWith("+++") || line.startsWith("---")) return "fxviz-diff-file";
  if (line.startsWith("@@")) return "fxviz-diff-hunk";
  if (line.startsWith("+")) return "fxviz-diff-insert";
  if (line.startsWith("-")) return "fxviz-diff-delete";
  return "";
}

/** What the status line says about a focus. @param {string} focus */
export function focusText(focus) {
  if (focus === "*") return "drawn as the Explorer first shows it";
  if (focus === "") return "top level: click a module to open it";
  return `open: ${focus} (other modules collapsed)`;
}

/** A base64 gzip JSON blob, inflated by the browser. @param {string} b64 */
async function inflate(b64) {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

/** @param {Document} doc */
async function main(doc) {
  const data = JSON.parse(doc.getElementById("fxviz-report-data")?.textContent || "{}");
  /** The widget front-end whose ES module source the page holds in element `id`. @param {string} id */
  const widget = async (id) => {
    const esm = JSON.parse(doc.getElementById(id)?.textContent || '""');
    return (await import(URL.createObjectURL(new Blob([esm], { type: "text/javascript" })))).default;
  };
  const [graphView, tableView] = await Promise.all(
    [widget("fxviz-graph-view-esm"), widget("fxviz-table-view-esm")]);
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
  /** @param {any} check */
  const badge = (check) => {
    const slug = { match: "match", "expected to differ": "expected" }[check.status] || "mismatch";
    const extra = check.status === "mismatch" && check.max_abs !== null
      ? ` (max abs ${check.max_abs.toPrecision(3)})` : "";
    const b = h("span", `fxviz-badge-${slug}`, check.status + extra);
    b.title = check.message;
    return b;
  };

  // --- layout --------------------------------------------------------------
  const root = /** @type {HTMLElement} */ (doc.getElementById("fxviz-report"));
  const header = h("div", "fxviz-report-header");
  const stepLabel = h("span", "fxviz-report-step");
  const stepBadge = h("span", "fxviz-report-badge");
  header.append(h("b", "fxviz-report-title", data.title), stepLabel, stepBadge);
  const history = h("div", "fxviz-report-history");
  const viewBar = h("div", "fxviz-report-viewbar");
  const overview = h("button", "fxviz-report-overview", "top level");
  const explorerView = h("button", "fxviz-report-explorer-view", "as in the Explorer");
  const note = h("span", "fxviz-report-note");
  viewBar.append(h("span", "", "View:"), overview, explorerView, note);
  const graphEl = h("div", "fxviz-report-graph");
  const tabs = h("div", "fxviz-report-tabs");
  const panels = { details: h("div", "fxviz-report-details"), code: h("div", "fxviz-report-code-panel"),
    timing: h("div", "fxviz-report-timing") };
  const tabButtons = Object.keys(panels).map((name) => {
    const b = h("button", "fxviz-report-tab", name[0].toUpperCase() + name.slice(1));
    b.dataset.tab = name;
    return b;
  });
  tabs.append(...tabButtons);
  const side = h("div", "fxviz-report-side");
  side.append(tabs, ...Object.values(panels));
  const main = h("div", "fxviz-report-main");
  const left = h("div", "fxviz-report-left");
  left.append(viewBar, graphEl);
  main.append(left, side);
  const tableEl = h("div", "fxviz-report-table");
  // Folded on large graphs: building thousands of rows would hold up the page.
  const tableBox = /** @type {HTMLDetailsElement} */ (h("details", "fxviz-report-table-box"));
  const tableTitle = h("summary", "fxviz-report-table-title");
  tableBox.append(tableTitle, tableEl);
  tableBox.open = data.steps[data.current].n_nodes <= TABLE_OPEN_MAX;
  root.replaceChildren(header, history, main, tableBox);

  // code panel: the step's code, or its diff against another step
  const diffToggle = /** @type {HTMLInputElement} */ (h("input", "fxviz-report-diff-toggle"));
  diffToggle.type = "checkbox";
  const diffLabel = h("label", "fxviz-report-diff-label");
  const base = /** @type {HTMLSelectElement} */ (h("select", "fxviz-report-diff-base"));
  diffLabel.append(diffToggle, doc.createTextNode(" diff against "), base);
  const codeView = h("pre", "fxviz-report-code");
  panels.code.append(diffLabel, codeView);

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
  const table = new HostModel({ columns: data.columns, rows: [], selected: "", sort_by: "index",
    descending: false }, (changes) => {
    if ("selected" in changes) select(changes.selected);
  });
  tableView.render({ model: table, el: tableEl });

  /** Select node `name` in the graph and the table, and describe it. @param {string} name */
  function select(name) {
    model.update({ selected: name });
    table.update({ selected: name });
    showNode();
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
      status: `${step().n_nodes} nodes · step ${stepIndex} · ${focusText(f)}` });
    note.textContent = variant.error || "";
    return true;
  }

  /** @param {Record<string, any>} changes */
  async function onSave(changes) {
    if ("selected" in changes) select(changes.selected);
    if ("collapsed" in changes) {
      const wanted = focusAfter(currentCollapsed, changes.collapsed);
      if (wanted === null || !(await showFocus(wanted))) {
        model.update({ collapsed: currentCollapsed });
        note.textContent = wanted === null ? "" : `"${wanted}" is not drawn in this report `
          + "(it keeps a limited number of views per step): open its parent first.";
      }
    }
  }
  /** The collapsed list of the drawing on screen (the view sets its own on a click). */
  let currentCollapsed = /** @type {string[]} */ ([]);
  model.on("change:svg", () => { currentCollapsed = model.get("collapsed"); });

  // --- panels ----------------------------------------------------------------
  function showNode() {
    const name = model.get("selected");
    const rec = details[name];
    if (!rec) {
      panels.details.replaceChildren(h("p", "fxviz-hint", "Select a node in the graph."));
    } else {
      const table = h("table", "fxviz-kv");
      for (const [k, v] of rec.rows) {
        const tr = h("tr");
        tr.append(h("th", "", k), h("td", "", v));
        table.append(tr);
      }
      panels.details.replaceChildren(table, links("inputs", rec.inputs), links("users",
        rec.users.map((/** @type {string} */ u) => [u, u])));
    }
    drawCode();
  }

  /** @param {string} title @param {Array<[string, string]>} targets */
  function links(title, targets) {
    const row = h("div", `fxviz-report-${title}`, targets.length ? `${title}: ` : `${title}: none`);
    for (const [text, node] of targets) {
      const b = h("button", "fxviz-node-link", text);
      b.addEventListener("click", () => select(node));
      row.append(b);
    }
    return row;
  }

  async function drawCode() {
    const s = step();
    const ticket = ++coding;
    if (diffToggle.checked && base.value !== "") {
      const text = /** @type {string} */ (await blob(data.diffs[`${base.value},${s.index}`]));
      if (ticket !== coding) return;
      codeView.replaceChildren(...text.split("\n").map((line) => h("div", diffLineClass(line), line || " ")));
      if (!text) codeView.replaceChildren(h("div", "fxviz-hint", "No difference in the code."));
      return;
    }
    const code = /** @type {string} */ (await blob(s.code));
    if (ticket !== coding) return;
    const mark = s.lines[model.get("selected")];
    codeView.replaceChildren(...code.split("\n").map((line, i) =>
      h("div", i + 1 === mark ? "fxviz-report-line fxviz-report-line-marked" : "fxviz-report-line", line || " ")));
    codeView.querySelector(".fxviz-report-line-marked")?.scrollIntoView({ block: "nearest" });
  }

  async function drawTiming() {
    const t = step().timing;
    if (!t) {
      panels.timing.replaceChildren(h("p", "fxviz-hint", "This step was not profiled when the report "
        + "was written (profile it in the Explorer, or write the report with profile=True)."));
      return;
    }
    const table = h("table", "fxviz-table fxviz-report-timing-table");
    const head = h("tr");
    head.append(...t.columns.map((/** @type {string} */ c) => h("th", "", c)));
    table.append(head);
    for (const row of t.rows) {
      const tr = h("tr");
      tr.append(...row.map((/** @type {any} */ v) => h("td", "", v === null ? "—" : String(v))));
      table.append(tr);
    }
    const img = /** @type {HTMLImageElement} */ (h("img", "fxviz-report-chart"));
    img.alt = "slowest nodes";
    img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(await blob(t.chart))}`;
    panels.timing.replaceChildren(h("p", "fxviz-report-timing-summary", t.summary), table, img);
  }

  function drawHistory() {
    history.replaceChildren(...data.steps.map((/** @type {any} */ s) => {
      const b = h("button", "fxviz-report-history-step");
      if (s.index === stepIndex) b.classList.add("fxviz-report-history-current");
      if (s.undone) b.classList.add("fxviz-report-history-undone");
      const what = s.params ? `${s.pass_name}(${s.params})` : s.pass_name;
      const scope = s.selection.length ? ` on ${s.selection.join(", ")}` : "";
      b.append(h("span", "", `${s.index} · ${what}${scope}`), badge(s.check));
      b.title = s.undone ? "undone in the session (redo would restore it)" : s.check.message;
      b.addEventListener("click", () => showStep(s.index));
      return b;
    }));
  }

  /** @param {number} i */
  async function showStep(i) {
    stepIndex = i;
    const s = step();
    stepLabel.textContent = `step ${i} of ${data.steps.length - 1} · ${s.pass_name}`;
    stepBadge.replaceChildren(badge(s.check));
    drawHistory();
    details = await blob(s.details);
    const others = data.steps.filter((/** @type {any} */ o) => o.index !== i);
    base.replaceChildren(...others.map((/** @type {any} */ o) => {
      const opt = /** @type {HTMLOptionElement} */ (h("option", "", `step ${o.index} · ${o.pass_name}`));
      opt.value = String(o.index);
      return opt;
    }));
    base.value = String(i > 0 ? i - 1 : others[0]?.index ?? "");
    diffToggle.disabled = base.disabled = others.length === 0;
    const selected = model.get("selected") in s.nodes ? model.get("selected") : "";
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
    if (s === step()) table.update({ rows, selected: model.get("selected") });
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

// @ts-check
/**
 * The report page's elements: its layout, the step history, the Details, Code and
 * Timing panels. Builds elements with `h` (text always as textContent) and wires
 * nothing: report_host.js does. The rules of what they say are pure and exported.
 */

/** Above this many nodes the node table starts folded. */
export const TABLE_OPEN_MAX = 1000;

/** @typedef {(tag: string, cls?: string, text?: string) => HTMLElement} Make */
/** @typedef {{status: string, text: string, slug: string, message: string}} Check */

/**
 * The badge of a check: its class suffix and its text, as Python words them
 * (fxviz.present.presentation: CHECK_CLASSES, check_text). @param {Check} check
 */
export function badgeParts(check) {
  return { slug: check.slug, text: check.text };
}

/** A step as the history lists it. @param {{index: number, pass_name: string, params: string, selection: string[]}} s */
export function stepText(s) {
  const what = s.params ? `${s.pass_name}(${s.params})` : s.pass_name;
  const scope = s.selection.length ? ` on ${s.selection.join(", ")}` : "";
  return `${s.index} · ${what}${scope}`;
}

/** CSS class of a unified diff line. @param {string} line */
export function diffLineClass(line) {
  if (line.startsWith("+++") || line.startsWith("---")) return "fxviz-diff-file";
  if (line.startsWith("@@")) return "fxviz-diff-hunk";
  if (line.startsWith("+")) return "fxviz-diff-insert";
  if (line.startsWith("-")) return "fxviz-diff-delete";
  return "";
}

/** @param {Make} h @param {Check} check */
export function badge(h, check) {
  const { slug, text } = badgeParts(check);
  const b = h("span", `fxviz-badge-${slug}`, text);
  b.title = check.message;
  return b;
}

/**
 * The page's parts, assembled under `root`.
 * @param {Make} h @param {Document} doc @param {HTMLElement} root
 * @param {{title: string}} data @param {boolean} tableOpen
 */
export function buildLayout(h, doc, root, data, tableOpen) {
  const header = h("div", "fxviz-report-header");
  const stepLabel = h("span", "fxviz-report-step");
  const stepBadge = h("span", "fxviz-report-badge");
  header.append(h("b", "fxviz-report-title", data.title), stepLabel, stepBadge);
  const history = h("div", "fxviz-report-history");
  const historyLegend = h("div", "fxviz-report-history-legend fxviz-hint");
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
  tableBox.open = tableOpen;
  root.replaceChildren(header, history, historyLegend, main, tableBox);

  // code panel: the step's code, or its diff against another step
  const diffToggle = /** @type {HTMLInputElement} */ (h("input", "fxviz-report-diff-toggle"));
  diffToggle.type = "checkbox";
  const diffLabel = h("label", "fxviz-report-diff-label");
  const base = /** @type {HTMLSelectElement} */ (h("select", "fxviz-report-diff-base"));
  diffLabel.append(diffToggle, doc.createTextNode(" diff against "), base);
  const codeView = h("pre", "fxviz-report-code");
  panels.code.append(diffLabel, codeView);
  return { stepLabel, stepBadge, history, historyLegend, overview, explorerView, note, graphEl, panels, tabButtons, tableEl,
    tableBox, tableTitle, diffToggle, base, codeView };
}

/** A table of [label, text] rows. @param {Make} h @param {Array<[string, string]>} rows */
function keyValues(h, rows) {
  const table = h("table", "fxviz-kv");
  for (const [k, v] of rows) {
    const tr = h("tr");
    tr.append(h("th", "", k), h("td", "", v));
    table.append(tr);
  }
  return table;
}

/**
 * The whole graph (fxviz.present.overview.graph_overview's record), shown while no node is selected.
 * @param {Make} h @param {{rows: Array<[string, string]>, method: string, tried: Array<[string, string]>}} overview
 */
function overviewContent(h, overview) {
  const parts = [h("p", "fxviz-overview-title", "The whole graph"), keyValues(h, overview.rows)];
  if (overview.tried.length) {
    parts.push(h("p", "fxviz-overview-tried", `Before ${overview.method}, tracer="auto" tried:`));
    const list = h("ul", "fxviz-overview-list");
    for (const [method, reason] of overview.tried) {
      const item = h("li");
      item.append(h("b", "", method), h("span", "", `: ${reason}`));
      list.append(item);
    }
    parts.push(list);
  }
  const box = h("div", "fxviz-overview");
  box.append(...parts, h("p", "fxviz-hint", "Select a node in the graph."));
  return [box];
}

/**
 * Each node's Details record by name (`rows` of [label, text], `inputs`, `users`) from the
 * page's details, decoded by `rowsOf` (fxviz.report.page sends them column by column: a
 * column per label, null where a node has no such row, then `inputs` and `users`).
 * @param {Array<Record<string, any>>} decoded
 * @returns {Record<string, {rows: Array<[string, string]>, inputs: Array<[string, string]>, users: string[]}>}
 */
export function detailsByName(decoded) {
  const byName = Object.create(null);  // a node may be named like an Object method
  for (const { inputs, users, ...labels } of decoded) {
    byName[labels.name] = { rows: Object.entries(labels).filter(([, text]) => text !== null), inputs, users };
  }
  return byName;
}

/**
 * The Details panel's content for one node's record or, when none is selected, the whole
 * graph (`overview`; a hint alone without one); its input and user links call `select`.
 * @param {Make} h @param {any} rec @param {(name: string) => void} select @param {any} [overview]
 */
export function detailsContent(h, rec, select, overview) {
  if (!rec) return overview ? overviewContent(h, overview) : [h("p", "fxviz-hint", "Select a node in the graph.")];
  const table = keyValues(h, rec.rows);
  /** @param {string} title @param {Array<[string, string]>} targets */
  const links = (title, targets) => {
    const row = h("div", `fxviz-report-${title}`, targets.length ? `${title}: ` : `${title}: none`);
    for (const [text, node] of targets) {
      const b = h("button", "fxviz-node-link", text);
      b.addEventListener("click", () => select(node));
      row.append(b);
    }
    return row;
  };
  return [table, links("inputs", rec.inputs), links("users", rec.users.map((/** @type {string} */ u) => [u, u]))];
}

/** A unified diff's lines, or a hint when there is no difference. @param {Make} h @param {string} text */
export function diffContent(h, text) {
  if (!text) return [h("div", "fxviz-hint", "No difference in the code.")];
  return text.split("\n").map((line) => h("div", diffLineClass(line), line || " "));
}

/** The code's lines, line `mark` (1-based) marked. @param {Make} h @param {string} code @param {number} mark */
export function codeContent(h, code, mark) {
  return code.split("\n").map((line, i) =>
    h("div", i + 1 === mark ? "fxviz-report-line fxviz-report-line-marked" : "fxviz-report-line", line || " "));
}

/**
 * The Timing panel: the summary, the slowest nodes' table (display strings, as
 * fxviz.present.presentation words them) and the chart (an SVG string), or why the step has no timing.
 * @param {Make} h @param {any} t @param {string} [chart]
 */
export function timingContent(h, t, chart) {
  if (!t) {
    return [h("p", "fxviz-hint", "This step was not profiled when the report "
      + "was written (profile it in the Explorer, or write the report with profile=True).")];
  }
  const table = h("table", "fxviz-table fxviz-report-timing-table");
  const head = h("tr");
  head.append(...t.columns.map((/** @type {string} */ c) => h("th", "", c)));
  table.append(head);
  for (const row of t.rows) {
    const tr = h("tr");
    tr.append(...row.map((/** @type {string} */ v) => h("td", "", v)));
    table.append(tr);
  }
  const img = /** @type {HTMLImageElement} */ (h("img", "fxviz-report-chart"));
  img.alt = "slowest nodes";
  img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(chart || "")}`;
  return [h("p", "fxviz-report-timing-summary", t.summary), table, img];
}

/** Why a step is in grey italics (undone in the session), said with its title. */
export const UNDONE_TITLE = "Grey italics: undone in the session (Redo would bring it back). "
  + "The report keeps it so it can still be looked at and compared.";

/**
 * The line under the history explaining its grey italic steps; "" when there are none.
 * @param {Array<{undone: boolean}>} steps
 */
export function historyLegend(steps) {
  const n = steps.filter((s) => s.undone).length;
  if (!n) return "";
  return `Steps in grey italics (${n}) were undone in the session: Redo would bring them back; `
    + "they are kept here to look at and compare.";
}

/**
 * The history's buttons, the current step marked; a click calls `show(index)`.
 * @param {Make} h @param {any[]} steps @param {number} current @param {(index: number) => void} show
 */
export function historyButtons(h, steps, current, show) {
  return steps.map((s) => {
    const b = h("button", "fxviz-report-history-step");
    if (s.index === current) b.classList.add("fxviz-report-history-current");
    if (s.undone) b.classList.add("fxviz-report-history-undone");
    b.append(h("span", "", stepText(s)), badge(h, s.check));
    b.title = s.undone ? `${UNDONE_TITLE} Check: ${s.check.message}` : s.check.message;
    b.addEventListener("click", () => show(s.index));
    return b;
  });
}

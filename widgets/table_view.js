// The node table: an anywidget with sortable columns and a selected row that is
// synchronised with Python. Pure helpers are named exports (tested under node);
// nothing touches `document` until render() runs. User text enters with textContent.

/** @typedef {{key: string, label: string, numeric?: boolean, digits?: number}} Column */
/** @typedef {Record<string, string | number | null>} Row  rows carry a unique `name` */

/**
 * Rows ordered by one column; missing values (null, undefined, NaN) always last,
 * ties kept in their original order.
 * @param {Row[]} rows @param {string} key @param {boolean} descending
 * @returns {Row[]} a new array
 */
export function sortRows(rows, key, descending) {
  if (!key) return rows.slice();
  const sign = descending ? -1 : 1;
  return rows
    .map((row, i) => ({ row, i }))
    .sort((a, b) => {
      const x = a.row[key], y = b.row[key];
      const mx = isMissing(x), my = isMissing(y);
      if (mx || my) return mx === my ? a.i - b.i : mx ? 1 : -1;
      return sign * compareValues(x, y) || a.i - b.i;
    })
    .map(({ row }) => row);
}

/** @param {unknown} v */
function isMissing(v) {
  return v === null || v === undefined || v === "" || (typeof v === "number" && Number.isNaN(v));
}

/** Numbers by value, text naturally ("relu_2" before "relu_10").
 * @param {string | number} x @param {string | number} y */
export function compareValues(x, y) {
  if (typeof x === "number" && typeof y === "number") return x - y;
  return String(x).localeCompare(String(y), undefined, { numeric: true });
}

/**
 * What a click on a header does: the same column flips the order, a new column
 * starts descending for numbers (largest first) and ascending for text.
 * @param {{sort_by: string, descending: boolean}} state @param {Column} column
 */
export function nextSort(state, column) {
  if (state.sort_by === column.key) return { sort_by: column.key, descending: !state.descending };
  return { sort_by: column.key, descending: Boolean(column.numeric) };
}

/** Display text of a cell. @param {unknown} value @param {Column} column */
export function formatCell(value, column) {
  if (isMissing(value)) return "";
  if (typeof value === "number" && column.numeric) {
    const digits = column.digits ?? 0;
    return value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  }
  return String(value);
}

/** The aria-sort value of a header. @param {string} key @param {{sort_by: string, descending: boolean}} state */
export function ariaSort(key, state) {
  if (state.sort_by !== key) return "none";
  return state.descending ? "descending" : "ascending";
}

/** @param {{model: any, el: HTMLElement}} ctx */
function render({ model, el }) {
  const doc = el.ownerDocument;
  const h = (/** @type {string} */ tag, /** @type {string} */ cls, /** @type {string=} */ text) => {
    const e = doc.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const root = h("div", "fxviz-tv");
  const table = h("table", "fxviz-tv-table");
  const thead = h("thead", "");
  const tbody = h("tbody", "");
  table.append(thead, tbody);
  root.append(table);
  el.replaceChildren(root);
  /** @type {Map<string, HTMLElement>} */
  let rowByName = new Map();

  const state = () => ({ sort_by: model.get("sort_by") || "", descending: Boolean(model.get("descending")) });
  const columns = () => /** @type {Column[]} */ (model.get("columns") || []);

  function renderHead() {
    const tr = h("tr", "");
    for (const column of columns()) {
      const th = h("th", column.numeric ? "fxviz-tv-num" : "");
      th.setAttribute("aria-sort", ariaSort(column.key, state()));
      const button = /** @type {HTMLButtonElement} */ (h("button", "fxviz-tv-sort", column.label));
      button.type = "button";
      button.title = `Sort by ${column.label}`;
      button.addEventListener("click", () => {
        const next = nextSort(state(), column);
        model.set("sort_by", next.sort_by);
        model.set("descending", next.descending);
        model.save_changes();
      });
      th.append(button);
      tr.append(th);
    }
    thead.replaceChildren(tr);
  }

  function renderBody() {
    const cols = columns();
    const { sort_by, descending } = state();
    rowByName = new Map();
    const trs = sortRows(model.get("rows") || [], sort_by, descending).map((row) => {
      const tr = h("tr", "fxviz-tv-row");
      for (const column of cols) tr.append(h("td", column.numeric ? "fxviz-tv-num" : "", formatCell(row[column.key], column)));
      const name = String(row.name);
      tr.addEventListener("click", () => {
        model.set("selected", name);
        model.save_changes();
      });
      rowByName.set(name, tr);
      return tr;
    });
    tbody.replaceChildren(...trs);
    markSelected(false);
  }

  /** @param {boolean} scroll */
  function markSelected(scroll) {
    for (const tr of tbody.querySelectorAll(".fxviz-tv-selected")) tr.classList.remove("fxviz-tv-selected");
    const tr = rowByName.get(model.get("selected"));
    if (!tr) return;
    tr.classList.add("fxviz-tv-selected");
    if (scroll) tr.scrollIntoView({ block: "nearest" });
  }

  const onRows = () => renderBody();
  const onSort = () => { renderHead(); renderBody(); };
  const onSelected = () => markSelected(true);
  model.on("change:rows", onRows);
  model.on("change:columns", onSort);
  model.on("change:sort_by", onSort);
  model.on("change:descending", onSort);
  model.on("change:selected", onSelected);
  onSort();
  markSelected(true);
  return () => {
    model.off("change:rows", onRows);
    model.off("change:columns", onSort);
    model.off("change:sort_by", onSort);
    model.off("change:descending", onSort);
    model.off("change:selected", onSelected);
    el.replaceChildren();
  };
}

export default { render };

// The node table: an anywidget with sortable, resizable columns and a selected row that
// is synchronised with Python. Virtualised: only the rows in view (and a few around)
// are in the DOM, so 100,000 rows scroll smoothly. Pure helpers are named exports
// (tested under node); nothing touches `document` until render() runs. User text
// enters with textContent.

/** @typedef {{key: string, label: string, numeric?: boolean, digits?: number, significant?: number, width?: number}} Column
 * `significant`: numbers in that many significant digits (errors of 1e-7 and of 3), not fixed decimals */
/** @typedef {Record<string, string | number | null>} Row  rows carry a unique `name` */

import { addColumns, rowsOf } from "./columns.js";
import { defaultWidth, fitWidths, resized } from "./tv_columns.js";
import { formatCell, hiddenNote, shownRows, sortRows } from "./tv_rows.js";

export * from "./tv_columns.js";
export * from "./tv_rows.js";

export { rowsOf } from "./columns.js";

/**
 * What a click on a header does: the same column flips the order, a new column
 * starts descending for numbers (largest first) and ascending for text.
 * @param {{sort_by: string, descending: boolean}} state @param {Column} column
 */
export function nextSort(state, column) {
  if (state.sort_by === column.key) return { sort_by: column.key, descending: !state.descending };
  return { sort_by: column.key, descending: Boolean(column.numeric) };
}

/** The aria-sort value of a header. @param {string} key @param {{sort_by: string, descending: boolean}} state */
export function ariaSort(key, state) {
  if (state.sort_by !== key) return "none";
  return state.descending ? "descending" : "ascending";
}

export const ROW_HEIGHT = 22; // px, fixed: what makes the window arithmetic exact
const OVERSCAN = 10;

/**
 * The rows to put in the DOM: those under the viewport plus `overscan` on each side.
 * @param {number} scrollTop @param {number} viewport height of the scrolled area (px)
 * @param {number} rowHeight @param {number} total @param {number} [overscan]
 * @returns {{start: number, end: number}} rows [start, end)
 */
export function visibleRange(scrollTop, viewport, rowHeight, total, overscan = OVERSCAN) {
  const first = Math.floor(Math.max(0, scrollTop) / rowHeight);
  const count = Math.ceil(Math.max(viewport, rowHeight) / rowHeight) + 1;
  return { start: Math.max(0, first - overscan), end: Math.min(total, first + count + overscan) };
}

/**
 * The scrollTop that brings row `index` into view, moving as little as possible
 * (the header, `header` px tall, stays on top of the rows).
 * @param {number} index @param {number} scrollTop @param {number} viewport
 * @param {number} rowHeight @param {number} header
 */
export function scrollToRow(index, scrollTop, viewport, rowHeight, header) {
  const top = index * rowHeight;
  const bottom = top + rowHeight;
  if (top < scrollTop) return top;
  if (bottom > scrollTop + viewport - header) return bottom - viewport + header;
  return scrollTop;
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
  const colgroup = h("colgroup", "");
  const thead = h("thead", "");
  const tbody = h("tbody", "");
  table.append(colgroup, thead, tbody);
  const note = h("div", "fxviz-tv-hidden");
  root.append(table, note);
  el.replaceChildren(root);
  /** @type {Row[]} */
  let sorted = [], rows = [];
  let sentRows = /** @type {unknown} */ (undefined), sentExtra = sentRows;
  /** @type {string[]} */
  let extraKeys = [];
  /** @type {Map<string, number>} */
  let position = new Map(); // row name -> index in `sorted`
  /** @type {Map<string, number>} */
  const widths = new Map(); // column key -> px, kept across re-renders (the user's resizing)
  let drawn = { start: -1, end: -1 };

  const state = () => ({ sort_by: model.get("sort_by") || "", descending: Boolean(model.get("descending")) });
  const columns = () => /** @type {Column[]} */ (model.get("columns") || []);
  let fitted = new Map(); // column key -> px: the user's widths, the rest fitted to the pane
  const widthOf = (/** @type {Column} */ c) => widths.get(c.key) ?? fitted.get(c.key) ?? defaultWidth(c);
  const headerHeight = () => thead.getBoundingClientRect().height || ROW_HEIGHT;

  function applyWidths() {
    const cols = columns();
    fitted = fitWidths(cols, root.clientWidth, widths);
    colgroup.replaceChildren(...cols.map((c) => {
      const col = h("col", "");
      col.style.width = `${widthOf(c)}px`;
      return col;
    }));
    table.style.width = `${cols.reduce((sum, c) => sum + widthOf(c), 0)}px`;
  }

  /** Drag the right edge of a header to resize its column. @param {Column} column @param {HTMLElement} grip */
  function makeResizable(column, grip) {
    grip.addEventListener("pointerdown", (/** @type {PointerEvent} */ e) => {
      e.preventDefault();
      e.stopPropagation();
      const x0 = e.clientX, w0 = widthOf(column);
      grip.setPointerCapture(e.pointerId);
      const move = (/** @type {PointerEvent} */ m) => {
        widths.set(column.key, resized(w0, m.clientX - x0));
        applyWidths();
      };
      const up = () => {
        grip.removeEventListener("pointermove", move);
        grip.removeEventListener("pointerup", up);
      };
      grip.addEventListener("pointermove", move);
      grip.addEventListener("pointerup", up);
    });
    grip.addEventListener("click", (e) => e.stopPropagation());
  }

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
      const grip = h("span", "fxviz-tv-grip");
      grip.title = `Drag to resize ${column.label}`;
      makeResizable(column, grip);
      th.append(button, grip);
      tr.append(th);
    }
    thead.replaceChildren(tr);
    applyWidths();
  }

  /** @param {Row} row @param {Column[]} cols @param {number} i */
  function rowElement(row, cols, i) {
    const tr = h("tr", "fxviz-tv-row");
    tr.dataset.index = String(i);
    if (row.name === model.get("selected")) tr.classList.add("fxviz-tv-selected");
    for (const column of cols) {
      const text = formatCell(row[column.key], column);
      const td = h("td", column.numeric ? "fxviz-tv-num" : "", text);
      if (text) td.title = text; // the whole text when the cell shows an ellipsis
      tr.append(td);
    }
    return tr;
  }

  /** Put the rows under the viewport in the DOM, between two spacers. @param {boolean} force */
  function renderWindow(force) {
    const range = visibleRange(root.scrollTop, root.clientHeight, ROW_HEIGHT, sorted.length);
    if (!force && range.start === drawn.start && range.end === drawn.end) return;
    drawn = range;
    const cols = columns();
    const spacer = (/** @type {number} */ rows) => {
      const tr = h("tr", "fxviz-tv-spacer");
      const td = /** @type {HTMLTableCellElement} */ (h("td", ""));
      td.colSpan = Math.max(1, cols.length);
      td.style.height = `${rows * ROW_HEIGHT}px`;
      tr.append(td);
      return tr;
    };
    const trs = [];
    for (let i = range.start; i < range.end; i++) trs.push(rowElement(sorted[i], cols, i));
    tbody.replaceChildren(spacer(range.start), ...trs, spacer(sorted.length - range.end));
  }

  /** The rows (`data`), decoded once per value the kernel sends, with the `extra` columns written in. */
  function currentRows() {
    const value = model.get("data"), extra = model.get("extra");
    if (value !== sentRows) [sentRows, sentExtra, rows, extraKeys] = [value, undefined, rowsOf(value), []];
    if (extra !== sentExtra) {
      sentExtra = extra;
      extraKeys = addColumns(rows, extra, extraKeys);
    }
    return rows;
  }

  function renderBody() {
    const { sort_by, descending } = state();
    const hide = model.get("hide") || "";
    const { shown, hidden } = shownRows(currentRows(), hide);
    note.textContent = hiddenNote(hidden, hide);
    sorted = sortRows(shown, sort_by, descending);
    position = new Map(sorted.map((row, i) => [String(row.name), i]));
    renderWindow(true);
  }

  /** Mark the selected row; scroll the table (never the page) to it. @param {boolean} scroll */
  function markSelected(scroll) {
    const i = position.get(model.get("selected"));
    if (scroll && i !== undefined && root.clientHeight > 0) {
      root.scrollTop = scrollToRow(i, root.scrollTop, root.clientHeight, ROW_HEIGHT, headerHeight());
    }
    renderWindow(true);
  }

  tbody.addEventListener("click", (/** @type {MouseEvent} */ e) => {
    const tr = e.target instanceof Element ? e.target.closest("tr.fxviz-tv-row") : null;
    const row = tr instanceof HTMLElement ? sorted[Number(tr.dataset.index)] : undefined;
    if (!row) return;
    model.set("selected", String(row.name));
    model.save_changes();
  });
  root.addEventListener("scroll", () => renderWindow(false), { passive: true });
  // Rendered before it is attached, the table has no height yet: draw once it has one.
  let room = -1; // the width the columns were fitted to
  const resize = new ResizeObserver(() => {
    if (root.clientWidth !== room) {
      room = root.clientWidth;
      applyWidths();
    }
    renderWindow(false);
  });
  resize.observe(root);

  // Rows and their extra columns often change together (a new step): sort once.
  let queued = false;
  const onRows = () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      renderBody();
    });
  };
  const onSort = () => { renderHead(); renderBody(); };
  const onSelected = () => markSelected(true);
  model.on("change:data", onRows);
  model.on("change:extra", onRows);
  model.on("change:hide", onRows);
  model.on("change:columns", onSort);
  model.on("change:sort_by", onSort);
  model.on("change:descending", onSort);
  model.on("change:selected", onSelected);
  onSort();
  markSelected(true);
  return () => {
    model.off("change:data", onRows);
    model.off("change:extra", onRows);
    model.off("change:hide", onRows);
    model.off("change:columns", onSort);
    model.off("change:sort_by", onSort);
    model.off("change:descending", onSort);
    model.off("change:selected", onSelected);
    resize.disconnect();
    el.replaceChildren();
  };
}

export default { render };

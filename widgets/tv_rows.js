// @ts-check
// The node table's rows: sorted, hidden, their cells' text. Pure; shared by the widget and the report page.

/** @typedef {Record<string, string | number | boolean | null>} Row  rows carry a unique `name` */
/** @typedef {{key: string, label: string, numeric?: boolean, digits?: number, significant?: number, width?: number}} Column */

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

// One collator for every comparison: localeCompare with options makes one per call
// (sorting 100k names under node: 1.6 s, with this 0.07 s).
const NATURAL = new Intl.Collator(undefined, { numeric: true });

/** Numbers by value, text naturally ("relu_2" before "relu_10").
 * @param {string | number} x @param {string | number} y */
export function compareValues(x, y) {
  if (typeof x === "number" && typeof y === "number") return x - y;
  return NATURAL.compare(String(x), String(y));
}

/**
 * The rows shown: those whose `hide` value is not true ("": all), and how many are not.
 * @param {Row[]} rows @param {string} hide @returns {{shown: Row[], hidden: number}}
 */
export function shownRows(rows, hide) {
  if (!hide) return { shown: rows, hidden: 0 };
  const shown = rows.filter((row) => !row[hide]);
  return { shown, hidden: rows.length - shown.length };
}

/** The line under the rows when some are hidden ("" when none). @param {number} hidden @param {string} hide */
export function hiddenNote(hidden, hide) {
  if (!hidden) return "";
  const what = hide === "weight" ? (hidden === 1 ? "weight" : "weights") : `rows (${hide})`;
  return `${hidden.toLocaleString("en-US")} ${what} not listed` +
    (hide === "weight" ? ": the graph's Weights button shows them here and in the graph" : "");
}

/** Display text of a cell. @param {unknown} value @param {Column} column */
export function formatCell(value, column) {
  if (isMissing(value)) return "";
  if (typeof value === "number" && column.numeric) {
    if (column.significant) return value === 0 ? "0" : value.toPrecision(column.significant);
    const digits = column.digits ?? 0;
    return value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  }
  return String(value);
}


// @ts-check
/**
 * Records as the kernel sends them, column by column (fxviz.widgets.table_view.rows_to_json):
 * `{n, keys, columns}`, each key once; a column is its values, or `{values, codes}`
 * (few distinct values: an index into them per record), or `{values: [v]}` (the same
 * value in every record). Shared by the node table and the graph view. Pure.
 */

/** @typedef {Record<string, any>} Row */
/** @typedef {{values: unknown[], codes?: number[]}} Coded */
/** @typedef {{n?: number, keys: string[], columns: Array<unknown[] | Coded>}} ColumnWise */

/**
 * Whether `value` is the column-wise form (a plain record map never has array `keys`).
 * @param {unknown} value @returns {value is ColumnWise}
 */
export function isColumnWise(value) {
  const v = /** @type {any} */ (value);
  return !!v && !Array.isArray(v) && Array.isArray(v.keys) && Array.isArray(v.columns);
}

/**
 * The records of `value`: the column-wise form decoded, or a plain list of rows as it is.
 * @param {Row[] | ColumnWise | null | undefined} value
 * @returns {Row[]}
 */
export function rowsOf(value) {
  if (!value) return [];
  if (Array.isArray(value)) return value;
  const { keys } = value;
  const first = value.columns.find((c) => Array.isArray(c) || Array.isArray(c.codes));
  const n = value.n ?? (first ? (Array.isArray(first) ? first.length : /** @type {number[]} */ (first.codes).length) : 0);
  const columns = value.columns.map((c) => {
    if (Array.isArray(c)) return c;
    const codes = c.codes;
    return codes ? codes.map((i) => c.values[i]) : new Array(n).fill(c.values[0]);
  });
  const rows = new Array(n);
  for (let i = 0; i < n; i++) {
    /** @type {Row} */
    const row = {};
    for (let k = 0; k < keys.length; k++) row[keys[k]] = columns[k][i];
    rows[i] = row;
  }
  return rows;
}

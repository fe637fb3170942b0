// @ts-check
/**
 * Records as the kernel sends them, column by column (fxviz.widgets.columns, which
 * says the forms: `{n, keys, columns}`; a column is its values, `{values: [v]}`,
 * `{start}`, `{values, codes}`, `{values, runs}` or `{stems, codes, steps}`). Shared by
 * the node table and the graph view. Pure.
 */

/** @typedef {Record<string, any>} Row */
/** @typedef {{values?: unknown[], codes?: number[], runs?: number[], start?: number, stems?: string[],
 *   steps?: Array<number | null>}} Coded */
/** @typedef {{n: number, keys: string[], columns: Array<unknown[] | Coded>}} ColumnWise */

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
  const { keys, n } = value;
  const columns = value.columns.map((c) => valuesOf(c, n));
  const rows = new Array(n);
  for (let i = 0; i < n; i++) {
    /** @type {Row} */
    const row = {};
    for (let k = 0; k < keys.length; k++) row[keys[k]] = columns[k][i];
    rows[i] = row;
  }
  return rows;
}

/**
 * One column's `n` values.
 * @param {unknown[] | Coded} c @param {number} n
 * @returns {unknown[]}
 */
export function valuesOf(c, n) {
  if (Array.isArray(c)) return c;
  if (c.start !== undefined) return Array.from({ length: n }, (_, i) => /** @type {number} */ (c.start) + i);
  if (c.stems && c.codes && c.steps) {
    const { stems, codes, steps } = c;
    /** @type {number[]} */
    const last = new Array(stems.length).fill(0);
    return codes.map((code, i) => {
      const step = steps[i];
      if (step === null) return stems[code];
      last[code] += step;
      return stems[code] + last[code];
    });
  }
  const values = c.values || [];
  if (c.runs) {
    const out = [];
    for (let i = 0; i < c.runs.length; i += 2) {
      for (let k = 0; k < c.runs[i + 1]; k++) out.push(values[c.runs[i]]);
    }
    return out;
  }
  return c.codes ? c.codes.map((i) => values[i]) : new Array(n).fill(values[0]);
}

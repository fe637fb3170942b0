// @ts-check
/**
 * Records as the kernel sends them, column by column (fxviz.present.columns, which
 * says the forms: `{n, keys, columns}`; a column is its values, `{values: [v]}`,
 * `{start}`, `{values, codes}`, `{values, runs}` or `{stems, codes, steps}`), as that
 * form's JSON text (what the widgets send: one string, parsed here) or parsed already
 * (the HTML report). Shared by the node table and the graph view. Pure.
 */

/** @typedef {Record<string, any>} Row */
/** @typedef {{values?: unknown[], codes?: number[], runs?: number[], start?: number, stems?: string[],
 *   steps?: Array<number | null>}} Coded */
/** @typedef {{n: number, keys: string[], columns: Array<unknown[] | Coded>}} ColumnWise */

/**
 * `value` parsed when it is JSON text ("" is nothing), else as it is.
 * @param {unknown} value @returns {unknown}
 */
export function parsed(value) {
  if (typeof value !== "string") return value;
  return value ? JSON.parse(value) : null;
}

/**
 * Whether `value` is the column-wise form (a plain record map never has array `keys`).
 * @param {unknown} value @returns {value is ColumnWise}
 */
export function isColumnWise(value) {
  const v = /** @type {any} */ (value);
  return !!v && !Array.isArray(v) && Array.isArray(v.keys) && Array.isArray(v.columns);
}

/**
 * The records of `sent`: the column-wise form (or its JSON text) decoded, or a plain
 * list of rows as it is.
 * @param {Row[] | ColumnWise | string | null | undefined} sent
 * @returns {Row[]}
 */
export function rowsOf(sent) {
  const value = /** @type {Row[] | ColumnWise | null} */ (parsed(sent));
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
 * The columns of `sent` (column-wise, or its JSON text) by key, when it has `n` rows;
 * else none (e.g. times of an earlier step's nodes).
 * @param {unknown} sent @param {number} n
 * @returns {Map<string, unknown[]>}
 */
export function columnsOf(sent, n) {
  const value = parsed(sent);
  if (!isColumnWise(value) || value.n !== n) return new Map();
  return new Map(value.keys.map((key, k) => [key, valuesOf(value.columns[k], n)]));
}

/**
 * Write the columns of `sent` (for the same rows, in the same order: e.g. times measured
 * later) into `rows`, dropping the keys an earlier call wrote (`previous`) that `sent`
 * lacks. Returns the keys written.
 * @param {Row[]} rows @param {unknown} sent @param {string[]} [previous]
 * @returns {string[]}
 */
export function addColumns(rows, sent, previous = []) {
  const columns = columnsOf(sent, rows.length);
  for (const key of previous) {
    if (!columns.has(key)) for (const row of rows) delete row[key];
  }
  for (const [key, values] of columns) {
    for (let i = 0; i < rows.length; i++) rows[i][key] = values[i];
  }
  return [...columns.keys()];
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

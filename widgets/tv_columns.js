// @ts-check
/**
 * Node table, its columns' widths: pure helpers (no DOM), imported by table_view.js.
 */

/** @typedef {import("./table_view.js").Column} Column */

const MIN_WIDTH = 36;
const TEXT_MIN = 72; // a text column fitted to a narrow pane: a name's first characters still show

/** A column's starting width in px: its own, else by kind. @param {Column} column */
export function defaultWidth(column) {
  if (column.width) return column.width;
  if (column.key === "index") return 76;
  return column.numeric ? 96 : 150;
}

/**
 * Every column's width in px: the user's (`given`, from resizing) where set, numbers
 * and the index at their own; text columns share what is left of `room` (the pane's
 * width), never below TEXT_MIN, so a narrow pane (Notebook 7) still shows the time
 * and share columns, and a wide one has no empty stretch. `room` 0 (not laid out yet):
 * the defaults.
 * @param {Column[]} columns @param {number} room @param {Map<string, number>} given
 * @returns {Map<string, number>}
 */
export function fitWidths(columns, room, given) {
  const out = new Map();
  const free = columns.filter((c) => !given.has(c.key) && !c.numeric && c.key !== "index" && !c.width);
  for (const c of columns) if (!free.includes(c)) out.set(c.key, given.get(c.key) ?? defaultWidth(c));
  const taken = [...out.values()].reduce((a, b) => a + b, 0);
  const share = room > 0 && free.length ? Math.floor((room - taken - 2) / free.length) : 0;
  for (const c of free) out.set(c.key, share ? Math.max(TEXT_MIN, share) : defaultWidth(c));
  return out;
}

/** A width after dragging its edge by `dx` px, never below a legible minimum.
 * @param {number} width @param {number} dx */
export function resized(width, dx) {
  return Math.max(MIN_WIDTH, Math.round(width + dx));
}

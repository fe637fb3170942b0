// @ts-check
/**
 * Graph view, search: the matches of the search box marked in the drawing, Enter and
 * Shift+Enter step through them (each shown legibly and selected), Escape clears.
 */
import { countText, nextIndex, searchNodes } from "./gv_graph.js";
import { markedElements, setClass } from "./gv_select.js";

/** @typedef {import("./gv_graph.js").Nodes} Nodes */

/**
 * What a key in the search box does with `count` matches and the match at `cursor`:
 * clear the box, go to match `cursor` (wrapping), or nothing.
 * @param {string} key @param {boolean} shift @param {number} count @param {number} cursor
 * @returns {{clear: true} | {cursor: number} | null}
 */
export function searchKey(key, shift, count, cursor) {
  if (key === "Escape") return { clear: true };
  if (key === "Enter" && count) return { cursor: nextIndex(cursor, count, shift ? -1 : 1) };
  return null;
}

/**
 * @param {{search: HTMLInputElement, count: HTMLElement, root: HTMLElement, canvas: HTMLElement,
 *   nodes: () => Nodes, elementFor: (name: string) => Element | null,
 *   reveal: (name: string) => void,
 *   on: (target: EventTarget, type: string, fn: (e: any) => void) => void}} parts
 */
export function createSearch({ search, count, root, canvas, nodes, elementFor, reveal, on }) {
  /** @type {string[]} */
  let matches = [];
  let cursor = -1;

  /** Mark the matches drawn now and say how many there are. */
  function mark() {
    const query = search.value;
    root.classList.toggle("fxviz-gv-searching", query.trim() !== "");
    setClass(canvas.querySelectorAll(".fxviz-match"), markedElements(matches, elementFor), "fxviz-match");
    count.textContent = countText(matches.length, cursor, query);
  }

  /** Search again (new text, or new nodes), from the first match. */
  function run() {
    matches = searchNodes(nodes(), search.value);
    cursor = -1;
    mark();
  }

  on(search, "input", run);
  on(search, "keydown", (/** @type {KeyboardEvent} */ e) => {
    const action = searchKey(e.key, e.shiftKey, matches.length, cursor);
    if (!action) return;
    if ("clear" in action) {
      search.value = "";
      run();
      return;
    }
    e.preventDefault();
    cursor = action.cursor;
    reveal(matches[cursor]);
    mark();
  });

  return { run };
}

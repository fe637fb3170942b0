// @ts-check
/**
 * Graph view, selection: the selected node marked and kept in view, the marked nodes
 * (`marked`: e.g. those fused into the selected node's kernel) outlined, and the keyboard
 * on the focused viewport (Escape clears, the arrow keys walk to inputs and users).
 */
import { walkStep } from "./gv_graph.js";

/** @typedef {import("./gv_graph.js").Nodes} Nodes */
/** @typedef {import("./gv_graph.js").Walk} Walk */

/**
 * Give class `cls` to exactly the `wanted` elements: taken from those of `holders` (the
 * elements that have it now) not wanted, given to the rest.
 * @param {Iterable<Element>} holders @param {Iterable<Element>} wanted @param {string} cls
 */
export function setClass(holders, wanted, cls) {
  const keep = new Set(wanted);
  for (const e of holders) if (!keep.has(e)) e.classList.remove(cls);
  for (const e of keep) e.classList.add(cls);
}

/**
 * The drawn elements standing for FX nodes `names`, each once: a node's own box, or the
 * collapsed box hiding it (several marked nodes inside give it once); nodes not drawn
 * give nothing.
 * @param {string[]} names @param {(name: string) => Element | null} elementFor
 * @returns {Set<Element>}
 */
export function markedElements(names, elementFor) {
  const found = new Set();
  for (const name of names) {
    const e = elementFor(name);
    if (e) found.add(e);
  }
  return found;
}

/**
 * What a key on the viewport does: clear the selection, move it (`walkStep`'s answer,
 * null at a dead end), or nothing (`undefined`: the key is not ours).
 * @param {{key: string, ctrlKey: boolean, metaKey: boolean, altKey: boolean}} e
 * @param {Nodes} nodes @param {string} selected @param {Walk | null} walk
 * @returns {{clear: true} | {step: ReturnType<typeof walkStep>} | undefined}
 */
export function viewportKey(e, nodes, selected, walk) {
  if (e.ctrlKey || e.metaKey || e.altKey) return undefined;
  if (e.key === "Escape" && selected) return { clear: true };
  if (!e.key.startsWith("Arrow")) return undefined;
  return { step: walkStep(nodes, selected, e.key, walk) };
}

/**
 * @param {{canvas: HTMLElement, viewport: HTMLElement, selectionButton: HTMLButtonElement,
 *   selected: () => string, marked: () => string[], nodes: () => Nodes, send: (changes: Record<string, unknown>) => void,
 *   elementFor: (name: string) => Element | null, show: (e: Element) => void,
 *   revealWhenDrawn: (name: string) => void,
 *   on: (target: EventTarget, type: string, fn: (e: any) => void) => void}} parts
 */
export function createSelection({ canvas, viewport, selectionButton, selected, marked, nodes, send, elementFor,
  show, revealWhenDrawn, on }) {
  /** The last Up/Down arrow move, for Left/Right. @type {Walk | null} */
  let walk = null;

  /** Mark the selected node in the drawing; returns its element (null: not drawn). */
  function mark() {
    const e = elementFor(selected());
    setClass(canvas.querySelectorAll(".fxviz-selected"), e ? [e] : [], "fxviz-selected");
    selectionButton.disabled = !e;
    return e;
  }

  /** Outline the marked nodes (or the collapsed boxes hiding them) in the drawing. */
  function outline() {
    setClass(canvas.querySelectorAll(".fxviz-marked"), markedElements(marked(), elementFor), "fxviz-marked");
  }

  /** A new selection (from the kernel too: a table row, a revealed node): marked and
   * shown at a legible size. */
  function follow() {
    const e = mark();
    if (e) show(e);
  }

  /** Select `name` from the front-end and show it legibly, now or (hidden in a
   * collapsed box) once the kernel's new drawing shows it. @param {string} name */
  function reveal(name) {
    if (name !== selected()) send({ selected: name });
    revealWhenDrawn(name);
    follow();
  }

  on(viewport, "keydown", (/** @type {KeyboardEvent} */ e) => {
    const action = viewportKey(e, nodes(), selected() || "", walk);
    if (!action) return;
    if ("clear" in action) {
      send({ selected: "" });
      return;
    }
    e.preventDefault(); // arrows move through the graph, not the page
    if (!action.step) return;
    walk = action.step.walk;
    reveal(action.step.name);
  });

  return { mark, outline, follow, reveal };
}

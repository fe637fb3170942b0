// @ts-check
/**
 * Graph view, selection: the selected node marked and kept in view, and the keyboard
 * on the focused viewport (Escape clears, the arrow keys walk to inputs and users).
 */
import { walkStep } from "./gv_graph.js";

/** @typedef {import("./gv_graph.js").Nodes} Nodes */
/** @typedef {import("./gv_graph.js").Walk} Walk */

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
 *   selected: () => string, nodes: () => Nodes, send: (changes: Record<string, unknown>) => void,
 *   elementFor: (name: string) => Element | null, show: (e: Element) => void,
 *   revealWhenDrawn: (name: string) => void,
 *   on: (target: EventTarget, type: string, fn: (e: any) => void) => void}} parts
 */
export function createSelection({ canvas, viewport, selectionButton, selected, nodes, send, elementFor, show,
  revealWhenDrawn, on }) {
  /** The last Up/Down arrow move, for Left/Right. @type {Walk | null} */
  let walk = null;

  /** Mark the selected node in the drawing; returns its element (null: not drawn). */
  function mark() {
    for (const e of canvas.querySelectorAll(".fxviz-selected")) e.classList.remove("fxviz-selected");
    const e = elementFor(selected());
    if (e) e.classList.add("fxviz-selected");
    selectionButton.disabled = !e;
    return e;
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

  return { mark, follow, reveal };
}

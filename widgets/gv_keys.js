// @ts-check
/**
 * Graph view, undo and redo: Ctrl/⌘+Z and Ctrl/⌘+Shift+Z anywhere in the workbench
 * that holds the view (the Explorer), sent to Python; never in a text field, where
 * they undo typing.
 */

/**
 * "undo", "redo" or null for a key event.
 * @param {{key: string, ctrlKey: boolean, metaKey: boolean, altKey: boolean, shiftKey: boolean,
 *   target: EventTarget | null}} e
 * @returns {"undo" | "redo" | null}
 */
export function undoAction(e) {
  if (!(e.ctrlKey || e.metaKey) || e.altKey || e.key.toLowerCase() !== "z") return null;
  const t = /** @type {any} */ (e.target);
  if (t && typeof t.closest === "function" && t.closest("input, textarea, select, [contenteditable]")) return null;
  return e.shiftKey ? "redo" : "undo";
}

/**
 * Listen for the keys on the workbench around `el` (or the view's `root` alone). The
 * Explorer puts the view in its tree after rendering it: `attach` again once attached.
 * @param {{el: HTMLElement, root: HTMLElement, send: (content: {action: string}) => void,
 *   signal: AbortSignal}} parts
 */
export function createUndoKeys({ el, root, send, signal }) {
  /** @param {KeyboardEvent} e */
  const onKey = (e) => {
    const action = undoAction(e);
    if (!action) return;
    e.preventDefault();
    e.stopPropagation(); // JupyterLab would undo a cell operation
    send({ action });
  };
  let target = /** @type {Element | null} */ (null);
  function attach() {
    const next = el.closest(".fxviz-explorer") || root;
    if (next === target) return;
    target?.removeEventListener("keydown", /** @type {any} */ (onKey));
    target = next;
    // Focusable, so a click anywhere in the workbench gives it the keys.
    if (next !== root && !next.hasAttribute("tabindex")) next.setAttribute("tabindex", "-1");
    next.addEventListener("keydown", /** @type {any} */ (onKey), { signal });
  }
  return { attach };
}

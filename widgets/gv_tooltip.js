// @ts-check
/**
 * Graph view, the hover tooltip: which drawn element is under the pointer, and the
 * tooltip box placed beside the pointer inside the viewport.
 */

/** @typedef {import("./gv_dom.js").Maker} Maker */
/** @typedef {import("./gv_labels.js").Tooltip} Tooltip */

/**
 * @param {{tip: HTMLElement, canvas: HTMLElement, h: Maker, width: () => number,
 *   height: () => number, describe: (id: string) => Tooltip | null}} parts
 */
export function createTooltip({ tip, canvas, h, width, height, describe }) {
  let hoverId = "";

  /** The id of the node, or of the cluster whose label, under event target `t`.
   * @param {EventTarget | null} t */
  function hitId(t) {
    if (!(t instanceof Element) || !canvas.contains(t)) return null;
    const node = t.closest("g.node");
    if (node) return node.id;
    const label = t.closest("text");
    const parent = label && label.parentElement;
    return parent && parent.matches("g.cluster") ? parent.id : null;
  }

  function hide() {
    tip.hidden = true;
    hoverId = "";
  }

  /** @param {string} id @param {number} px @param {number} py */
  function show(id, px, py) {
    if (id !== hoverId) {
      const t = describe(id);
      if (!t) return hide();
      hoverId = id;
      const rows = t.rows.flatMap(([k, v]) => [h("span", "fxviz-gv-tip-key", k),
        h("span", "fxviz-gv-tip-value", v)]);
      const grid = h("div", "fxviz-gv-tip-rows");
      grid.append(...rows);
      tip.replaceChildren(h("div", "fxviz-gv-tip-title", t.title), grid);
      if (t.hint) tip.append(h("div", "fxviz-gv-tip-hint", t.hint));
      tip.hidden = false;
    }
    const x = Math.min(px + 14, width() - tip.offsetWidth - 4);
    const y = py + 18 + tip.offsetHeight > height() ? py - tip.offsetHeight - 10 : py + 18;
    tip.style.left = `${Math.max(4, x)}px`;
    tip.style.top = `${Math.max(4, y)}px`;
  }

  return { hitId, show, hide };
}

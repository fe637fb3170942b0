// @ts-check
/**
 * fxviz code view: HTML (pygments output or a diff table, escaped by the kernel)
 * in its own scroller, scrolled to the marked line (`.hll`), else to its start. It scrolls only its own
 * box, never the page (no scrollIntoView), and waits for a size when it is
 * rendered in a hidden tab.
 */

/**
 * The scrollTop that puts a line `top` px below the content's start a third of the
 * way down a `height` px scroller (context above it, more below).
 * @param {number} top @param {number} height
 */
export function scrollTopFor(top, height) {
  return Math.max(0, Math.round(top - height / 3));
}

/** @param {{model: any, el: HTMLElement}} ctx */
function render({ model, el }) {
  const box = el.ownerDocument.createElement("div");
  box.className = "fxviz-code-scroll";
  el.replaceChildren(box);
  let pending = false;

  function scrollToMark() {
    const mark = box.querySelector(".hll");
    pending = Boolean(mark) && box.clientHeight === 0;
    if (!mark) box.scrollTop = 0; // a diff, or no node selected: its start (a part of a long one starts at the node)
    if (!mark || pending) return;
    const top = mark.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
    box.scrollTop = scrollTopFor(top, box.clientHeight);
  }

  function show() {
    box.innerHTML = model.get("html"); // pygments/fxviz output: every code string escaped
    scrollToMark();
  }

  const resize = new ResizeObserver(() => {
    if (pending) scrollToMark();
  });
  resize.observe(box);
  model.on("change:html", show);
  show();
  return () => {
    model.off("change:html", show);
    resize.disconnect();
    el.replaceChildren();
  };
}

export default { render };

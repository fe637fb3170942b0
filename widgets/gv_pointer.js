// @ts-check
/**
 * Graph view, the pointer: the wheel zooms (with Ctrl/⌘ or once the view has focus,
 * else a hint says how), a press and drag pans, hovering shows the tooltip, a click
 * selects a node or (un)collapses a module (which then stays still on screen).
 */
import { DRAG_THRESHOLD, wheelAction, wheelFactor } from "./gv_view.js";
import { applyClick } from "./gv_graph.js";

/** @typedef {import("./gv_view.js").View} View */
/** @typedef {import("./gv_view.js").Point} Point */
/** @typedef {import("./gv_graph.js").Elements} Elements */
/** @typedef {{x: number, y: number, view: View, id: number}} Press */

/** How long the "how to zoom" hint stays (ms). */
const HINT_MS = 1500;

/**
 * The pan of a press moved to `p`: null while it is still a click (not past
 * DRAG_THRESHOLD, unless already dragging), else the view dragged along.
 * @param {Press} press @param {Point} p @param {boolean} dragging
 * @returns {View | null}
 */
export function dragView(press, p, dragging) {
  const dx = p.x - press.x;
  const dy = p.y - press.y;
  if (!dragging && Math.hypot(dx, dy) <= DRAG_THRESHOLD) return null;
  return { k: press.view.k, x: press.view.x + dx, y: press.view.y + dy };
}

/**
 * @param {{doc: Document, root: HTMLElement, viewport: HTMLElement, hint: HTMLElement,
 *   stage: ReturnType<typeof import("./gv_stage.js").createStage>,
 *   tooltip: ReturnType<typeof import("./gv_tooltip.js").createTooltip>,
 *   elements: () => Elements, selected: () => string, collapsed: () => string[],
 *   send: (changes: Record<string, unknown>) => void,
 *   on: (target: EventTarget, type: string, fn: (e: any) => void) => void}} parts
 * @returns {() => void} stops the hint's timer
 */
export function attachPointer({ doc, root, viewport, hint, stage, tooltip, elements, selected, collapsed, send, on }) {
  /** @type {Press | null} */
  let press = null;
  let dragging = false;
  let suppressClick = false;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let hintTimer;

  /** @param {MouseEvent} e @returns {Point} */
  const local = (e) => {
    const r = viewport.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  };

  on(viewport, "wheel", (/** @type {WheelEvent} */ e) => {
    if (wheelAction(e, doc.activeElement === viewport) === "page") {
      // Left to the page (the notebook scrolls); say once how to zoom instead.
      hint.hidden = false;
      clearTimeout(hintTimer);
      hintTimer = setTimeout(() => { hint.hidden = true; }, HINT_MS);
      return;
    }
    e.preventDefault();
    tooltip.hide();
    hint.hidden = true;
    const p = local(e);
    stage.zoomBy(wheelFactor(e.deltaY, e.deltaMode), p.x, p.y);
  });

  const release = (/** @type {PointerEvent} */ e) => {
    if (!press || press.id !== e.pointerId) return;
    if (dragging) {
      suppressClick = true;
      root.classList.remove("fxviz-gv-dragging");
    }
    press = null;
    dragging = false;
  };
  on(viewport, "pointerdown", (/** @type {PointerEvent} */ e) => {
    suppressClick = false;
    if (e.button !== 0) return;
    viewport.focus({ preventScroll: true });
    press = { ...local(e), view: stage.view(), id: e.pointerId };
  });

  on(viewport, "pointermove", (/** @type {PointerEvent} */ e) => {
    const p = local(e);
    // A press released outside the widget never sent us its pointerup.
    if (press && !(e.buttons & 1)) release(e);
    if (press && press.id === e.pointerId) {
      const v = dragView(press, p, dragging);
      if (v && !dragging) {
        dragging = true;
        viewport.setPointerCapture(e.pointerId);
        root.classList.add("fxviz-gv-dragging");
        tooltip.hide();
      }
      if (v) {
        stage.setView(v);
        return;
      }
    }
    const id = tooltip.hitId(e.target);
    if (id) tooltip.show(id, p.x, p.y);
    else tooltip.hide();
  });

  on(viewport, "pointerup", release);
  on(viewport, "pointercancel", release);
  on(viewport, "pointerleave", tooltip.hide);

  on(viewport, "click", (/** @type {MouseEvent} */ e) => {
    if (suppressClick) {
      suppressClick = false;
      return;
    }
    const id = tooltip.hitId(e.target);
    const changes = applyClick(elements(), id, { selected: selected() || "", collapsed: collapsed() });
    if (!changes) return;
    const target = id && stage.byId(id);
    if (changes.collapsed && id && target) stage.anchorModule(elements()[id].name, target);
    send(changes);
  });

  return () => clearTimeout(hintTimer);
}

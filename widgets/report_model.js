// @ts-check
/**
 * The report page's stand-in for anywidget's model (see report_host.js), and the pure
 * rules of its expand/collapse focus. Touches no `document`: `node --test` imports it.
 */

/**
 * anywidget's model as the graph view uses it, with Backbone's semantics: `set` fires
 * `change:key` only when the value changes; `update` (the "kernel") assigns every key
 * before firing any event; `save_changes` hands what the view set to `onSave`.
 */
export class HostModel {
  /** @param {Record<string, any>} state @param {(changes: Record<string, any>) => void} onSave */
  constructor(state, onSave) {
    /** @type {Record<string, any>} */
    this.state = { ...state };
    this.onSave = onSave;
    /** @type {Map<string, Set<Function>>} */
    this.listeners = new Map();
    /** @type {Record<string, any>} */
    this.pending = {};
  }

  /** @param {string} key */
  get(key) {
    return this.state[key];
  }

  /** @param {string} key @param {any} value */
  set(key, value) {
    if (same(this.state[key], value)) return;
    this.state[key] = value;
    this.pending[key] = value;
    this.emit(key);
  }

  save_changes() {
    const changes = this.pending;
    this.pending = {};
    this.onSave(changes);
  }

  send() {}

  /** @param {string} event @param {Function} cb */
  on(event, cb) {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event)?.add(cb);
  }

  /** @param {string} event @param {Function} cb */
  off(event, cb) {
    this.listeners.get(event)?.delete(cb);
  }

  /** A change from the "kernel". @param {Record<string, any>} changes */
  update(changes) {
    const changed = Object.keys(changes).filter((k) => !same(this.state[k], changes[k]));
    Object.assign(this.state, changes);
    for (const key of changed) this.emit(key);
  }

  /** @param {string} key */
  emit(key) {
    for (const cb of [...(this.listeners.get(`change:${key}`) || [])]) cb(this, this.state[key]);
  }
}

/** @param {any} a @param {any} b */
function same(a, b) {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

/** `a.b.c` -> `a.b`; `a` -> `` (the top level). @param {string} path */
export function parentPath(path) {
  const i = path.lastIndexOf(".");
  return i < 0 ? "" : path.slice(0, i);
}

/**
 * The box around box `path`: the step's own word where its path misleads (`parents`, the
 * report's `boxes.parent`: a call inside a loop's iteration box), else the dotted parent.
 * @param {string} path @param {Record<string, string | null>} [parents]
 * @returns {string}
 */
export function parentBox(path, parents) {
  return parents && Object.hasOwn(parents, path) ? parents[path] || "" : parentPath(path);
}

/**
 * The focus a click in the graph view asks for (see fxviz/report/views.py): expanding
 * a module focuses it, collapsing one focuses the box around it; null when nothing changed.
 * @param {string[]} before @param {string[]} after @param {Record<string, string | null>} [parents]
 * @returns {string | null}
 */
export function focusAfter(before, after, parents) {
  const opened = before.find((p) => !after.includes(p));
  if (opened !== undefined) return opened;
  const closed = after.find((p) => !before.includes(p));
  return closed === undefined ? null : parentBox(closed, parents);
}

/** What the status line says about a focus; `labels`: the boxes' own words where a path is not one
 * (a call, an iteration: the report's `boxes.label`). @param {string} focus @param {Record<string, string>} [labels] */
export function focusText(focus, labels) {
  if (focus === "*") return "drawn as the Explorer first shows it";
  if (focus === "") return "top level: click a module to open it";
  const shown = labels && Object.hasOwn(labels, focus) ? labels[focus] : focus;  // "block #2", not "block@1"
  return `open: ${shown} (other modules collapsed)`;
}

/**
 * The focus that draws a node of module `path` (a search hit or a selected node inside
 * a collapsed module is opened, as the Explorer opens it): its module's own, else the
 * deepest ancestor's the report drew (`views`: it keeps a limited number); null for none.
 * @param {string} path @param {Record<string, unknown>} views @param {Record<string, string | null>} [parents]
 * @returns {string | null}
 */
export function revealFocus(path, views, parents) {
  for (let p = path; p; p = parentBox(p, parents)) if (Object.hasOwn(views, p)) return p;
  return null;
}

// @ts-check
/**
 * A stand-in for the model anywidget hands to `render`: get/set/on/off/save_changes
 * with Backbone's semantics where the widget relies on them (a `set` fires
 * `change:key` only when the value really changes; a kernel update assigns every
 * key before firing any event).
 */
export class FakeModel {
  /** @param {Record<string, any>} state */
  constructor(state) {
    /** @type {Record<string, any>} */
    this.state = structuredClone(state);
    /** @type {Map<string, Set<Function>>} */
    this.listeners = new Map();
    /** What the front-end sent to "Python", one entry per save_changes(). */
    /** @type {Array<Record<string, any>>} */
    this.saved = [];
    /** @type {Record<string, any>} */
    this.pending = {};
    /** Custom messages the front-end sent (anywidget's model.send). */
    /** @type {any[]} */
    this.sent = [];
  }

  /** @param {string} key */
  get(key) {
    return this.state[key];
  }

  /** @param {string} key @param {any} value */
  set(key, value) {
    if (JSON.stringify(this.state[key]) === JSON.stringify(value)) return;
    this.state[key] = value;
    this.pending[key] = value;
    this.emit(key);
  }

  save_changes() {
    this.saved.push(this.pending);
    this.pending = {};
  }

  /** @param {any} content */
  send(content) {
    this.sent.push(content);
  }

  /** @param {string} event @param {Function} cb */
  on(event, cb) {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event)?.add(cb);
  }

  /** @param {string} event @param {Function} cb */
  off(event, cb) {
    this.listeners.get(event)?.delete(cb);
  }

  /** An update from the kernel. @param {Record<string, any>} changes */
  fromPython(changes) {
    const changed = Object.keys(changes).filter(
      (k) => JSON.stringify(this.state[k]) !== JSON.stringify(changes[k]));
    Object.assign(this.state, structuredClone(changes));
    for (const key of changed) this.emit(key);
  }

  listenerCount() {
    let n = 0;
    for (const set of this.listeners.values()) n += set.size;
    return n;
  }

  /** @param {string} key */
  emit(key) {
    for (const cb of [...(this.listeners.get(`change:${key}`) || [])]) cb(this, this.state[key]);
  }
}

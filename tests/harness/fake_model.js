// @ts-check
/**
 * A stand-in for the model anywidget hands to `render`: the report's in-page model
 * (widgets/report_model.js, Backbone's semantics where the widget relies on them), which
 * records what the front-end sent to "Python" and takes updates from the "kernel".
 */
import { HostModel } from "../../widgets/report_model.js";

export class FakeModel extends HostModel {
  /** @param {Record<string, any>} state */
  constructor(state) {
    super(structuredClone(state), (changes) => this.saved.push(changes));
    /** What the front-end sent to "Python", one entry per save_changes(). */
    /** @type {Array<Record<string, any>>} */
    this.saved = [];
    /** Custom messages the front-end sent (anywidget's model.send). */
    /** @type {any[]} */
    this.sent = [];
  }

  /** @param {any} content */
  send(content) {
    this.sent.push(content);
  }

  /** An update from the kernel. @param {Record<string, any>} changes */
  fromPython(changes) {
    this.update(structuredClone(changes));
  }

  listenerCount() {
    let n = 0;
    for (const set of this.listeners.values()) n += set.size;
    return n;
  }
}

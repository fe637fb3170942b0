// @ts-check
/**
 * Graph view, the graph's names: search, which SVG element draws a node, what a
 * click changes, collapsing modules and walking to inputs/users. Pure.
 */

/** @typedef {{kind: "node" | "cluster" | "collapsed" | "stub", name: string}} ElementRecord */
/** @typedef {Record<string, ElementRecord>} Elements */
/** @typedef {{op?: string, target?: string, module_path?: string, shape?: string, weights?: string, time?: string,
 *   inputs?: string[], users?: string[]}} NodeRecord */
/** @typedef {Record<string, NodeRecord>} Nodes */
/** @typedef {{nodeIds: Map<string, string>, modules: Array<[string, string]>}} ElementIndex */
/** @typedef {{selected?: string, collapsed?: string[]}} Changes */

import { addColumns, isColumnWise, parsed, valuesOf } from "./columns.js";

/**
 * The node records as the view uses them, from what the kernel sends (column-wise or
 * its JSON text, a `name` column, `inputs` as how many places back each input is; users
 * derived from the inputs) or a plain name -> record map (kept as it is).
 * @param {Nodes | import("./columns.js").ColumnWise | string | null | undefined} sent
 * @returns {Nodes}
 */
export function nodesOf(sent) {
  const value = parsed(sent);
  if (!isColumnWise(value)) return /** @type {Nodes} */ (value || {});
  const { keys, n } = value;
  const columns = value.columns.map((c) => valuesOf(c, n));
  const names = /** @type {string[]} */ (columns[keys.indexOf("name")]);
  const back = /** @type {Array<number[] | null> | undefined} */ (columns[keys.indexOf("inputs")]);
  const fields = keys.map((key, k) => /** @type {[string, unknown[]]} */ ([key, columns[k]]))
    .filter(([key]) => key !== "name" && key !== "inputs");
  // Records by position first: filling inputs/users through the name-keyed object
  // would look up 100k names twice per edge (twice the time at 100k nodes).
  /** @type {NodeRecord[]} */
  const records = new Array(n);
  for (let i = 0; i < n; i++) {
    /** @type {Record<string, unknown>} */
    const record = {};
    for (const [key, column] of fields) record[key] = column[i];
    if (back) [record.inputs, record.users] = [[], []];
    records[i] = record;
  }
  for (let i = 0; back && i < n; i++) {
    for (const places of back[i] || []) {
      const input = i - places;
      if (input < 0 || input >= n) continue;
      /** @type {string[]} */ (records[i].inputs).push(names[input]);
      /** @type {string[]} */ (records[input].users).push(names[i]);
    }
  }
  /** @type {Nodes} */
  const nodes = {};
  for (let i = 0; i < n; i++) nodes[names[i]] = records[i];
  return nodes;
}

/**
 * Each record's tooltip `time` ("12.5 µs (3.1 %)") from `sent`: the nodes' `time_us` and
 * `share` columns in the order of `nodes` (FX names are identifiers: an object keeps
 * them in that order); times of other nodes, or none, clear the times written before
 * (a record sent with its own `time` keeps it).
 * @param {Nodes} nodes @param {unknown} sent
 */
export function addTimes(nodes, sent) {
  /** @type {Array<Record<string, any>>} */
  const records = Object.values(nodes);
  const had = records.some((r) => "time_us" in r);
  if (!addColumns(records, sent, ["time_us", "share"]).length && !had) return;
  for (const r of records) {
    r.time = typeof r.time_us === "number" ? `${r.time_us.toFixed(1)} µs (${(r.share ?? 0).toFixed(1)} %)` : undefined;
  }
}

/**
 * What else a search word finds, by the names the graph's targets use: the one table of
 * search aliases (the report runs this module too). Words and terms are compared without
 * case or underscores, so "layernorm" finds layer_norm and LayerNorm without an entry.
 * Attention is one node (scaled_dot_product_attention, a flash or flex kernel) that
 * computes a softmax and two matmuls: those words find it.
 * @type {Record<string, string[]>}
 */
export const SEARCH_ALIASES = (() => {
  const attention = ["scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention",
    "flex_attention", "multiheadattention"];
  const matmul = ["matmul", "mm", "linear", "einsum", ...attention];
  return {
    attention: ["attn", "sdpa"], // the kernels' names all hold "attention"
    attn: ["attention", "sdpa"],
    sdpa: attention,
    softmax: attention,
    matmul, mm: matmul, gemm: matmul,
    normalization: ["norm"], convolution: ["conv"],
    linear: ["addmm"], dense: ["linear", "addmm"], fc: ["linear", "addmm"],
    concat: ["cat"],
  };
})();

/** @param {string} text */
const plain = (text) => text.toLowerCase().replaceAll("_", "");

/** @type {WeakMap<Nodes, string[]>} */
const searchTexts = new WeakMap();

/**
 * Each node's name, target and module path as searched ({@link plain}, one string per node,
 * in graph order), made once per set of nodes: each key typed searches them all again.
 * @param {Nodes} nodes
 */
function searchTextsOf(nodes) {
  let texts = searchTexts.get(nodes);
  if (!texts) {
    texts = Object.keys(nodes).map((name) => {
      const r = nodes[name] || {};
      return [name, r.target, r.module_path].filter((s) => typeof s === "string").map(plain).join("\n");
    });
    searchTexts.set(nodes, texts);
  }
  return texts;
}

/**
 * FX node names (in graph order) whose name, target or module path contains `query`,
 * or one of its {@link SEARCH_ALIASES}, ignoring case and underscores. An empty query
 * matches nothing.
 * @param {Nodes} nodes @param {string} query
 * @returns {string[]}
 */
export function searchNodes(nodes, query) {
  const q = plain(query.trim());
  if (!q) return [];
  const terms = [q, ...(Object.hasOwn(SEARCH_ALIASES, q) ? SEARCH_ALIASES[q] : []).map(plain)];
  const texts = searchTextsOf(nodes);
  return Object.keys(nodes).filter((_, i) => terms.some((t) => texts[i].includes(t)));
}

/**
 * The next position when cycling through `n` matches; -1 means "none yet".
 * @param {number} cursor @param {number} n @param {1 | -1} step
 */
export function nextIndex(cursor, n, step) {
  if (n === 0) return -1;
  if (cursor < 0) return step > 0 ? 0 : n - 1;
  return (cursor + step + n) % n;
}

/** @param {number} n @param {number} cursor @param {string} query */
export function countText(n, cursor, query) {
  if (!query.trim()) return "";
  if (n === 0) return "no match";
  if (cursor >= 0) return `${cursor + 1} / ${n}`;
  return n === 1 ? "1 match" : `${n} matches`;
}

/**
 * Lookup tables for `locate`: FX node name -> SVG id, and the collapsed modules
 * (path, id), longest path first so the innermost collapsed module wins.
 * @param {Elements} elements
 * @returns {ElementIndex}
 */
export function indexElements(elements) {
  const nodeIds = new Map();
  /** @type {Array<[string, string]>} */
  const modules = [];
  for (const [id, rec] of Object.entries(elements || {})) {
    if (rec.kind === "node") nodeIds.set(rec.name, id);
    else if (rec.kind === "collapsed") modules.push([rec.name, id]);
  }
  modules.sort((a, b) => b[0].length - a[0].length);
  return { nodeIds, modules };
}

/**
 * The SVG id that stands for FX node `name`: its own node, or the summary node
 * of the collapsed module that hides it; null when it is not drawn.
 * @param {ElementIndex} index @param {Nodes} nodes @param {string} name
 * @returns {string | null}
 */
export function locate(index, nodes, name) {
  if (!name) return null;
  const own = index.nodeIds.get(name);
  if (own) return own;
  const path = nodes[name]?.module_path;
  if (typeof path !== "string") return null;
  for (const [module, id] of index.modules) {
    if (path === module || path.startsWith(module + ".")) return id;
  }
  return null;
}

/**
 * The id of the element that draws module `path` (collapsed or as a cluster).
 * @param {Elements} elements @param {string} path
 * @returns {string | null}
 */
export function moduleElementId(elements, path) {
  for (const [id, rec] of Object.entries(elements || {})) {
    if ((rec.kind === "collapsed" || rec.kind === "cluster") && rec.name === path) return id;
  }
  return null;
}

/**
 * The traitlet changes a click on SVG element `id` asks for (`null` id: the
 * background). A node or a stub selects (a stub its producer), a cluster label
 * collapses its module, a collapsed module expands; null when nothing changes.
 * @param {Elements} elements @param {string | null} id
 * @param {{selected: string, collapsed: string[]}} state
 * @returns {Changes | null}
 */
export function applyClick(elements, id, state) {
  if (id === null) return state.selected ? { selected: "" } : null;
  const rec = elements[id];
  if (!rec) return null;
  switch (rec.kind) {
    case "node":
    case "stub":
      return rec.name === state.selected ? null : { selected: rec.name };
    case "cluster":
      return state.collapsed.includes(rec.name) ? null : { collapsed: [...state.collapsed, rec.name] };
    case "collapsed":
      return { collapsed: state.collapsed.filter((p) => p !== rec.name) };
    default:
      return null;
  }
}

/**
 * The outermost modules drawn (as clusters or collapsed): collapsing them all
 * leaves one box per top-level module.
 * @param {Elements} elements
 * @returns {string[]}
 */
export function collapseAll(elements) {
  const paths = new Set(Object.values(elements || {})
    .filter((r) => r.kind === "cluster" || r.kind === "collapsed").map((r) => r.name));
  const hasAncestor = (/** @type {string} */ p) => {
    for (let i = p.lastIndexOf("."); i > 0; i = p.lastIndexOf(".", i - 1)) {
      if (paths.has(p.slice(0, i))) return true;
    }
    return false;
  };
  return [...paths].filter((p) => !hasAncestor(p)).sort();
}

/**
 * `collapsed` with each module opened one level: a collapsed module is replaced by
 * its direct submodules (from the nodes' module paths), which stay collapsed. Paths
 * that are not modules drawn as boxes are ignored by the renderer.
 * @param {string[]} collapsed @param {Nodes} nodes
 * @returns {string[]}
 */
export function expandOneLevel(collapsed, nodes) {
  const open = new Set(collapsed);
  /** @type {Set<string>} */
  const next = new Set();
  for (const rec of Object.values(nodes || {})) {
    const path = rec.module_path || "";
    for (const top of open) {
      if (!path.startsWith(top + ".")) continue;
      const seg = path.slice(top.length + 1).split(".")[0];
      next.add(`${top}.${seg}`);
    }
  }
  return [...next].sort();
}

/** @typedef {{from: string, names: string[], at: number}} Walk */

/**
 * Arrow-key walk through the graph from the selected node `name`: Up goes to its
 * first input, Down to its first user; Left/Right step through the other inputs
 * (or users) of the node the last Up/Down came from.
 * @param {Nodes} nodes @param {string} name @param {string} key
 * @param {Walk | null} walk the previous Up/Down move
 * @returns {{name: string, walk: Walk | null} | null} null when there is nowhere to go
 */
export function walkStep(nodes, name, key, walk) {
  const rec = nodes[name];
  if (!rec) return null;
  if (key === "ArrowUp" || key === "ArrowDown") {
    const names = ((key === "ArrowUp" ? rec.inputs : rec.users) || []).filter((n) => n in nodes);
    return names.length ? { name: names[0], walk: { from: name, names, at: 0 } } : null;
  }
  if ((key === "ArrowLeft" || key === "ArrowRight") && walk && walk.names[walk.at] === name) {
    if (walk.names.length < 2) return null;
    const at = (walk.at + (key === "ArrowRight" ? 1 : walk.names.length - 1)) % walk.names.length;
    return { name: walk.names[at], walk: { ...walk, at } };
  }
  return null;
}

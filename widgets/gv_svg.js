// @ts-check
/**
 * Graph view, SVG hygiene: what of a parsed Graphviz SVG may enter the page.
 */

export const SVG_NS = "http://www.w3.org/2000/svg";
/** Everything Graphviz emits; anything else (script, foreignObject, style, use,
 * image, animate/set, non-SVG namespaces) is dropped. */
const SVG_ALLOWED = new Set(["svg", "g", "title", "desc", "polygon", "polyline", "ellipse",
  "circle", "path", "text", "tspan", "a", "defs", "linearGradient", "radialGradient", "stop",
  "rect", "line"]);

/**
 * Defensive cleaning of a parsed SVG before it enters the page. The core already
 * escapes user text; this is insurance against a bug there: it removes elements
 * Graphviz never writes, event-handler attributes and non-fragment links.
 * @param {Element} root the <svg> element
 * @returns {number} how many elements and attributes were removed
 */
export function sanitizeSvg(root) {
  let removed = 0;
  for (const e of [root, ...root.querySelectorAll("*")]) {
    if (e !== root && (e.namespaceURI !== SVG_NS || !SVG_ALLOWED.has(e.localName))) {
      e.remove();
      removed += 1;
      continue;
    }
    for (const a of [...e.attributes]) {
      const isLink = a.localName === "href" && !a.value.trim().startsWith("#");
      if (isLink || /^on/i.test(a.localName)) {
        e.removeAttributeNode(a);
        removed += 1;
      }
    }
  }
  return removed;
}

/**
 * Graphviz SVG text as an element of `doc`, sanitised, without <title>s (the view's
 * tooltip replaces the browser's), sized so one SVG unit is one CSS pixel at zoom 1
 * (world and screen maths then agree); null when the text is not an SVG.
 * @param {Document} doc @param {string} text
 * @returns {SVGSVGElement | null}
 */
export function importSvg(doc, text) {
  const parsed = new DOMParser().parseFromString(text, "image/svg+xml");
  const parsedRoot = parsed.documentElement;
  if (parsedRoot.namespaceURI !== SVG_NS || parsedRoot.localName !== "svg"
      || parsed.getElementsByTagName("parsererror").length) {
    return null;
  }
  sanitizeSvg(parsedRoot);
  for (const t of parsedRoot.querySelectorAll("title")) t.remove();
  const svg = /** @type {SVGSVGElement} */ (doc.importNode(parsedRoot, true));
  const vb = svg.viewBox.baseVal;
  const w = vb && vb.width > 0 ? vb.width : parseFloat(svg.getAttribute("width") || "0");
  const hgt = vb && vb.height > 0 ? vb.height : parseFloat(svg.getAttribute("height") || "0");
  svg.setAttribute("width", String(w));
  svg.setAttribute("height", String(hgt));
  return svg;
}

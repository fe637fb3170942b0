"""The graph view's front-end in headless Chromium, without Jupyter.

tests/harness/index.html renders widgets/graph_view.js against a fake anywidget model
(tests/harness/fake_model.js); these tests drive it like a person and read back what
the widget sent to "Python" (`harness.model.saved`). Screenshots of the light and dark
themes go to test-artifacts/.
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fxviz.draw import colour_modes

pytest.importorskip("playwright.sync_api")

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and shutil.which("dot")),
    reason="needs Debian's chromium and graphviz (`make system-test` installs both)",
)

# --- fixtures: a small graph drawn by Graphviz with the ids of docs/CONTRACTS.md ----

NODES = {
    "x": {"op": "placeholder", "target": "x", "module_path": "", "shape": "1×8", "time": ""},
    "encoder_0": {"op": "call_module", "target": "encoder.0 (Linear)", "module_path": "encoder.0",
                  "shape": "1×16", "time": "4.1 µs · 31 %"},
    "encoder_1": {"op": "call_module", "target": "encoder.1 (ReLU)", "module_path": "encoder.1",
                  "shape": "1×16", "time": "1.2 µs · 9 %"},
    "head_0": {"op": "call_module", "target": "head.0 (Linear)", "module_path": "head.0",
               "shape": "1×8", "time": "3.3 µs · 25 %"},
    "relu": {"op": "call_function", "target": "torch.relu", "module_path": "head",
             "shape": "1×8", "time": "1.0 µs · 8 %"},
    "add": {"op": "call_function", "target": "operator.add", "module_path": "head",
            "shape": "1×8", "time": "0.9 µs · 7 %"},
    "output": {"op": "output", "target": "output", "module_path": "", "shape": "", "time": ""},
}
FILLS = {"placeholder": "#c7f0d8", "output": "#c7f0d8", "call_module": "#cfe2ff",
         "call_function": "#fde8b6"}
LEGEND = [{"label": op, "color": c} for op, c in FILLS.items()]


def _node(name: str) -> str:
    rec = NODES[name]
    shape = "ellipse" if rec["op"] in ("placeholder", "output") else "box"
    return (f'"{name}" [id="fx-{name}" shape={shape} fillcolor="{FILLS[rec["op"]]}" '
            f'label="{name}\\n{rec["shape"]}"];')


def graph(collapsed: tuple[str, ...] = (), fills: dict[str, str] | None = None) -> dict:
    """The traitlet state for the fixture graph, optionally with `encoder` collapsed;
    `fills` overrides node colours (a re-render in another colour mode)."""
    elements = {"fx-x": {"kind": "node", "name": "x"}}
    enc = ["encoder_0", "encoder_1"]
    if "encoder" in collapsed:
        elements["fxco-3"] = {"kind": "collapsed", "name": "encoder"}
        encoder = '"enc" [id="fxco-3" shape=box3d fillcolor="#f3f4f6" label="encoder\\n2 nodes"];'
        first, last = "enc", "enc"
    else:
        elements["fxcl-1"] = {"kind": "cluster", "name": "encoder"}
        elements.update({f"fx-{n}": {"kind": "node", "name": n} for n in enc})
        encoder = ('subgraph cluster_1 { id="fxcl-1"; label="encoder"; '
                   + " ".join(_node(n) for n in enc) + "}")
        first, last = "encoder_0", "encoder_1"
    head = ["head_0", "relu", "add"]
    elements["fxcl-2"] = {"kind": "cluster", "name": "head"}
    elements.update({f"fx-{n}": {"kind": "node", "name": n} for n in head})
    elements["fxst-0"] = {"kind": "stub", "name": "x"}
    elements["fx-output"] = {"kind": "node", "name": "output"}
    dot = "\n".join([
        "digraph fxviz {",
        'graph [bgcolor="transparent" fontname="Helvetica" nodesep=0.25 ranksep=0.35];',
        'node [style="rounded,filled" fontname="Helvetica" fontsize=11 height=0.3];',
        _node("x"), encoder,
        'subgraph cluster_2 { id="fxcl-2"; label="head"; ' + " ".join(_node(n) for n in head)
        + ' "stub" [id="fxst-0" shape=plain style="" label="↳ x"]; }',
        _node("output"),
        f'"x" -> "{first}"; "{last}" -> "head_0" -> "relu" -> "add" -> "output"; "stub" -> "add";',
        "}",
    ])
    if fills:
        for name, color in fills.items():
            dot = re.sub(rf'(id="fx-{name}" shape=\w+ fillcolor=)"#\w+"', rf'\1"{color}"', dot)
    svg = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, check=True).stdout
    return {"svg": svg[svg.index("<svg"):], "elements": elements, "nodes": NODES,
            "legend": LEGEND, "collapsed": list(collapsed), "selected": "", "color_mode": "op",
            "color_modes": colour_modes.views(), "status": "7 nodes · step 0"}


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


@pytest.fixture(scope="session")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0),
                                functools.partial(_QuietHandler, directory=str(ROOT)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="session")
def browser(chromium):
    return chromium


@pytest.fixture
def page(browser, server):
    """The harness, loaded; fails the test on any JavaScript error in the page."""
    context = browser.new_context(viewport={"width": 900, "height": 720})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(f"{server}/tests/harness/index.html")
    pg.wait_for_selector("body[data-ready]", state="attached")
    yield pg
    context.close()
    assert errors == []


def mount(page, state: dict) -> None:
    page.evaluate("state => harness.mount(state)", state)
    page.wait_for_selector(".fxviz-gv-canvas svg")


def saved(page) -> list[dict]:
    return page.evaluate("harness.model.saved")


def transform(page) -> dict:
    """The pan/zoom applied to the canvas: {x, y, k}."""
    t = page.eval_on_selector(".fxviz-gv-canvas", "e => e.style.transform")
    x, y, k = map(float, re.findall(r"-?[\d.]+(?:e-?\d+)?", t))
    return {"x": x, "y": y, "k": k}


def box(page, selector: str) -> dict:
    return page.locator(selector).bounding_box()


def inside(inner: dict, outer: dict) -> bool:
    return (inner["x"] >= outer["x"] and inner["y"] >= outer["y"]
            and inner["x"] + inner["width"] <= outer["x"] + outer["width"]
            and inner["y"] + inner["height"] <= outer["y"] + outer["height"])


# --- tests -----------------------------------------------------------------------


def test_renders_graph_toolbar_and_legend(page):
    mount(page, graph())
    ids = page.eval_on_selector_all(".fxviz-gv-canvas g.node", "gs => gs.map(g => g.id)")
    assert set(ids) == {"fx-x", "fx-encoder_0", "fx-encoder_1", "fx-head_0", "fx-relu", "fx-add",
                        "fxst-0", "fx-output"}
    assert page.locator(".fxviz-gv-canvas g.cluster").count() == 2
    assert page.text_content(".fxviz-gv-status") == "7 nodes · step 0"
    colors = page.eval_on_selector_all(".fxviz-gv-swatch", "s => s.map(e => e.style.backgroundColor)")
    assert colors == ["rgb(199, 240, 216)", "rgb(199, 240, 216)", "rgb(207, 226, 255)",
                      "rgb(253, 232, 182)"]
    assert page.eval_on_selector(".fxviz-gv-select", "s => [...s.options].map(o => o.text)") == [
        "op kind", "time share", "FLOPs", "diff vs previous", "numeric error", "memory alive", "inductor kernel"]
    # Fitted on first render: the whole graph is in view.
    assert inside(box(page, ".fxviz-gv-canvas svg"), box(page, ".fxviz-gv-viewport"))
    # Our tooltip replaces the browser's native <title> one.
    assert page.locator(".fxviz-gv-canvas title").count() == 0
    # The legend is a strip below the drawing, not over it.
    legend, vp = box(page, ".fxviz-gv-legend"), box(page, ".fxviz-gv-viewport")
    assert legend["y"] >= vp["y"] + vp["height"] - 1


def _nodes_with_edges() -> dict:
    """NODES with inputs/users, as the Explorer sends them."""
    edges = [("x", "encoder_0"), ("encoder_0", "encoder_1"), ("encoder_1", "head_0"), ("head_0", "relu"),
             ("relu", "add"), ("x", "add"), ("add", "output")]
    nodes = {n: {**r, "inputs": [], "users": []} for n, r in NODES.items()}
    for a, b in edges:
        nodes[a]["users"].append(b)
        nodes[b]["inputs"].append(a)
    return nodes


def test_arrow_keys_walk_inputs_and_users_and_ctrl_z_asks_for_undo(page):
    mount(page, {**graph(), "nodes": _nodes_with_edges()})
    page.click("#fx-x")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")  # x's other user
    page.keyboard.press("ArrowUp")  # add's first input
    assert [s["selected"] for s in saved(page)] == ["x", "encoder_0", "add", "relu"]
    assert page.get_attribute("#fx-relu", "class") == "node fxviz-selected"
    page.keyboard.press("Escape")
    assert saved(page)[-1] == {"selected": ""}
    page.keyboard.press("Control+z")
    page.keyboard.press("Control+Shift+z")
    assert page.evaluate("harness.model.sent") == [{"action": "undo"}, {"action": "redo"}]
    page.click(".fxviz-gv-search")
    page.keyboard.press("Control+z")  # in a text field Ctrl+Z undoes typing
    assert len(page.evaluate("harness.model.sent")) == 2


def test_collapse_all_expand_level_and_expand_all(page):
    mount(page, graph())
    page.click("button[data-action=collapse-all]")
    assert saved(page)[-1] == {"collapsed": ["encoder", "head"]}
    page.evaluate("harness.model.fromPython({collapsed: ['encoder']})")
    page.click("button[data-action=expand-level]")
    assert saved(page)[-1] == {"collapsed": ["encoder.0", "encoder.1"]}
    page.click("button[data-action=expand-all]")
    assert saved(page)[-1] == {"collapsed": []}


def test_search_zooms_a_speck_to_a_legible_match(page):
    mount(page, graph())
    page.click(".fxviz-gv-viewport")
    for _ in range(20):
        page.mouse.wheel(0, 100)  # as far out as it goes
    page.fill(".fxviz-gv-search", "head_0")
    page.press(".fxviz-gv-search", "Enter")
    k = transform(page)["k"]
    assert k * 11 >= 11 - 1e-6, k  # names of 11 units at least 11 px tall
    assert inside(box(page, "#fx-head_0"), box(page, ".fxviz-gv-viewport"))


def test_a_new_drawing_keeps_the_zoom_and_the_centre_node_never_blank(page):
    mount(page, graph())
    for _ in range(3):
        page.click("button[data-action=in]")
    before = transform(page)
    vp = box(page, ".fxviz-gv-viewport")
    centre = page.evaluate("""vp => { const c = [vp.x + vp.width / 2, vp.y + vp.height / 2];
        let best = null, d = Infinity;
        for (const g of document.querySelectorAll('.fxviz-gv-canvas g.node[id^=fx-]')) {
          const r = g.getBoundingClientRect(); const dd = (r.x + r.width / 2 - c[0]) ** 2 + (r.y + r.height / 2 - c[1]) ** 2;
          if (dd < d) { d = dd; best = g.id; } }
        return best; }""", vp)
    was = box(page, f"#{centre}")
    # A different drawing (another step): the encoder collapsed, so the size changes.
    page.evaluate("s => harness.model.fromPython(s)", graph(collapsed=("encoder",)))
    page.wait_for_selector("#fxco-3")
    assert transform(page)["k"] == pytest.approx(before["k"])
    if page.locator(f"#{centre}").count():
        now = box(page, f"#{centre}")
        assert (now["x"], now["y"]) == pytest.approx((was["x"], was["y"]), abs=1.5)
    # Far off and then redrawn: the graph comes back into view at the same zoom.
    page.evaluate("harness.model.fromPython({svg: ''})")
    page.mouse.move(vp["x"] + 10, vp["y"] + 10)
    page.evaluate("s => harness.model.fromPython(s)", graph())
    svg = box(page, ".fxviz-gv-canvas svg")
    assert svg["x"] < vp["x"] + vp["width"] and svg["x"] + svg["width"] > vp["x"]
    assert svg["y"] < vp["y"] + vp["height"] and svg["y"] + svg["height"] > vp["y"]


def test_rendered_before_attached_fits_once_attached(page):
    page.evaluate("s => harness.mount(s, true)", graph())
    page.evaluate("harness.attach()")
    page.wait_for_function(
        "document.querySelector('.fxviz-gv-canvas').style.transform.includes('scale(')")
    assert inside(box(page, ".fxviz-gv-canvas svg"), box(page, ".fxviz-gv-viewport"))
    assert transform(page)["k"] > 1  # the small graph is shown at its natural size


def test_click_selects_node_and_stub_selects_its_producer(page):
    mount(page, graph())
    page.click("#fx-relu")
    assert saved(page) == [{"selected": "relu"}]
    assert page.get_attribute("#fx-relu", "class") == "node fxviz-selected"
    page.click("#fxst-0")
    assert saved(page)[-1] == {"selected": "x"}
    assert page.locator(".fxviz-selected").evaluate_all("es => es.map(e => e.id)") == ["fx-x"]


def test_click_on_background_clears_selection(page):
    mount(page, graph())
    page.click("#fx-add")
    vp = box(page, ".fxviz-gv-viewport")
    page.mouse.click(vp["x"] + vp["width"] - 5, vp["y"] + 5)
    assert saved(page) == [{"selected": "add"}, {"selected": ""}]
    assert page.locator(".fxviz-selected").count() == 0


def test_drag_pans_without_selecting(page):
    mount(page, graph())
    before = transform(page)
    b = box(page, "#fx-head_0")
    page.mouse.move(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2)
    page.mouse.down()
    page.mouse.move(b["x"] + 80, b["y"] + 50, steps=5)
    page.mouse.up()
    after = transform(page)
    assert (after["x"] - before["x"], after["y"] - before["y"]) == pytest.approx((80 - b["width"] / 2, 50 - b["height"] / 2), abs=1)
    assert saved(page) == []
    # The press after a drag is a click again.
    page.click("#fx-head_0")
    assert saved(page) == [{"selected": "head_0"}]


def _scale(page) -> str:
    return "parseFloat(document.querySelector('.fxviz-gv-canvas').style.transform.split('scale(')[1])"


def test_wheel_scrolls_the_page_until_ctrl_or_focus_then_zooms_around_the_cursor(page):
    mount(page, graph())
    page.evaluate("document.body.append(Object.assign(document.createElement('div'), {style: 'height: 3000px'}))")
    b = box(page, "#fx-relu")
    cx, cy = b["x"] + b["width"] / 2, b["y"] + b["height"] / 2
    k0 = transform(page)["k"]
    page.mouse.move(cx, cy)
    page.mouse.wheel(0, 120)
    page.wait_for_function("window.scrollY > 0")
    assert transform(page)["k"] == k0  # the page scrolled, the graph did not zoom
    assert page.is_visible(".fxviz-gv-hint")  # and it says how to zoom
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_function("window.scrollY === 0")
    page.keyboard.down("Control")
    page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    page.wait_for_function(f"{_scale(page)} > {k0}")
    after = box(page, "#fx-relu")
    assert after["width"] > b["width"] * 1.2
    assert (after["x"] + after["width"] / 2, after["y"] + after["height"] / 2) == pytest.approx((cx, cy), abs=1.5)
    assert page.evaluate("window.scrollY") == 0
    # Once the graph has focus (a click on it), the plain wheel zooms; never past the floor.
    page.mouse.click(cx + 200, cy + 150)
    k1 = transform(page)["k"]
    for _ in range(30):
        page.mouse.wheel(0, 100)
    page.wait_for_function(f"{_scale(page)} < {k1}")
    assert transform(page)["k"] >= 0.5  # clamped: the small graph stays legible-sized
    assert page.evaluate("window.scrollY") == 0


def test_toolbar_zoom_fit_and_zoom_to_selection(page):
    mount(page, graph())
    fitted = transform(page)
    page.click("button[data-action=in]")
    assert transform(page)["k"] == pytest.approx(fitted["k"] * 1.25)
    page.click("button[data-action=out]")
    page.click("button[data-action=out]")
    assert transform(page)["k"] == pytest.approx(fitted["k"] * 0.8)
    assert page.is_disabled("button[data-action=selection]")
    page.click("#fx-output")
    page.click("button[data-action=selection]")
    vp, node = box(page, ".fxviz-gv-viewport"), box(page, "#fx-output")
    assert transform(page)["k"] > fitted["k"]
    assert node["x"] + node["width"] / 2 == pytest.approx(vp["x"] + vp["width"] / 2, abs=2)
    assert node["y"] + node["height"] / 2 == pytest.approx(vp["y"] + vp["height"] / 2, abs=2)
    page.click("button[data-action=fit]")
    assert transform(page) == pytest.approx(fitted)


def test_selecting_from_python_highlights_and_scrolls_into_view(page):
    mount(page, graph())
    for _ in range(8):
        page.click("button[data-action=in]")
    vp = box(page, ".fxviz-gv-viewport")
    assert not inside(box(page, "#fx-x"), vp)
    page.evaluate("harness.model.fromPython({selected: 'x'})")
    assert page.get_attribute("#fx-x", "class") == "node fxviz-selected"
    assert inside(box(page, "#fx-x"), vp)
    assert saved(page) == []  # nothing echoed back to Python


def _ring(page, node_id: str) -> tuple[str, str]:
    """The stroke colour and dashes of a drawn node's outline."""
    stroke, dashes = page.eval_on_selector(f"#{node_id} > :is(polygon, path, ellipse)", "p => [getComputedStyle(p)"
                                           ".stroke, getComputedStyle(p).strokeDasharray]")
    return stroke, dashes


def _marked(page) -> set[str]:
    return set(page.locator(".fxviz-marked").evaluate_all("es => es.map(e => e.id)"))


def test_marked_nodes_are_outlined_apart_from_the_selection_and_through_a_collapsed_box(page):
    mount(page, {**graph(), "marked": ["encoder_1", "relu"], "selected": "relu"})
    assert _marked(page) == {"fx-encoder_1", "fx-relu"}
    marked, selected, plain = _ring(page, "fx-encoder_1"), _ring(page, "fx-relu"), _ring(page, "fx-head_0")
    assert marked == ("rgba(0, 0, 0, 0.87)", "6px, 3px")  # a dashed ring in the theme's ink
    assert selected == ("rgb(25, 118, 210)", "none")  # the selection's ring wins on a marked selected node
    assert plain[1] == "none" and plain[0] != marked[0]
    page.evaluate("s => harness.model.fromPython(s)", {**graph(collapsed=("encoder",)), "selected": "relu"})
    page.wait_for_selector("#fxco-3")
    assert _marked(page) == {"fxco-3", "fx-relu"}  # the box holding encoder_1
    page.evaluate("harness.model.fromPython({marked: ['encoder_0', 'encoder_1']})")
    assert _marked(page) == {"fxco-3"}
    page.evaluate("harness.model.fromPython({marked: []})")
    assert _marked(page) == set()
    assert saved(page) == []  # marks are Python's: nothing sent back


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_marked_screenshot_theme(page, theme):
    """Marked nodes beside a selected one, for a person to judge (test-artifacts/)."""
    page.evaluate(f"harness.setTheme('{theme}')")
    mount(page, {**graph(), "marked": ["head_0", "relu", "add"], "selected": "relu"})
    ink = {"light": "rgba(0, 0, 0, 0.87)", "dark": "rgba(255, 255, 255, 0.87)"}[theme]
    assert _ring(page, "fx-add")[0] == ink
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".fxviz-gv").screenshot(path=ARTIFACTS / f"graph_view_marked_{theme}.png")


def test_search_marks_counts_and_enter_cycles(page):
    mount(page, graph())
    page.fill(".fxviz-gv-search", "ENCODER")
    assert page.text_content(".fxviz-gv-count") == "2 matches"
    matched = page.locator(".fxviz-match").evaluate_all("es => es.map(e => e.id)")
    assert matched == ["fx-encoder_0", "fx-encoder_1"]
    assert "fxviz-gv-searching" in page.get_attribute(".fxviz-gv", "class")
    page.press(".fxviz-gv-search", "Enter")
    assert page.text_content(".fxviz-gv-count") == "1 / 2"
    page.press(".fxviz-gv-search", "Enter")
    page.press(".fxviz-gv-search", "Enter")  # wraps around
    assert [s["selected"] for s in saved(page)] == ["encoder_0", "encoder_1", "encoder_0"]
    page.fill(".fxviz-gv-search", "torch.relu")  # a target
    assert page.locator(".fxviz-match").evaluate_all("es => es.map(e => e.id)") == ["fx-relu"]
    page.fill(".fxviz-gv-search", "head")  # a module path
    assert page.text_content(".fxviz-gv-count") == "3 matches"
    page.press(".fxviz-gv-search", "Escape")
    assert page.text_content(".fxviz-gv-count") == ""
    assert page.locator(".fxviz-match").count() == 0


def test_search_inside_a_collapsed_module_marks_its_summary_node(page):
    mount(page, graph(collapsed=("encoder",)))
    page.fill(".fxviz-gv-search", "encoder_1")
    assert page.text_content(".fxviz-gv-count") == "1 match"
    assert page.locator(".fxviz-match").evaluate_all("es => es.map(e => e.id)") == ["fxco-3"]


def test_cluster_label_collapses_and_summary_node_expands(page):
    mount(page, graph())
    page.click("#fxcl-1 > text")
    assert saved(page) == [{"collapsed": ["encoder"]}]
    cluster = box(page, "#fxcl-1")
    page.evaluate("s => harness.model.fromPython(s)", graph(collapsed=("encoder",)))
    page.wait_for_selector("#fxco-3")
    # The summary node takes the cluster's place on screen: the view does not jump.
    summary = box(page, "#fxco-3")
    assert (summary["x"] + summary["width"] / 2, summary["y"] + summary["height"] / 2) == pytest.approx(
        (cluster["x"] + cluster["width"] / 2, cluster["y"] + cluster["height"] / 2), abs=1.5)
    page.click("#fxco-3")
    assert saved(page)[-1] == {"collapsed": []}


def test_new_svg_keeps_view_and_selection_when_selected_node_survives(page):
    mount(page, graph())
    page.click("button[data-action=in]")
    page.click("#fx-add")
    before = box(page, "#fx-add")
    page.evaluate("s => harness.model.fromPython(s)",
                  {**graph(collapsed=("encoder",)), "selected": "add"})
    page.wait_for_selector("#fxco-3")
    after = box(page, "#fx-add")
    assert page.get_attribute("#fx-add", "class") == "node fxviz-selected"
    assert (after["x"], after["y"]) == pytest.approx((before["x"], before["y"]), abs=1.5)


def test_colour_mode_select_and_legend_update(page):
    mount(page, graph())
    page.select_option(".fxviz-gv-select", "time")
    assert saved(page) == [{"color_mode": "time"}]
    heat = [{"label": "time 0", "color": "#ffffcc"}, {"label": "time 4.1", "color": "#bd0026"}]
    page.evaluate("s => harness.model.fromPython(s)",
                  {**graph(fills={"encoder_0": "#bd0026"}), "legend": heat, "color_mode": "time"})
    # The numbers alone; the heading names the mode and its unit.
    assert page.locator(".fxviz-gv-legend-label").all_text_contents() == ["0", "4.1"]
    assert page.text_content(".fxviz-gv-legend-title") == "time share (% of the step's node time)"
    # A fallback drawing (no timings yet) says what its legend really shows.
    page.evaluate("harness.model.fromPython({legend: %s, legend_mode: 'op'})" % LEGEND)
    assert page.text_content(".fxviz-gv-legend-title") == "op kind"
    assert page.get_attribute("#fx-encoder_0 path", "fill") == "#bd0026"


def test_tooltip_shows_node_record_as_text(page):
    state = graph()
    state["nodes"] = {**NODES, "relu": {**NODES["relu"], "target": '<img src=x onerror="window.pwned=1">'}}
    mount(page, state)
    page.hover("#fx-encoder_0")
    tip = page.locator(".fxviz-gv-tip")
    tip.wait_for(state="visible")
    assert tip.text_content() == ("encoder_0" "op" "call_module" "target" "encoder.0 (Linear)"
                                  "shape" "1×16" "time" "4.1 µs · 31 %" "module" "encoder.0")
    page.hover("#fx-relu")
    page.wait_for_function("document.querySelector('.fxviz-gv-tip-title').textContent === 'relu'")
    assert '<img src=x onerror="window.pwned=1">' in tip.text_content()
    assert page.locator(".fxviz-gv-tip img").count() == 0
    assert inside(tip.bounding_box(), box(page, ".fxviz-gv-viewport"))
    page.hover("#fxcl-2 > text")
    page.wait_for_function("document.querySelector('.fxviz-gv-tip-title').textContent === 'head'")
    assert "collapse" in tip.text_content()
    page.mouse.move(1, 1)
    tip.wait_for(state="hidden")
    assert page.evaluate("window.pwned") is None


def test_times_sent_apart_reach_the_tooltip(page):
    """Node records as the widget sends them (one JSON text, no times) and the times
    arriving later in their own small message: the tooltip shows each node's time;
    times of another step's nodes (another length) show none."""
    from fxviz.present.columns import Columns
    from fxviz.widgets.graph_view import GraphView

    view = GraphView(nodes={n: {k: v for k, v in r.items() if k != "time"} for n, r in NODES.items()})
    mount(page, {**graph(), "nodes": view.get_state(["nodes"])["nodes"]})
    tip = page.locator(".fxviz-gv-tip")
    page.hover("#fx-encoder_0")
    tip.wait_for(state="visible")
    assert "time" not in tip.text_content()
    n = len(NODES)
    view.times = Columns({"time_us": [None, 4.125, *[1.0] * (n - 2)], "share": [None, 31.04, *[9.0] * (n - 2)]})
    page.evaluate("s => harness.model.fromPython(s)", view.get_state(["times"]))
    page.mouse.move(1, 1)
    page.hover("#fx-encoder_0")
    page.wait_for_function("document.querySelector('.fxviz-gv-tip').textContent.includes('µs')")
    assert "time4.1 µs (31.0 %)module" in tip.text_content()
    view.times = Columns({"time_us": [1.0], "share": [100.0]})
    page.evaluate("s => harness.model.fromPython(s)", view.get_state(["times"]))
    page.mouse.move(1, 1)
    page.hover("#fx-encoder_0")
    page.wait_for_function("!document.querySelector('.fxviz-gv-tip').textContent.includes('µs')")


HOSTILE = """
<script>window.pwned = 'script'</script>
<g id="fx-evil" class="node" onclick="window.pwned='onclick'" onmouseover="window.pwned='hover'">
  <polygon points="0,0 30,0 30,-20 0,-20" fill="red"/><text x="2" y="-6">evil</text></g>
<foreignObject width="50" height="50"><img xmlns="http://www.w3.org/1999/xhtml" src="x"
  onerror="window.pwned='img'"/></foreignObject>
<a href="javascript:window.pwned='link'"><text x="40" y="-6">link</text></a>
<image href="x" onerror="window.pwned='image'"/>
<style>body { display: none }</style>
<set attributeName="onmouseover" to="window.pwned='set'"/>
"""


def test_hostile_svg_is_defused(page):
    state = graph()
    svg = state["svg"].replace("<svg ", '<svg onload="window.pwned=\'onload\'" ', 1)
    state["svg"] = svg.replace("</svg>", HOSTILE + "</svg>")
    state["elements"] = {**state["elements"], "fx-evil": {"kind": "node", "name": "evil"}}
    mount(page, state)
    canvas = page.locator(".fxviz-gv-canvas")
    assert canvas.locator("script, foreignObject, img, image, style, set").count() == 0
    handlers = canvas.evaluate(
        "c => [...c.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name))"
        ".filter(n => n.startsWith('on') || n === 'href')")
    assert handlers == []
    page.hover("#fx-evil")
    page.click("#fx-evil")
    page.click("text:has-text('link')")
    assert page.evaluate("window.pwned") is None
    assert page.is_visible("#fx-relu")  # the graph itself still renders


def test_invalid_or_empty_svg_shows_a_message(page):
    mount(page, graph())
    page.evaluate("harness.model.fromPython({svg: '<svg><g></svg>'})")
    assert "could not be displayed" in page.text_content(".fxviz-gv-message")
    assert page.locator(".fxviz-gv-canvas svg").count() == 0
    page.evaluate("harness.model.fromPython({svg: ''})")
    assert page.text_content(".fxviz-gv-message") == "No graph to show."


def test_cleanup_removes_listeners_and_empties_the_element(page):
    mount(page, graph())
    assert page.evaluate("harness.model.listenerCount()") > 0
    page.evaluate("""() => {
        window.kept = {viewport: document.querySelector('.fxviz-gv-viewport'),
                       canvas: document.querySelector('.fxviz-gv-canvas'),
                       search: document.querySelector('.fxviz-gv-search')};
        window.kept.before = window.kept.canvas.style.transform;
        harness.unmount();
    }""")
    assert page.evaluate("harness.model.listenerCount()") == 0
    assert page.evaluate("harness.el.childNodes.length") == 0
    fired = page.evaluate("""() => {
        const {viewport, canvas, search, before} = window.kept;
        viewport.dispatchEvent(new WheelEvent('wheel', {deltaY: -300, clientX: 5, clientY: 5, cancelable: true}));
        canvas.querySelector('#fx-relu').dispatchEvent(new MouseEvent('click', {bubbles: true}));
        search.value = 'relu';
        search.dispatchEvent(new Event('input'));
        harness.model.fromPython({svg: '', selected: 'x', status: 'changed'});
        return {moved: canvas.style.transform !== before, sent: harness.model.saved.length,
                marked: canvas.querySelectorAll('.fxviz-match').length};
    }""")
    assert fired == {"moved": False, "sent": 0, "marked": 0}
    assert page.evaluate("harness.el.childNodes.length") == 0


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_screenshot_theme(page, theme):
    """A picture for a person to judge (test-artifacts/), and the theme really applies."""
    page.evaluate(f"harness.setTheme('{theme}')")
    mount(page, graph())
    page.click("#fx-relu")
    page.fill(".fxviz-gv-search", "encoder")
    page.hover("#fx-head_0")
    page.locator(".fxviz-gv-tip").wait_for(state="visible")
    label = page.eval_on_selector("#fxcl-1 > text", "t => getComputedStyle(t).fill")
    background = page.eval_on_selector(".fxviz-gv", "e => getComputedStyle(e).backgroundColor")
    expected = {"light": ("rgba(0, 0, 0, 0.87)", "rgb(255, 255, 255)"),
                "dark": ("rgba(255, 255, 255, 0.87)", "rgb(17, 17, 17)")}[theme]
    assert (label, background) == expected
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".fxviz-gv").screenshot(path=ARTIFACTS / f"graph_view_{theme}.png")


def _real_state(gm, **render_options) -> dict:
    """Traitlet state from the core's own renderer (what the Explorer will send)."""
    import fxviz
    from fxviz.annotation.graph import shape_text
    from fxviz.draw.render import render

    drawn = render(gm, **render_options)
    nodes = {name: {"op": a["op"], "target": a["target"], "module_path": a["module_path"] or "",
                    "shape": shape_text(a.get("shape")), "time": ""}
             for name, a in fxviz.to_networkx(gm).nodes(data=True)}
    return {"svg": drawn.svg, "elements": drawn.elements, "legend": drawn.legend, "nodes": nodes,
            "collapsed": list(drawn.collapsed), "selected": "", "color_mode": "op",
            "color_modes": [colour_modes.mode("op").view()], "status": f"{len(nodes)} nodes"}


def test_real_rendered_model_round_trip(page):
    """A torch model drawn by fxviz.draw.render: select, search, collapse and expand."""
    import torch
    from torch import nn

    import fxviz

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 4), nn.Sigmoid()))
    x = torch.randn(2, 8)
    gm = fxviz.annotate(fxviz.trace(model, (x,)), (x,))
    mount(page, _real_state(gm))
    page.click("#fx-_1")
    assert saved(page) == [{"selected": "_1"}]
    page.hover("#fx-_2_0")
    page.wait_for_function("document.querySelector('.fxviz-gv-tip-title')?.textContent === '_2_0'")
    assert "2×4" in page.text_content(".fxviz-gv-tip")
    page.fill(".fxviz-gv-search", "linear")
    assert page.locator(".fxviz-match").evaluate_all("es => es.map(e => e.id)") == ["fx-_0", "fx-_2_0"]
    page.press(".fxviz-gv-search", "Escape")

    cluster = next(i for i, e in _real_state(gm)["elements"].items() if e["kind"] == "cluster")
    page.click(f"#{cluster} > text")
    assert saved(page)[-1] == {"collapsed": ["2"]}
    page.evaluate("s => harness.model.fromPython(s)", {**_real_state(gm, collapse=["2"]), "selected": "_1"})
    summary = page.locator(".fxviz-gv-canvas g.node[id^=fxco-]")
    summary.wait_for()
    page.evaluate("harness.model.fromPython({selected: '_2_1'})")  # hidden inside the collapsed module
    assert "fxviz-selected" in summary.get_attribute("class")
    summary.click()
    assert saved(page)[-1] == {"collapsed": []}


# --- orientation: the first view, Fit and the overview ------------------------------


def _chain_state(params: int = 40, chain: int = 40, nodes: bool = True) -> dict:
    """A graph wider and taller than the pane: a top row of `params` parameter boxes, each
    read by one op of a chain of `chain`, with the input `x` on the top row, read by the last
    op, so dot draws it at the right (as regnety's first view). `nodes=False`: the node
    records not sent yet (a large graph's first view)."""
    records = {"x": {"op": "placeholder", "target": "x", "module_path": "", "shape": "1×8", "time": ""}}
    records |= {f"p{i}": {"op": "get_attr", "target": f"w{i}", "module_path": "", "shape": "8", "time": ""}
                for i in range(params)}
    records |= {f"c{i}": {"op": "call_function", "target": "torch.add", "module_path": "", "shape": "1×8", "time": ""}
                for i in range(chain)}
    dot = "\n".join([
        "digraph fxviz {", 'graph [bgcolor="transparent" nodesep=0.25 ranksep=0.35];',
        'node [shape=box style="rounded,filled" fillcolor="#cfe2ff" fontname="Helvetica" fontsize=11 height=0.3];',
        " ".join(f'"{n}" [id="fx-{n}" label="{n}"];' for n in records if n != "x"),
        '{ rank=source; "x" [id="fx-x" shape=ellipse fillcolor="#c7f0d8" label="x"]; }',
        " ".join(f'"p{i}" -> "c{i % chain}";' for i in range(params)),
        " ".join(f'"c{i}" -> "c{i + 1}";' for i in range(chain - 1)), f'"x" -> "c{chain - 1}";', "}"])
    svg = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, check=True).stdout
    elements = {f"fx-{n}": {"kind": "node", "name": n} for n in records}
    return {"svg": svg[svg.index("<svg"):], "elements": elements, "nodes": records if nodes else {},
            "legend": LEGEND, "collapsed": [], "selected": "", "color_mode": "op",
            "color_modes": colour_modes.views(), "status": f"{len(records)} nodes"}


def _legible(page) -> bool:
    return transform(page)["k"] * 11 >= 11 - 1e-6  # names of 11 units at least 11 px tall


def test_first_view_and_fit_start_at_the_input_of_a_wide_graph(page):
    state = _chain_state()
    mount(page, state)
    vp = box(page, ".fxviz-gv-viewport")
    x = box(page, "#fx-x")
    assert inside(x, vp) and _legible(page)
    # Where the left edge would have been shown (the view before), x is off the pane.
    assert x["x"] - (box(page, ".fxviz-gv-canvas svg")["x"] - vp["x"]) + 16 > vp["x"] + vp["width"]
    page.mouse.move(vp["x"] + 200, vp["y"] + 300)
    page.mouse.down()
    page.mouse.move(vp["x"] + 500, vp["y"] + 50, steps=5)  # dragged away
    page.mouse.up()
    assert not inside(box(page, "#fx-x"), vp)
    page.click("button[data-action=fit]")
    assert inside(box(page, "#fx-x"), vp) and _legible(page)


def test_without_node_records_the_top_row_then_the_input_once_they_come(page):
    """A large graph's first drawing comes before its node records: the first view shows
    the top row (never an empty stretch); the records then move it to the input, unless
    the user has moved the view since."""
    state = _chain_state(nodes=False)
    mount(page, state)
    vp = box(page, ".fxviz-gv-viewport")
    drawn = page.eval_on_selector_all(".fxviz-gv-canvas g.node", "gs => gs.map(g => g.id)")
    seen = [i for i in drawn if inside(box(page, f"#{i}"), vp)]
    assert seen and all(box(page, f"#{i}")["y"] < vp["y"] + 80 for i in seen)  # the top row
    page.evaluate("s => harness.model.fromPython({nodes: s})", _chain_state()["nodes"])
    assert inside(box(page, "#fx-x"), vp)
    # Moved by the user: records arriving again leave the view alone.
    page.click("button[data-action=out]")
    moved = transform(page)
    page.evaluate("harness.model.fromPython({nodes: {}})")
    page.evaluate("s => harness.model.fromPython({nodes: s})", _chain_state()["nodes"])
    assert transform(page) == moved


def test_collapse_all_with_a_node_selected_then_fit_shows_the_start(page):
    mount(page, {**graph(), "nodes": _nodes_with_edges()})
    page.click("#fx-encoder_1")
    for _ in range(6):
        page.click("button[data-action=in]")
    page.evaluate("s => harness.model.fromPython(s)",
                  {**graph(collapsed=("encoder",)), "nodes": _nodes_with_edges(), "selected": "encoder_1"})
    page.wait_for_selector("#fxco-3")
    page.click("button[data-action=fit]")
    vp = box(page, ".fxviz-gv-viewport")
    assert inside(box(page, "#fx-x"), vp) and inside(box(page, "#fxco-3"), vp)


def test_overview_shows_where_you_are_and_goes_where_clicked(page):
    mount(page, graph())
    assert page.is_hidden(".fxviz-gv-minimap")  # the whole graph is on screen
    mount(page, _chain_state())
    overview, frame = ".fxviz-gv-minimap", ".fxviz-gv-minimap-frame"
    assert page.is_visible(overview)
    assert page.locator(f"{overview} [id]").count() == 0 and page.locator(f"{overview} text").count() == 0
    assert page.locator(".fxviz-gv-canvas #fx-x").count() == 1 and page.locator("#fx-x").count() == 1
    m, f = box(page, overview), box(page, frame)
    assert inside(f, m) and f["y"] == pytest.approx(m["y"] + 1, abs=2)  # at the top, where the view is
    vp = box(page, ".fxviz-gv-viewport")
    k = transform(page)["k"]
    # A click near its bottom left goes there, at the same zoom, selecting nothing.
    page.mouse.click(m["x"] + 6, m["y"] + m["height"] - 6)
    assert transform(page)["k"] == k and saved(page) == []
    last = box(page, "#fx-c39")
    assert last["y"] < vp["y"] + vp["height"] and last["y"] + last["height"] > vp["y"]
    f = box(page, frame)
    assert f["y"] + f["height"] == pytest.approx(m["y"] + m["height"] - 1, abs=2)
    # A drag on it follows the pointer; the graph's own drag (a pan) is not started.
    page.mouse.move(m["x"] + m["width"] / 2, m["y"] + m["height"] - 6)
    page.mouse.down()
    page.mouse.move(m["x"] + m["width"] / 2, m["y"] + m["height"] / 2, steps=4)
    page.mouse.up()
    f = box(page, frame)
    assert f["y"] + f["height"] / 2 == pytest.approx(m["y"] + m["height"] / 2, abs=3)
    assert "fxviz-gv-dragging" not in page.get_attribute(".fxviz-gv", "class") and saved(page) == []
    # A small graph zoomed into has one until Fit shows it whole again.
    mount(page, graph())
    for _ in range(6):
        page.click("button[data-action=in]")
    assert page.is_visible(overview)
    page.click("button[data-action=fit]")
    assert page.is_hidden(overview)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_overview_screenshot_theme(page, theme):
    """The overview at 1600x1000 in both themes, for a person to judge (test-artifacts/)."""
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.evaluate(f"harness.setTheme('{theme}'); document.getElementById('host').style.width = '1560px'")
    mount(page, _chain_state())
    page.eval_on_selector(".fxviz-gv-viewport", "v => { v.style.height = '820px'; }")
    page.wait_for_function("!document.querySelector('.fxviz-gv-minimap').hidden")
    background = page.eval_on_selector(".fxviz-gv-minimap", "e => getComputedStyle(e).backgroundColor")
    assert background == {"light": "rgb(255, 255, 255)", "dark": "rgb(33, 33, 33)"}[theme]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / f"graph_view_overview_{theme}.png")

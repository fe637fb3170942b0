"""A 30,000-node graph in headless Chromium, without Jupyter: the Explorer's graph view
and node table (tests/harness/explorer.html) over fake models, with this test playing
the kernel: what the page saves goes to a real Explorer, and every update message the
Explorer's widgets send goes back to the page, in order. The view opens, the table
scrolls through all rows, and a search hit inside a collapsed box is revealed,
selected and zoomed to a legible size. A screenshot goes to test-artifacts/scale-reveal.png."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("playwright.sync_api")
pytest.importorskip("anywidget")

import fxviz  # noqa: E402
from fxviz.widgets.explorer import Explorer  # noqa: E402
from test_explorer_scale import Stack  # noqa: E402
from test_graph_view import from_browser  # noqa: E402
from test_graph_view_browser import ARTIFACTS, pytestmark, server  # noqa: E402, F401  (fixture)

GRAPH_KEYS = ["svg", "elements", "legend", "nodes", "times", "selected", "collapsed", "color_mode", "color_modes", "status"]
TABLE_KEYS = ["columns", "data", "extra", "selected", "sort_by", "descending"]


@pytest.fixture(scope="module")
def explorer():
    session = fxviz.Session(Stack(1200, 24), (torch.randn(2, 4),))
    explorer = Explorer(session, profile="off")
    yield explorer
    explorer.close()


class Kernel:
    """Relays the Explorer's widget messages to the page and the page's saves back."""

    def __init__(self, explorer, page):
        self.explorer, self.page, self.outbox = explorer, page, []
        for name, widget in (("graph", explorer.graph), ("table", explorer.table)):
            widget._send = lambda msg, buffers=None, name=name: self.outbox.append((name, msg["state"]))

    def deliver(self) -> None:
        """The page's saves to Python; then Python's answers to the page."""
        saved = self.page.evaluate("harness.takeSaved()")
        for name, widget in (("graph", self.explorer.graph), ("table", self.explorer.table)):
            for state in saved[name]:
                from_browser(widget, **state)
        for name, state in self.outbox:
            self.page.evaluate("([name, state]) => harness.models[name].fromPython(state)", [name, state])
        self.outbox.clear()


def label_px(page, element_id: str) -> float:
    """The screen size (px) of the first label of an SVG element: font size times zoom."""
    return page.evaluate("""id => {
        const t = document.getElementById(id).querySelector("text[font-size]");
        return parseFloat(t.getAttribute("font-size")) * t.getBoundingClientRect().height / t.getBBox().height;
    }""", element_id)


@pytest.mark.slow
def test_30k_nodes_open_scroll_and_reveal_a_search_hit(explorer, chromium, server):  # noqa: F811
    graph = explorer.session.current.graph
    assert len(graph) > 30_000
    context = chromium.new_context(viewport={"width": 1200, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/tests/harness/explorer.html")
    page.wait_for_selector("body[data-ready]", state="attached")
    page.evaluate("s => harness.mount('graph', s)", explorer.graph.get_state(GRAPH_KEYS))
    page.evaluate("s => harness.mount('table', s)", explorer.table.get_state(TABLE_KEYS))
    kernel = Kernel(explorer, page)

    # The view opens with a bounded drawing; the table holds a window of rows, not 30k.
    page.wait_for_selector("#graph .fxviz-gv-canvas svg")
    assert 5 < page.locator("#graph .fxviz-gv-canvas g.node").count() <= 260
    assert page.locator("#table tr.fxviz-tv-row").count() < 80

    # The table scrolls to its end: the last rows are drawn and still only a window.
    page.eval_on_selector(".fxviz-tv", "e => { e.scrollTop = e.scrollHeight; }")
    page.wait_for_function("[...document.querySelectorAll('#table tr.fxviz-tv-row td:nth-child(2)')]"
                           ".some(td => td.textContent === 'output')")
    assert page.locator("#table tr.fxviz-tv-row").count() < 80

    # Zoomed out below legible size, a search hit inside a collapsed box: Enter selects
    # it, Python reveals it, and the view zooms in until its name is legible.
    for _ in range(6):
        page.click("#graph button[data-action=out]")
    drawn = page.locator("#graph g.node[id^=fx-]").first.get_attribute("id")
    assert label_px(page, drawn) < 11
    hidden = "tanh_12000"
    assert hidden in graph and page.locator(f"#fx-{hidden}").count() == 0
    page.fill(".fxviz-gv-search", hidden)
    page.press(".fxviz-gv-search", "Enter")
    kernel.deliver()
    node = page.locator(f"#fx-{hidden}")
    page.wait_for_selector(f"#fx-{hidden}.fxviz-selected")
    viewport = page.locator("#graph .fxviz-gv-viewport").bounding_box()
    shown = node.bounding_box()
    assert viewport["y"] <= shown["y"] + shown["height"] / 2 <= viewport["y"] + viewport["height"]
    assert viewport["x"] <= shown["x"] + shown["width"] / 2 <= viewport["x"] + viewport["width"]
    assert label_px(page, f"fx-{hidden}") >= 11 - 1e-3  # MIN_LABEL_PX, up to float rounding
    # The table scrolled (itself, not the page) to the selected row and marks it.
    page.wait_for_selector("#table tr.fxviz-tv-selected")
    assert page.locator("#table tr.fxviz-tv-selected td:nth-child(2)").text_content() == hidden
    assert page.evaluate("window.scrollY") == 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "scale-reveal.png"))

    # Expand all on 30k nodes: Python opens what fits the layout budget, keeps the rest
    # collapsed, and the status line says so; the drawing stays bounded.
    page.click("#graph button[data-action=expand-all]")
    kernel.deliver()
    page.wait_for_function("document.querySelector('#graph .fxviz-gv-status').textContent"
                           ".includes('Expand all left')")
    assert 5 < page.locator("#graph .fxviz-gv-canvas g.node").count() <= 4 * 260
    assert explorer.graph.collapsed and "boxes collapsed" in explorer.graph.status
    # ...and the selected node, inside a box the budget could have left shut, stays drawn.
    assert page.locator(f"#fx-{hidden}.fxviz-selected").count() == 1
    assert not page.locator("#graph button[data-action=selection]").is_disabled()
    page.screenshot(path=str(ARTIFACTS / "scale-expand-all.png"))
    context.close()
    assert errors == []

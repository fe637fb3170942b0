"""A new user's journeys through the Explorer (issue 11, "How it is checked"), in
JupyterLab at the default size (1600x1000), asserting what a person sees.

The journeys share one page: the quickstart notebook (notebooks/00_quickstart.ipynb,
resnet18) is run once, then each journey uses its Explorer in turn, in file order:
(1) labels readable at the first view, (8) the wheel over the graph scrolls the
notebook, (2) select -> details and the code line scrolled into view, (3) apply, undo,
redo keep the zoom and the graph in view, (4) the Timing tab's compare controls are
reachable and agree with Session.compare, (7) the dark theme has no white chart.
(9) renders the Explorer in Jupyter Notebook 7 on a page of its own.
Screenshots: test-artifacts/e2e-journey-*.png.
"""
from __future__ import annotations

import re
import shutil

import pytest

from labdriver import (DARK, LIGHT, ROOT, LabError, action_done, kernel_json, open_notebook, output_area, poll, run_all,
                       set_theme, shoot)

pytestmark = pytest.mark.e2e

QUICKSTART = "00_quickstart.ipynb"
MIN_LABEL_PX = 11  # graph_view.js: node names are never drawn smaller at a first view, Fit or search
MIN_DETAIL_PX = 7.9  # a node's smaller lines (target, shape: 9 and 8 units) at that zoom
NOTEBOOK_SCROLLER = ".jp-WindowedPanel-outer"  # what scrolls a notebook in JupyterLab 4 / Notebook 7

# JS: for each node inside the graph's viewport, the screen size (px) of its largest
# text (its name) and of its smallest (the shape line).
VISIBLE_LABEL_PX = """nodes => {
  if (!nodes.length) return [];
  const out = [];
  for (const g of nodes) {
    const gv = g.closest('.fxviz-gv');  // null: replaced by a newer drawing meanwhile
    if (!gv) continue;
    const vp = gv.querySelector('.fxviz-gv-viewport').getBoundingClientRect();
    const r = g.getBoundingClientRect();
    if (r.bottom < vp.top || r.top > vp.bottom || r.right < vp.left || r.left > vp.right) continue;
    const px = [...g.querySelectorAll('text')].map(t => {
      const b = t.getBBox();
      return b.height > 0 ? parseFloat(t.getAttribute('font-size') || '0') * t.getBoundingClientRect().height / b.height : 0;
    }).filter(v => v > 0);
    if (px.length) out.push([Math.max(...px), Math.min(...px)]);
  }
  return out;
}"""


@pytest.fixture(scope="module")
def explorer(desk_page, lab):
    """The quickstart, run all in JupyterLab; its Explorer (step 0, a redo available)."""
    shutil.copy(ROOT / "notebooks" / QUICKSTART, lab.root / QUICKSTART)
    open_notebook(desk_page, lab, QUICKSTART)
    run_all(desk_page, timeout=300)
    ex = output_area(desk_page, 1).locator(".fxviz-explorer")
    ex.locator(".fxviz-graph g.node").first.wait_for(timeout=60_000)
    ex.locator(".fxviz-step", has_text="step 0 of 1").wait_for()
    return ex


def _scale(explorer) -> float:
    t = explorer.locator(".fxviz-gv-canvas").evaluate("e => e.style.transform")
    return float(re.search(r"scale\(([-\d.e]+)\)", t).group(1))


def _label_px(explorer) -> list[list[float]]:
    """[name px, smallest line px] for each node in view."""
    return explorer.locator(".fxviz-graph g.node[id^='fx-']").evaluate_all(VISIBLE_LABEL_PX)


def _assert_legible(explorer, at_least: int = 1) -> None:
    sizes = _label_px(explorer)
    assert len(sizes) >= at_least, f"only {len(sizes)} nodes in view"
    name, detail = min(s[0] for s in sizes), min(s[1] for s in sizes)
    assert name >= MIN_LABEL_PX - 0.05, f"node names drawn {name:.1f} px tall (< {MIN_LABEL_PX})"
    assert detail >= MIN_DETAIL_PX, f"node details drawn {detail:.1f} px tall"


def _nodes_in_view(explorer) -> int:
    """How many nodes are on screen (polled briefly: a redraw may be under way)."""
    try:
        return len(poll("nodes in the graph's view", lambda: _label_px(explorer), timeout=5))
    except LabError:
        return 0


def _notebook_scroll(page) -> float:
    return page.locator(f".jp-NotebookPanel {NOTEBOOK_SCROLLER}").first.evaluate("e => e.scrollTop")


def _open_tab(explorer, title: str) -> None:
    explorer.locator(".fxviz-tabs .lm-TabBar-tab", has_text=title).click()
    explorer.locator(".fxviz-tabs .lm-TabBar-tab.lm-mod-current", has_text=title).wait_for()


def _search(explorer, query: str) -> None:
    box = explorer.locator(".fxviz-gv-search")
    box.fill(query)
    box.press("Enter")


def _in(inner: dict, outer: dict) -> bool:
    return (inner["y"] >= outer["y"] - 1 and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 1
            and inner["x"] >= outer["x"] - 1 and inner["x"] <= outer["x"] + outer["width"])


def test_1_quickstart_first_view_has_readable_labels(desk, explorer):
    explorer.locator(".fxviz-graph").scroll_into_view_if_needed()
    _assert_legible(explorer, at_least=8)
    # It opens at the inputs: the placeholder x is on screen.
    assert _in(explorer.locator("g.node#fx-x").bounding_box(),
               explorer.locator(".fxviz-gv-viewport").bounding_box())
    # Fit keeps them readable too.
    explorer.locator(".fxviz-gv-btn[data-action='fit']").click()
    _assert_legible(explorer, at_least=8)
    # Nothing selected yet: Details describes the whole graph and how it was captured.
    whole = explorer.locator(".fxviz-details").first.inner_text()
    assert "The whole graph" in whole and "torch.fx symbolic tracing" in whole and "call_module" in whole
    shoot(explorer, "e2e-journey-1-first-view")


def test_8_wheel_over_the_graph_scrolls_the_notebook(desk, explorer):
    page = desk
    explorer.locator(".fxviz-title").click()  # focus outside the graph
    viewport = explorer.locator(".fxviz-gv-viewport")
    viewport.scroll_into_view_if_needed()
    b = viewport.bounding_box()
    k, before = _scale(explorer), _notebook_scroll(page)
    page.mouse.move(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2)
    page.mouse.wheel(0, -300 if before > 300 else 300)
    page.wait_for_function(
        f"() => Math.abs(document.querySelector('.jp-NotebookPanel {NOTEBOOK_SCROLLER}').scrollTop - {before}) > 50")
    assert _scale(explorer) == k, "the wheel zoomed the graph instead of scrolling the notebook"
    # Ctrl + wheel zooms the graph and leaves the notebook where it is.
    viewport.scroll_into_view_if_needed()
    b = viewport.bounding_box()
    page.mouse.move(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2)
    still = _notebook_scroll(page)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    page.wait_for_function(f"() => !document.querySelector('.fxviz-gv-canvas').style.transform.includes('scale({k})')")
    assert _scale(explorer) > k
    assert _notebook_scroll(page) == pytest.approx(still, abs=1)


def test_2_select_shows_details_and_scrolls_the_code_to_its_line(desk, explorer):
    page = desk
    _search(explorer, "fc")  # the last layer: its code line is far down
    explorer.locator(".fxviz-graph g.node#fx-fc.fxviz-selected").wait_for()
    # Search zoomed to a legible size on the match.
    _assert_legible(explorer)
    assert _in(explorer.locator("g.node#fx-fc").bounding_box(), explorer.locator(".fxviz-gv-viewport").bounding_box())
    _open_tab(explorer, "Details")
    explorer.locator(".fxviz-details", has_text="Linear").wait_for()
    _open_tab(explorer, "Code")
    mark = explorer.locator(".fxviz-code .hll")
    mark.wait_for()
    assert mark.inner_text().strip().startswith("fc = self.fc(")
    page.wait_for_function("() => document.querySelector('.fxviz-code-scroll').scrollTop > 0")
    assert _in(mark.bounding_box(), explorer.locator(".fxviz-code-scroll").bounding_box())
    shoot(explorer, "e2e-journey-2-selected-fc-code")


def test_2b_selecting_a_node_never_scrolls_the_notebook(desk, explorer):
    page = desk
    # As a person reads the graph: its toolbar in view, only the table's first rows at the bottom.
    scroller = page.locator(f".jp-NotebookPanel {NOTEBOOK_SCROLLER}").first
    bottom = scroller.bounding_box()
    table = explorer.locator(".fxviz-node-table").bounding_box()
    shift = table["y"] - (bottom["y"] + bottom["height"] - 60)
    scroller.evaluate("(e, d) => { e.scrollTop += d; }", shift)
    assert _in(explorer.locator(".fxviz-gv-toolbar").bounding_box(), bottom)
    scrolled = _notebook_scroll(page)
    # Who calls scrollIntoView (it scrolls every scrollable ancestor, the notebook too): named on failure.
    page.evaluate("""() => { window.fxvizScrolls = []; const own = Element.prototype.scrollIntoView;
        Element.prototype.scrollIntoView = function (...a) {
          window.fxvizScrolls.push((this.closest('[class*=fxviz-]') || this).className);
          return own.apply(this, a); }; }""")
    for name in ("fc", "layer4_1_conv2", "x"):  # rows at the end, far down and at the top of the table
        _search(explorer, name)
        explorer.locator(f".fxviz-graph g.node#fx-{name}.fxviz-selected").wait_for()
        explorer.locator(".fxviz-node-table .fxviz-tv-selected").wait_for()
        assert _notebook_scroll(page) == pytest.approx(scrolled, abs=1), (
            f"selecting {name} scrolled the notebook; scrollIntoView called in: {page.evaluate('window.fxvizScrolls')}")
    explorer.locator(".fxviz-gv-search").press("Escape")


def test_3_apply_undo_redo_keep_the_zoom_and_the_graph_in_view(desk, explorer):
    page = desk
    _search(explorer, "layer2_0_conv1")
    explorer.locator("g.node#fx-layer2_0_conv1.fxviz-selected").wait_for()
    explorer.locator(".fxviz-gv-search").press("Escape")  # search done: nothing dimmed
    explorer.locator(".fxviz-gv-btn[data-action='in']").click()
    k = _scale(explorer)
    viewport = explorer.locator(".fxviz-gv-viewport")

    def check(step: str) -> None:
        explorer.locator(".fxviz-step", has_text=step).wait_for()
        # The drawing of that step is on screen (its status line comes with its SVG).
        index = re.match(r"step (\d+)", step).group(1)
        explorer.locator(".fxviz-gv-status", has_text=re.compile(rf"· step {index}\b")).wait_for()
        explorer.locator("g.node#fx-layer2_0_conv1.fxviz-selected").wait_for()
        action_done(explorer)  # a key pressed before the action's end would be dropped
        assert _scale(explorer) == pytest.approx(k), f"{step}: the zoom changed"
        assert _nodes_in_view(explorer) >= 3, f"{step}: the graph left the view"
        assert _in(explorer.locator("g.node#fx-layer2_0_conv1").bounding_box(), viewport.bounding_box())

    _open_tab(explorer, "Passes")
    explorer.locator(".fxviz-pass-select select").select_option(label="fuse_conv_bn")
    explorer.locator("button.fxviz-apply").click()
    check("step 1 of 1 · fuse_conv_bn")
    explorer.locator("g.node#fx-layer2_0_bn1").wait_for(state="detached")
    shoot(explorer, "e2e-journey-3-applied")
    viewport.click(position={"x": 5, "y": 5})  # focus the graph (a background click: selection cleared)
    explorer.locator("g.node.fxviz-selected").wait_for(state="detached")
    _search(explorer, "layer2_0_conv1")
    explorer.locator(".fxviz-gv-search").press("Escape")
    viewport.focus()
    page.keyboard.press("Control+z")
    check("step 0 of 1")
    explorer.locator("g.node#fx-layer2_0_bn1").wait_for()
    shoot(explorer, "e2e-journey-3-undone")
    page.keyboard.press("Control+Shift+z")
    check("step 1 of 1")
    explorer.locator("button.fxviz-undo").click()
    check("step 0 of 1")
    explorer.locator("button.fxviz-redo").click()
    check("step 1 of 1")


def test_4_timing_compare_controls_are_reachable_and_agree_with_python(desk, explorer):
    page = desk
    _open_tab(explorer, "Timing")
    # The step's timings first: when they arrive the summary and chart above the controls grow.
    explorer.locator(".fxviz-timing-summary", has_text=re.compile(r"Step \d+: forward")).wait_for(timeout=180_000)
    explorer.locator(".fxviz-timing-chart svg").wait_for(timeout=60_000)
    for control in (".fxviz-compare-a select", ".fxviz-compare-b select", "button.fxviz-compare"):
        box = explorer.locator(control)
        box.scroll_into_view_if_needed()
        # Its row has a height and nothing covers or clips it: the point at its centre is it.
        seen = box.evaluate("""e => { const row = e.closest('.widget-hbox'); const r = e.getBoundingClientRect();
            const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
            return {row: row.getBoundingClientRect().height, hit: e === hit || e.contains(hit)}; }""")
        assert seen["row"] >= 20 and seen["hit"], f"{control}: {seen} (its row collapsed or clipped)"
    explorer.locator(".fxviz-compare-a select").select_option(label="step 0 · trace")
    explorer.locator(".fxviz-compare-b select").select_option(label="step 1 · fuse_conv_bn")
    explorer.locator("button.fxviz-compare").click()
    result = explorer.locator(".fxviz-compare-result")
    result.get_by_text("deleted").first.wait_for(timeout=180_000)
    summary = re.search(r"per target: (.*?)\.", result.inner_text())
    assert summary, result.inner_text()
    shown = {c: int(n) for n, c in re.findall(r"(\d+) (\w+)", summary.group(1))}
    python = kernel_json(page, "import json\n"
                               "t = explorer.session.compare(0, 1).timing\n"
                               "print(json.dumps(t['category'].value_counts().to_dict()))")
    # Added and deleted are facts of the graphs (timings may differ between two runs).
    for category in ("added", "deleted"):
        assert shown.get(category, 0) == python.get(category, 0), (category, shown, python)
    assert shown["deleted"] >= 1  # BatchNorm2d
    result.scroll_into_view_if_needed()
    shoot(explorer, "e2e-journey-4-compare")


def test_7_dark_theme_has_no_white_chart(desk, explorer):
    page = desk
    try:
        set_theme(page, DARK)
        _open_tab(explorer, "Timing")
        chart = explorer.locator(".fxviz-timing-chart")
        chart.wait_for(state="visible", timeout=180_000)
        chart.scroll_into_view_if_needed()
        shot = shoot(chart, "e2e-journey-7-dark-chart")
        from PIL import Image, ImageStat

        mean = ImageStat.Stat(Image.open(shot).convert("L")).mean[0]
        assert mean < 128, f"the timing chart is a light block in the dark theme (mean grey {mean:.0f})"
        # Its text in the theme's (light) text colour, as drawn: no filter over it (one inverted it to dark grey).
        ink = chart.locator("svg text").first.evaluate(
            "e => [getComputedStyle(e).fill, getComputedStyle(e.closest('.fxviz-timing-chart')).filter]")
        rgb = [float(v) for v in re.findall(r"[\d.]+", ink[0])[:3]]
        assert min(rgb) > 180 and ink[1] == "none", ink
        shoot(explorer, "e2e-journey-7-dark")
    finally:
        set_theme(page, LIGHT)


def test_10_panels_fit_the_default_size(desk, explorer):
    """The code diff fits its panel (unified when narrow); the legend names its unit."""
    page = desk
    _open_tab(explorer, "Code")
    explorer.locator(".fxviz-code-diff").click()
    scroller = explorer.locator(".fxviz-code-scroll")
    scroller.locator(".fxviz-diff-unified").wait_for()
    assert scroller.evaluate("e => e.scrollTop") == 0  # a diff opens at its start, not where the code was
    assert not explorer.locator(".fxviz-code .fxviz-diff").is_visible()  # side by side is for wide panels
    panel, code = explorer.locator(".fxviz-tabs").bounding_box(), scroller.bounding_box()
    assert code["x"] + code["width"] <= panel["x"] + panel["width"] + 1, (code, panel)
    assert scroller.locator(":is(.gd, .gi)", has_text="bn1").count() >= 1  # the BatchNorm calls: removed or back
    explorer.locator(".fxviz-gv-select").select_option("time")
    # Once the step's timings are known (until then it stays coloured, and titled, by op kind).
    explorer.locator(".fxviz-gv-legend-title", has_text="time share (%").wait_for(timeout=120_000)
    labels = explorer.locator(".fxviz-gv-legend-label").all_inner_texts()
    assert labels and all(re.fullmatch(r"[\d.e+-]+", t) for t in labels), labels
    legend, viewport = explorer.locator(".fxviz-gv-legend").bounding_box(), explorer.locator(".fxviz-gv-viewport").bounding_box()
    assert legend["y"] >= viewport["y"] + viewport["height"] - 1  # below the drawing, not over it
    shoot(explorer, "e2e-journey-10-diff-and-time-light")
    try:
        set_theme(page, DARK)
        shoot(explorer, "e2e-journey-10-diff-and-time-dark")
    finally:
        set_theme(page, LIGHT)
    explorer.locator(".fxviz-gv-select").select_option("op")
    explorer.locator(".fxviz-code-diff").click()


SMALL_NB = [
    """\
import torch
from torch import nn
import fxviz

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
fxviz.explore(model, torch.randn(2, 8), profile="off")""",
]


def test_9_explorer_renders_in_notebook_7(lab, page):
    name = lab.write_notebook("e2e_notebook7.ipynb", SMALL_NB)
    open_notebook(page, lab, name, ui="notebook")
    assert page.locator("#jp-top-panel, .jp-NotebookPanel").count() >= 1
    assert "/notebooks/" in page.url  # Notebook 7, not JupyterLab
    run_all(page, timeout=120)
    ex = page.locator(".fxviz-explorer")
    ex.locator(".fxviz-graph g.node#fx-input_1").wait_for(timeout=60_000)
    ex.locator(".fxviz-step", has_text="step 0 of 0").wait_for()
    _assert_legible(ex, at_least=3)
    ex.locator(".fxviz-graph g.node#fx-_0").click()
    ex.locator(".fxviz-details", has_text="Linear").wait_for()
    # Notebook 7's page is narrower than JupyterLab's: the table's columns fit it, share % in view.
    share = ex.locator(".fxviz-node-table th", has_text="share").bounding_box()
    pane = ex.locator(".fxviz-node-table .fxviz-tv").bounding_box()
    assert share["x"] + share["width"] <= pane["x"] + pane["width"] + 1, (share, pane)
    shoot(ex, "e2e-journey-9-notebook7")

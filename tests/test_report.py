"""Session.to_html: one self-contained page, every user string escaped, and in Chromium
(from file://, the network refused) the graph, details, expand and code diff work."""
from __future__ import annotations

import base64
import gzip
import html
import json
import pathlib
import re
import shutil
import subprocess

import pytest
import torch
from torch import nn

import fxviz
from fxviz.draw.colour_modes import OP_COLORS
from fxviz.present.node_table import COLUMNS
from fxviz.report.page import report_html
from fxviz.draw.layout_index import box_index
from fxviz.report.views import ALL, Views, chain, focused, module_paths, step_views, twins
from fxviz.present.columns import rows_from_json

ROOT = pathlib.Path(__file__).resolve().parents[1]

EVIL = "<img src=x onerror=alert(1)>"


def _data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="fxviz-report-data">(.*?)</script>', page, re.S)
    return json.loads(match.group(1))


def _blob(data: dict, index: int):
    return json.loads(gzip.decompress(base64.b64decode(data["blobs"][index])))


def _details(data: dict, index: int) -> dict[str, dict]:
    """A step's details blob by node name, as ``detailsByName`` (report_panels.js) reads it."""
    decoded = rows_from_json(_blob(data, index))
    return {row["name"]: {"rows": [[k, v] for k, v in row.items() if k not in ("inputs", "users") and v is not None],
                          "inputs": row["inputs"], "users": row["users"]} for row in decoded}


class Evil(nn.Module):
    """A submodule whose name is markup: it reaches module paths and targets."""

    def __init__(self):
        super().__init__()
        self.add_module(EVIL, nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(getattr(self, EVIL)(x))


@pytest.fixture(scope="module")
def resnet_session(resnet18):
    torch.manual_seed(0)
    session = fxviz.Session(resnet18, (torch.randn(1, 3, 64, 64),))
    session.apply("fuse_conv_bn")
    session.apply("lower_modules")
    return session


def test_the_page_is_self_contained_and_carries_every_step(resnet_session, tmp_path):
    path = resnet_session.to_html(tmp_path / "r.html", check=True)
    page = path.read_text()
    assert not re.search(r'(src|href)\s*=\s*"(?!data:|#)', page)  # nothing to fetch
    assert "http://" not in page.replace("http://www.w3.org/", "") and "https://" not in page
    data = _data(page)
    assert [s["pass_name"] for s in data["steps"]] == ["trace", "fuse_conv_bn", "lower_modules"]
    assert data["current"] == 2 and all(s["check"]["status"] == "match" for s in data["steps"])
    step0 = data["steps"][0]
    # the top level: layer1..4 collapsed; focusing layer1 opens it, its blocks collapsed
    top, layer1 = _blob(data, step0["views"][""]), _blob(data, step0["views"]["layer1"])
    assert {"layer1", "layer4"} <= set(top["collapsed"])
    assert "layer1" not in layer1["collapsed"] and "layer1.0" in layer1["collapsed"]
    assert re.search(r'id="fx(-|&#45;)conv1"', top["svg"]) and ALL in step0["views"]
    # the code diff of any two steps, both ways
    diff = _blob(data, data["diffs"]["0,1"])
    assert "-    bn1 = self.bn1(conv1)" in diff and "+++ step 1 (fuse_conv_bn)" in diff
    assert _blob(data, data["diffs"]["1,0"]).startswith("--- step 1")
    details = _details(data, step0["details"])
    assert dict(details["conv1"]["rows"])["shape"] == "1×64×32×32"
    assert details["conv1"]["users"] == ["bn1"] and details["bn1"]["inputs"] == [["args[0]: conv1", "conv1"]]
    # with no node selected, each step's whole graph: fusing removed its 20 BatchNorm modules
    overviews = [dict(s["overview"]["rows"]) for s in data["steps"]]
    assert overviews[0]["captured by"].startswith("torch.fx symbolic tracing") and not data["steps"][0]["overview"]["tried"]
    assert overviews[0]["nodes"].startswith("71: placeholder 1 · call_module 60 ·")
    assert overviews[1]["nodes"].startswith("51: placeholder 1 · call_module 40 ·")


def test_timings_appear_only_when_measured_unless_asked(my_module):
    session = fxviz.Session(my_module, (torch.randn(5, 4),))
    assert _data(report_html(session))["steps"][0]["timing"] is None
    session.current.profile(repeats=3, warmup=1)
    timing = _data(report_html(session))["steps"][0]["timing"]
    assert timing["columns"][0] == "node" and {r[0] for r in timing["rows"]} <= set(session.current.graph)
    assert "3 repeats" in timing["summary"]
    records = {r["name"]: r for r in rows_from_json(_data(report_html(session))["steps"][0]["nodes"])}
    measured = session.current.measured_profile.set_index("node")
    assert {name: r["time"] for name, r in records.items() if r["time"]} == {  # the tooltips' times
        name: f"{m.median_us:.1f} µs ({m.share:.1f} %)" for name, m in measured.iterrows()}


def test_every_user_string_is_escaped():
    torch.manual_seed(0)
    session = fxviz.Session(Evil(), (torch.randn(2, 4),))
    page = report_html(session, title=EVIL)
    assert "<img" not in page and "</script><" not in page.replace('</script>\n<script', "")
    data = _data(page)
    assert data["title"] == EVIL  # the text itself is intact, just inert
    paths = {r["module_path"] for r in rows_from_json(data["steps"][0]["nodes"])}  # the graph view's columns
    assert f"{EVIL}.0" in paths and EVIL in _blob(data, data["steps"][0]["code"])


def test_focused_views_open_the_chain_and_collapse_the_rest(resnet18):
    graph = fxviz.Session(resnet18, (torch.randn(1, 3, 64, 64),)).current.graph
    paths = module_paths(graph)
    assert chain("layer2.0.downsample") == ["layer2", "layer2.0", "layer2.0.downsample"]
    rendering = focused(graph, "layer2.0", paths)
    assert "layer2" not in rendering.collapsed and "layer2.0" not in rendering.collapsed
    assert {"layer1", "layer3", "layer2.1", "layer2.0.downsample"} <= set(rendering.collapsed)


def test_each_steps_drawings_colour_its_own_nodes(resnet_session):
    """A report derives each graph's colours once for all its drawings: lower_modules turns
    modules (relu) into functions, and every node drawn in every view of every step takes
    its own step's colour; each legend lists its own step's node kinds."""
    data = _data(report_html(resnet_session))
    ops = [dict(step.graph.nodes(data="op")) for step in resnet_session.steps]
    assert [o["relu"] for o in ops] == ["call_module", "call_module", "call_function"]
    for kinds, step in zip(ops, data["steps"]):
        for index in set(step["views"].values()):
            variant = _blob(data, index)
            fills = re.findall(r'<g id="fx&#45;([^"]+)" class="node">\s*<title>[^<]*</title>\s*<\w+ fill="(#\w+)"',
                               variant["svg"])
            assert fills and all(fill == OP_COLORS[kinds[html.unescape(name)]] for name, fill in fills)
            assert {e["label"] for e in variant["legend"]} == set(kinds.values())


def test_a_view_budget_bounds_the_drawings(resnet_session):
    small = _data(report_html(resnet_session, max_views=3))
    large = _data(report_html(resnet_session))
    assert len(small["steps"][0]["views"]) == 4  # the top level, two focuses and the Explorer's view
    assert len(large["steps"][0]["views"]) > 10


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.mlp = nn.LayerNorm(4), nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4))

    def forward(self, x):
        return x + self.mlp(self.norm(x)) * torch.sigmoid(x) - 0.5


class _Stack(nn.Module):
    """A stem, four identical blocks (a transformer's layers) and a head."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
        self.blocks = nn.ModuleList(_Block() for _ in range(4))
        self.head = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_the_first_of_identical_blocks_is_drawn_before_its_twins():
    """A report draws what a reader opens first: every kind of module, down into the first
    block, before the three blocks that repeat it (each as costly to lay out)."""
    torch.manual_seed(0)
    graph = fxviz.Session(_Stack(), (torch.randn(2, 4),)).current.graph
    assert twins(graph, box_index(graph).tree.boxes) == {"blocks.1", "blocks.2", "blocks.3"}
    few = list(step_views(graph, Views(), 6))
    assert few == [ALL, "", "stem", "blocks", "head", "blocks.0", "blocks.0.mlp"]
    every = list(step_views(graph, Views(), 40))
    assert every[:len(few)] == few and every[len(few):] == [
        "blocks.1", "blocks.2", "blocks.3", "blocks.1.mlp", "blocks.2.mlp", "blocks.3.mlp"]


# --- in Chromium -----------------------------------------------------------------

def _open(chromium, path):
    """The report in a fresh page from file://, every other request refused; yields the
    page, then fails on any request that left it, JavaScript error or dialog."""
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    problems, requests = [], []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("request", lambda r: requests.append(r.url))
    context.route(lambda url: not url.startswith("file://"), lambda route: route.abort())
    page.goto(path.as_uri())
    page.wait_for_selector(".fxviz-report[data-ready] .fxviz-gv-canvas svg g.node")
    yield page
    context.close()
    # file:// is the page; blob: is the graph view's module built from the page's own text
    assert [u for u in requests if not u.startswith(("file://", "blob:"))] == []
    assert problems == []


@pytest.fixture
def report_page(chromium, resnet_session, tmp_path):
    if not shutil.which("dot"):
        pytest.skip("needs graphviz")
    yield from _open(chromium, resnet_session.to_html(tmp_path / "report.html"))


def test_markup_in_module_names_stays_text_in_the_browser(chromium, tmp_path):
    torch.manual_seed(0)
    path = fxviz.Session(Evil(), (torch.randn(2, 4),)).to_html(tmp_path / "evil.html", title=EVIL)
    for page in _open(chromium, path):  # a dialog (alert) would fail it
        assert page.inner_text(".fxviz-report-title") == EVIL
        page.locator(".fxviz-gv-canvas g.node[id^=fxco-]").first.click()  # open the evil module
        page.wait_for_function("document.querySelector('.fxviz-gv-status').textContent.includes('open: <img')")
        page.locator(".fxviz-gv-canvas g.node#fx-head").click()  # the head Linear
        page.wait_for_selector(".fxviz-report-details table.fxviz-kv")
        page.click(".fxviz-report-inputs .fxviz-node-link")  # head's input: the ReLU inside
        page.wait_for_function("document.querySelector('.fxviz-report-details').textContent.includes('ReLU')")
        assert f"module path\t{EVIL}.1" in page.inner_text(".fxviz-report-details")
        assert page.locator("img").count() == 0


def test_report_in_chromium_select_expand_and_diff(report_page):
    page = report_page
    canvas = page.locator(".fxviz-gv-canvas")
    assert page.locator(".fxviz-report-history-step").count() == 3
    whole = page.inner_text(".fxviz-report-details")  # nothing selected yet: the whole graph
    assert "The whole graph" in whole and "torch.fx symbolic tracing" in whole and "call_module" in whole
    assert "step 2 of 2" in page.inner_text(".fxviz-report-step")
    # a node shows its details
    canvas.locator("#fx-conv1").click()
    page.wait_for_selector(".fxviz-report-details table.fxviz-kv")
    assert "conv1 (Conv2d)" in page.inner_text(".fxviz-report-details")
    assert page.inner_text(".fxviz-report-table .fxviz-tv-selected").split("\t")[1] == "conv1"
    # the node table (the Explorer's own front-end) selects in the graph: maxpool is drawn
    page.locator(".fxviz-report-table .fxviz-tv-row", has_text="maxpool (MaxPool2d)").click()
    canvas.locator("#fx-maxpool.fxviz-selected").wait_for()
    assert "MaxPool2d" in page.inner_text(".fxviz-report-details")
    # a collapsed module expands: layer2 opens, its blocks appear
    layer2 = canvas.locator("g.node[id^=fxco-]", has_text="layer2")
    layer2.click()
    page.wait_for_function("document.querySelector('.fxviz-gv-status').textContent.includes('open: layer2')")
    assert canvas.locator("g.node[id^=fxco-]", has_text="BasicBlock").count() == 2  # layer2.0, layer2.1
    assert canvas.locator("g.node[id^=fxco-]", has_text="layer2").count() == 0
    # the code diff of step 2 against step 0
    page.click(".fxviz-report-tab[data-tab=code]")
    page.check(".fxviz-report-diff-toggle")
    page.select_option(".fxviz-report-diff-base", "0")
    page.wait_for_selector(".fxviz-report-code .fxviz-diff-insert")
    code = page.inner_text(".fxviz-report-code")
    assert "--- step 0 (trace)" in code and "+++ step 2 (lower_modules)" in code
    assert "-    bn1 = self.bn1(conv1)" in code
    # another step from the history
    page.click(".fxviz-report-history-step >> nth=0")
    page.wait_for_function("document.querySelector('.fxviz-gv-status').textContent.includes('step 0 ·')")
    assert "open: layer2" in page.inner_text(".fxviz-gv-status")  # the focus is kept across steps
    assert canvas.locator("#fx-bn1").count() == 1  # step 0 still has its batch norms


# --- static fallbacks --------------------------------------------------------------

FX_ID = re.compile(r'<svg.*id="fx(-|&#45;)\w+"', re.S)


def test_session_and_step_show_their_graph_as_html(resnet_session):
    assert [s.check.status for s in resnet_session.steps] == ["match"] * 3
    html = resnet_session._repr_html_()
    assert FX_ID.search(html) and "step 1: fuse_conv_bn · check: match" in html
    step = resnet_session.steps[0]
    html = step._repr_html_()
    assert FX_ID.search(html) and "Step 0: trace(tracer=&#x27;symbolic&#x27;)" in html and "<td>conv1</td>" in html


def test_a_fresh_step_shows_without_running_its_check(my_module):
    session = fxviz.Session(my_module, (torch.randn(5, 4),))
    assert "check: not checked yet" in session._repr_html_() and not session.current.check_done


def test_the_report_runs_no_check_unless_asked():
    torch.manual_seed(0)
    session = fxviz.Session(nn.Sequential(nn.Linear(4, 3), nn.ReLU()), (torch.randn(2, 4),))
    session.apply("lower_modules")
    session.steps[0].check  # run by then (as the Explorer does in the background)
    checks = [s["check"] for s in _data(report_html(session))["steps"]]
    assert [(c["status"], c["text"], c["slug"]) for c in checks] == [
        ("match", "match", "match"), ("not checked yet", "not checked yet", "pending")]
    assert "check=True" in checks[1]["message"] and not session.steps[1].check_done
    checks = [s["check"] for s in _data(report_html(session, check=True))["steps"]]
    assert [c["status"] for c in checks] == ["match", "match"] and session.steps[1].check_done


def test_the_explorer_carries_a_static_copy_beside_the_widget():
    pytest.importorskip("ipywidgets")
    torch.manual_seed(0)
    from fxviz.widgets import Explorer

    explorer = Explorer(fxviz.Session(Evil(), (torch.randn(2, 4),)), profile="off", title=EVIL)
    try:
        bundle = explorer._repr_mimebundle_()
    finally:
        explorer.close()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    html = bundle["text/html"]
    assert FX_ID.search(html) and "step 0 of 0 · trace" in html and "<img" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # title, module paths: escaped text
    assert "<td>head</td>" in html  # the node table


def test_the_explorers_export_button_writes_the_report_and_links_it(tmp_path, monkeypatch):
    pytest.importorskip("ipywidgets")
    monkeypatch.chdir(tmp_path)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    explorer = fxviz.explore(model, torch.randn(2, 4), profile="sync", profile_kwargs={"repeats": 3})
    try:
        explorer.session.apply("lower_modules")
        seen, write = [], explorer.session.to_html
        monkeypatch.setattr(explorer.session, "to_html", lambda *a, **k: (
            seen.append((explorer.export_button.description, explorer.export_button.disabled)), write(*a, **k))[1])
        explorer.export_button.click()
        assert seen == [("exporting…", True)]  # seconds on a large graph: the button says so meanwhile
        assert (explorer.export_button.description, explorer.export_button.disabled) == ("export", False)
        assert explorer.error.value == ""
        page = (tmp_path / "Sequential-report.html").read_text()
        assert 'href="Sequential-report.html"' in explorer.export_link.value
        assert "Wrote the report (2 steps) to Sequential-report.html" in explorer.status.value
    finally:
        explorer.close()
    data = _data(page)
    assert [s["pass_name"] for s in data["steps"]] == ["trace", "lower_modules"]
    assert data["steps"][1]["timing"] is not None  # the Explorer's timings travel with it


def test_the_report_marks_the_line_the_code_tab_marks(resnet_session):
    from fxviz.report.page import _node_lines
    from fxviz.widgets.panel_code import node_line

    step = resnet_session.steps[2]
    code = step.code.lstrip("\n")
    expected = {n: node_line(code, n, a["op"]) for n, a in step.graph.nodes(data=True)}
    assert _node_lines(code, step.graph) == expected and expected["x"] == 1


def test_a_graph_view_carries_its_svg_as_html(resnet_session):
    pytest.importorskip("anywidget")
    from fxviz.draw.render import render
    from fxviz.widgets import GraphView

    view = GraphView(svg=render(resnet_session.current.graph).svg, status="51 nodes · step 2")
    bundle, _ = view._repr_mimebundle_()
    view.close()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert FX_ID.search(bundle["text/html"]) and "51 nodes · step 2" in bundle["text/html"]


class EvilChain(nn.Module):
    """Evil's markup-named submodule, then ``n_ops`` element-wise ops."""

    def __init__(self, n_ops: int):
        super().__init__()
        self.add_module(EVIL, nn.Linear(4, 4))
        self.n_ops = n_ops

    def forward(self, x):
        h = getattr(self, EVIL)(x)
        for i in range(self.n_ops):
            h = torch.tanh(h) if i % 2 else torch.sigmoid(h)
        return h


def _formatted_in_js(values: list, column: dict) -> list[str]:
    """Cells as the live table shows them: table_view.js's own formatCell, run under node."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs node to run table_view.js")
    script = (f"import {{ formatCell }} from {json.dumps((ROOT / 'widgets/table_view.js').as_uri())};"
              f"const values = {json.dumps(values)}.map(v => v === 'inf' ? Infinity : v === 'nan' ? NaN : v);"
              f"console.log(JSON.stringify(values.map(v => formatCell(v, {json.dumps(column)}))));")
    out = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_static_numbers_are_rounded_as_the_browser_rounds_them():
    """Ties (12.25) and shortest decimals (0.15, stored as 0.1499…) round as
    toLocaleString does, to the live table's digit; NaN is blank, infinity a sign."""
    from fxviz.report.static import _shown

    values = [0.15, 0.35, 12.25, 2.5, 1.005, 1234567.25, 48, 20480000, 0, "nan", "inf"]
    for digits in (0, 1):
        column = {"key": "time_us", "numeric": True, "digits": digits}
        python = [_shown(float(v) if isinstance(v, str) else v, column) for v in values]
        assert python == _formatted_in_js(values, column)
    assert _shown(12.25, {"numeric": True, "digits": 1}) == "12.3"


def _node_table(page: str) -> tuple[list[str], list[list[str]]]:
    """The static node table's header and rows, as text."""
    table = re.search(r"<summary>Nodes.*?</summary>(.*?)</details>", page, re.S).group(1)
    header = [html.unescape(th) for th in re.findall(r"<th>(.*?)</th>", table)]
    body = table.split("<tbody>")[1]
    rows = [[html.unescape(td) for td in re.findall(r"<td>(.*?)</td>", tr, re.S)]
            for tr in re.findall(r"<tr>(.*?)</tr>", body, re.S)]
    return header, rows


@pytest.mark.parametrize("n_ops", [3, 2100], ids=["small", "over LARGE_GRAPH"])
def test_the_explorers_static_copy_has_the_live_tables_columns_and_first_rows(n_ops, monkeypatch):
    """The static copy lists the live table's columns for its first rows (a Step's HTML
    too), every string escaped; on a large graph without waiting for the rows that the
    live table gets once the cell is done (here: never on its own)."""
    pytest.importorskip("ipywidgets")
    from fxviz.report.static import MAX_ROWS
    from fxviz.widgets import explorer as explorer_module

    monkeypatch.setattr(explorer_module, "after_cell", lambda fill: True)  # a kernel, its cell still running
    session = fxviz.Session(EvilChain(n_ops), (torch.randn(2, 4),))
    explorer = explorer_module.Explorer(session, profile="off")
    try:
        page = explorer._repr_mimebundle_()["text/html"]
        sent = len(explorer.table.data)  # what went to the browser by then
        columns = explorer.table.columns
        labels, keys = [c["label"] for c in columns], [c["key"] for c in columns]
        first = explorer.table.rows[:MAX_ROWS]
        live = [list(cells) for cells in zip(*(_formatted_in_js([row[c["key"]] for row in first], c) for c in columns))]
    finally:
        explorer.close()
    n, large = len(session.current.graph), n_ops > explorer_module.LARGE_GRAPH
    assert sent == (0 if large else n)
    header, rows = _node_table(page)
    assert len(labels) == 11 and header == labels and rows == live and len(rows) == min(n, MAX_ROWS)
    assert (f"(first {MAX_ROWS} of {n})" in page) == large
    assert EVIL in [rows[1][keys.index("module_path")], rows[1][keys.index("target")]]  # text, intact
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert _node_table(session.current._repr_html_())[0] == labels


def test_the_explorers_static_copy_shows_the_times_measured_by_then():
    pytest.importorskip("ipywidgets")
    explorer = fxviz.explore(EvilChain(3), torch.randn(2, 4), profile="sync", profile_kwargs={"repeats": 3})
    try:
        header, rows = _node_table(explorer._repr_mimebundle_()["text/html"])
        live = [(row["time_us"], row["share"]) for row in explorer.table.rows]
    finally:
        explorer.close()
    shown = [(row[header.index("time (µs)")], row[header.index("share (%)")]) for row in rows]
    assert sum(time is not None for time, _ in live) >= 4  # the ops were profiled
    columns = {c["key"]: c for c in COLUMNS}
    assert shown == list(zip(*(_formatted_in_js([pair[i] for pair in live], columns[key])
                               for i, key in enumerate(("time_us", "share")))))


def test_a_small_model_gets_every_view_and_a_large_one_a_bounded_few():
    import torchvision

    from fxviz.report.views import VIEWS

    small = fxviz.Session(torchvision.models.resnet18().eval(), (torch.randn(1, 3, 32, 32),)).current.graph
    every = step_views(small, Views(), 10**6)
    assert VIEWS + 1 < len(every) == len(step_views(small, Views(), None))  # 298 boxes in all: under SMALL_BOXES
    stack = fxviz.Session(nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh())
                                          for _ in range(60)]), (torch.randn(2, 8),)).current.graph
    bounded, views = step_views(stack, Views(), None), step_views(stack, Views(), 10**6)
    assert VIEWS + 1 <= len(bounded) < len(views)  # 60 twins: drawn past VIEWS only while under SMALL_BOXES
    assert len(step_views(small, Views(), 3)) == 4  # an explicit count is kept (with "*", the first view)

"""The Explorer, driven through its widgets as a user would: set ``selected``, pick
from dropdowns, ``.click()`` buttons; then read what each panel shows."""
from __future__ import annotations

import gc
import html
import re
import threading
import weakref

import pytest
import torch
import torch.fx
from torch import nn

import ipywidgets as w

import fxviz.draw.render
from fxviz.draw import colour_modes
from fxviz.errors import RenderError
from fxviz.passes import registry
from fxviz.session import Session
from fxviz.widgets import Explorer, explore

FAST = {"budget_s": 0.05, "warmup": 1, "repeats": 3}
SCRIPT = "<script>alert(1)</script>"
FAULTS = {"profile": None}  # what `probe` raises while set: a fault injected into profiling
GATE = threading.Event()  # `held` waits for it on the measuring worker: a test holds the worker
GATE.set()


@torch.fx.wrap
def probe(x):
    """Identity, except that it raises FAULTS["profile"] when one is set."""
    if FAULTS["profile"] is not None:
        raise FAULTS["profile"]
    return x


@torch.fx.wrap
def held(x):
    """Identity; on the measuring worker, only once GATE is set."""
    if threading.current_thread().name == "fxviz-measure":
        GATE.wait()
    return x


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn1(self.conv1(x)))


class Probed(ConvBN):
    def forward(self, x):
        return probe(super().forward(x))


class Held(ConvBN):
    def forward(self, x):
        return held(super().forward(x))


class Hostile(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module(SCRIPT, nn.Linear(3, 3))

    def forward(self, x):
        return getattr(self, SCRIPT)(x).relu()


@pytest.fixture
def image():
    torch.manual_seed(0)
    return torch.randn(1, 3, 8, 8)


@pytest.fixture
def convbn(image):
    torch.manual_seed(0)
    explorer = explore(ConvBN().eval(), image, profile="sync", profile_kwargs=FAST)
    yield explorer
    explorer.close()


@pytest.fixture
def own_registry(monkeypatch):
    """Passes registered by a test disappear after it."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


def names(explorer):
    return [row["name"] for row in explorer.table.rows]


def graph_names(explorer):
    return {e["name"] for e in explorer.graph.elements.values() if e["kind"] == "node"}


def text(markup):
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def all_widgets(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from all_widgets(child)


def test_the_tutorial_graph_in_table_details_and_code(my_module):
    explorer = explore(my_module, torch.randn(5, 4), profile="off")
    assert names(explorer) == ["x", "linear_weight", "add", "linear", "relu", "sum_1", "topk", "output"]
    assert [r["op"] for r in explorer.table.rows][:4] == ["placeholder", "get_attr", "call_function", "call_module"]
    explorer.graph.selected = "sum_1"
    details = text(explorer.details.body.value)
    assert "call_function" in details and "torch.sum" in details and "{'dim': -1}" in details
    assert [b.description for b in explorer.details.users.children[1:]] == ["topk"]
    assert "def forward" in text(explorer.code.view.html)
    marked = re.search(r'<span class="hll">(.*?)</span>\n', explorer.code.view.html)
    assert marked and text(marked.group(1)).lstrip().startswith("sum_1 = torch.sum")
    assert explorer.title.value == "<b>MyModule</b>"
    explorer.close()


def test_selecting_another_node_marks_its_line_without_lexing_the_code_again(my_module, monkeypatch):
    from pygments.lexers import PythonLexer

    explorer = explore(my_module, torch.randn(5, 4), profile="off")
    explorer.graph.selected = "relu"
    lexed = []
    original = PythonLexer.get_tokens_unprocessed
    monkeypatch.setattr(PythonLexer, "get_tokens_unprocessed", lambda self, text, *a: lexed.append(text) or
                        original(self, text, *a))
    explorer.graph.selected = "topk"
    marked = re.search(r'<span class="hll">(.*?)</span>\n', explorer.code.view.html)
    assert marked and text(marked.group(1)).lstrip().startswith("topk = ")
    assert lexed == []  # the code's tokens were kept from the first highlighting; only the mark moved
    explorer.close()


def test_selection_is_shared_by_graph_table_details_and_inputs(convbn):
    convbn.graph.selected = "bn1"
    assert convbn.table.selected == "bn1"
    assert "BatchNorm2d" in convbn.details.body.value
    assert "1×4×6×6" in convbn.details.body.value and "float32" in convbn.details.body.value
    convbn.table.selected = "relu"  # a row click in the browser
    assert convbn.graph.selected == "relu" and "ReLU" in convbn.details.body.value
    (link,) = convbn.details.inputs.children[1:]
    assert link.description == "args[0]: bn1"
    link.click()
    assert convbn.graph.selected == convbn.table.selected == "bn1"
    with pytest.raises(ValueError, match="no node named 'nope'"):
        convbn.select("nope")


def test_fuse_undo_redo_on_resnet18(resnet18):
    explorer = explore(resnet18, torch.randn(1, 3, 32, 32), profile="off")
    assert explorer.passes.select.value == "fuse_conv_bn"  # the first pass, with its form, from the start
    assert "eval mode" in explorer.passes.doc.value
    bns = {r["name"] for r in explorer.table.rows if r["target"].endswith("(BatchNorm2d)")}
    code_before = text(explorer.code.view.html)
    explorer.passes.select.value = "fuse_conv_bn"
    explorer.passes.apply.click()
    assert explorer.error.value == ""
    assert not bns & graph_names(explorer) and len(bns) == 20
    assert text(explorer.badge.value) == "match"
    assert len(text(explorer.code.view.html)) < len(code_before)
    assert "bn1" not in names(explorer) and explorer.step_label.value == "step 1 of 1 · fuse_conv_bn"
    assert [text(row.children[1].value) for row in explorer.passes.history.children] == ["match", "match"]
    explorer.undo_button.click()
    assert bns <= graph_names(explorer) and text(explorer.code.view.html) == code_before
    assert explorer.undo_button.disabled and not explorer.redo_button.disabled
    explorer.redo_button.click()
    assert not bns & graph_names(explorer) and explorer.session.index == 1
    explorer.passes.history.children[0].children[0].click()  # the history list: go to step 0
    assert explorer.session.index == 0 and "bn1" in names(explorer)
    explorer.close()


def test_a_failing_pass_shows_its_error_and_changes_nothing(image):
    explorer = explore(ConvBN().train(), image, profile="off")
    explorer.passes.select.value = "fuse_conv_bn"
    explorer.passes.apply.click()
    assert "needs eval mode" in explorer.error.value and "training mode" in explorer.error.value
    assert len(explorer.session.steps) == 1 and explorer.step_label.value.startswith("step 0 of 0")
    # the error is about a node: the node is selected everywhere and the error line names it
    assert explorer.graph.selected == explorer.table.selected == "conv1"
    assert "at node <b>conv1</b> (selected)" in explorer.error.value
    assert "conv1" in text(explorer.details.body.value)
    explorer.close()


def test_the_apply_button_says_a_pass_is_running_until_it_ends_failed_or_not(convbn, own_registry):
    seen = []

    def watched(gm):
        """Notes the button while it runs."""
        seen.append((convbn.passes.apply.description, convbn.passes.apply.disabled))
        if len(seen) == 2:
            raise RuntimeError("second run fails")
        gm.graph.call_function(torch.relu, (next(iter(gm.graph.nodes)),))  # a change, unused

    registry.register(watched, name="watched")
    convbn.tabs.selected_index = 2
    convbn.passes.select.value = "watched"
    for expected_steps in (2, 2):
        convbn.passes.apply.click()
        assert seen[-1] == ("applying…", True)
        assert (convbn.passes.apply.description, convbn.passes.apply.disabled) == ("apply", False)
        assert len(convbn.session.steps) == expected_steps
    assert "second run fails" in convbn.error.value


def test_a_user_pass_that_raises_shows_the_error(convbn, own_registry):
    def explode(gm, *, factor: float = 2.0):
        """Always fails."""
        for node in gm.graph.nodes:
            raise RuntimeError(f"cannot handle {node.name} with factor {factor}")

    registry.register(explode, name="explode")
    assert "explode" not in convbn.passes.select.options
    convbn.tabs.selected_index = 2  # opening the Passes tab lists passes registered since
    assert "explode" in convbn.passes.select.options
    convbn.passes.select.value = "explode"
    (factor,) = convbn.passes.form.children
    assert isinstance(factor, w.FloatText) and factor.value == 2.0
    factor.value = 3.5
    convbn.passes.apply.click()
    assert "Pass &#x27;explode&#x27; failed" in convbn.error.value and "factor 3.5" in convbn.error.value
    first = next(iter(convbn.session.current.graph))
    assert convbn.graph.selected == first and f"at node <b>{first}</b>" in convbn.error.value
    assert len(convbn.session.steps) == 1
    convbn.passes.select.value = "fuse_conv_bn"
    convbn.passes.apply.click()
    assert convbn.error.value == "" and convbn.session.index == 1


def test_a_pass_that_breaks_the_outputs_gets_a_mismatch_badge_with_the_error(convbn, own_registry):
    def negate(gm):
        """Negates the output (wrongly claims to preserve semantics)."""
        (output,) = gm.graph.find_nodes(op="output")
        with gm.graph.inserting_before(output):
            output.args = (gm.graph.call_function(torch.neg, output.args),)

    registry.register(negate, name="negate")
    convbn.tabs.selected_index = 2
    convbn.passes.select.value = "negate"
    convbn.passes.apply.click()
    assert re.fullmatch(r"mismatch \(max abs [\d.e+-]+, max rel [\d.e+-]+\)", text(convbn.badge.value))
    assert 'class="fxviz-badge-mismatch"' in convbn.badge.value and "beyond tolerance" in convbn.badge.value
    assert [text(row.children[1].value)[:8] for row in convbn.passes.history.children] == ["match", "mismatch"]


def test_a_pass_with_nothing_to_do_says_so_without_a_step(convbn):
    convbn.passes.select.value = "fuse_conv_bn"
    convbn.passes.apply.click()
    assert convbn.status.value == "fuse_conv_bn: folded 1 BatchNorm"  # the pass's note
    assert convbn.passes.apply.disabled  # nothing left to fold: not offered, and a click anyway says why
    convbn.passes.apply.click()
    assert "Nothing to do: no BatchNorm in this graph" in convbn.status.value
    assert convbn.error.value == "" and len(convbn.session.steps) == 2


def test_a_pass_on_selected_nodes_with_parameters(my_module):
    explorer = explore(my_module, torch.randn(5, 4), profile="off")
    explorer.passes.select.value = "fake_quantize"
    (bits,) = explorer.passes.form.children
    assert isinstance(bits, w.IntText) and bits.value == 8
    bits.value = 4
    explorer.passes.scope.value = "selected nodes"
    explorer.graph.selected = "linear"
    assert explorer.passes.nodes.value == ["linear"]
    explorer.passes.apply.click()
    step = explorer.session.current
    assert (step.pass_name, dict(step.params), step.nodes) == ("fake_quantize", {"bits": 4}, ("linear",))
    assert text(explorer.badge.value) == "expected to differ"
    assert "fake_quant" in text(explorer.code.view.html)
    explorer.passes.nodes.value = []
    explorer.passes.apply.click()
    assert "No nodes selected" in explorer.error.value and explorer.session.index == 1
    explorer.passes.select.value = "eliminate_dead_code"  # acts on the whole graph only
    assert explorer.passes.scope.disabled and explorer.passes.scope.value == "whole graph"
    explorer.close()


def test_typed_node_names_autocomplete_on_small_graphs_and_are_checked_on_big_ones(my_module, monkeypatch):
    import fxviz.widgets.panel_passes as panel_passes

    explorer = explore(my_module, torch.randn(5, 4), profile="off")
    assert explorer.passes.nodes.allowed_tags == names(explorer)
    monkeypatch.setattr(panel_passes, "AUTOCOMPLETE_NODES", 3)  # this graph is now "big"
    explorer.passes.select.value = "fake_quantize"
    explorer.passes.scope.value = "selected nodes"
    explorer.passes.show(explorer.session, "")
    assert explorer.passes.nodes.allowed_tags == []  # not resent: any name is taken...
    explorer.passes.nodes.value = ["linear", "no_such_node"]
    explorer.passes.apply.click()  # ...and apply names the one the graph lacks
    assert "no_such_node" in explorer.error.value and explorer.session.index == 0
    explorer.close()


def test_hostile_module_names_are_escaped_everywhere(image):
    explorer = explore(Hostile(), torch.randn(2, 3), profile="sync", profile_kwargs=FAST)
    node = next(n for n in names(explorer) if n not in ("x", "relu", "output"))
    explorer.graph.selected = node
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in explorer.details.body.value
    values = [x.value for x in all_widgets(explorer) if isinstance(x, w.HTML)]
    assert values and not any("<script>" in value for value in values)
    assert "<script>" not in explorer.graph.svg
    assert any(SCRIPT in r["target"] for r in explorer.table.rows)  # plain text for textContent
    explorer.close()


def test_changes_from_another_cell_refresh_it_until_closed(convbn):
    convbn.session.apply("fuse_conv_bn")
    assert convbn.step_label.value.startswith("step 1 of 1") and "bn1" not in names(convbn)
    convbn.close()
    convbn.session.undo()
    assert convbn.step_label.value.startswith("step 1 of 1")


def test_a_closed_explorer_frees_its_session_and_graph(image):
    """Every widget of a closed Explorer, its session and the step's graph can be
    collected: a notebook that opens big graphs one after another keeps none of them."""
    from ipywidgets.widgets.widget import _instances  # every open widget, by comm id

    before = set(_instances)
    torch.manual_seed(0)
    explorer = explore(ConvBN().eval(), image, profile="sync", profile_kwargs=FAST)
    explorer.select("conv1")
    gone = [weakref.ref(o) for o in (explorer, explorer.session, explorer.session.current.gm,
                                     explorer.graph, explorer.table)]
    explorer.close()
    del explorer
    gc.collect()
    assert [ref() for ref in gone] == [None] * len(gone)
    assert set(_instances) <= before  # layouts included: none is left open


def test_colour_modes(convbn):
    convbn.graph.color_mode = "diff"
    assert "step 0 has no previous step" in convbn.graph.status
    assert {item["label"] for item in convbn.graph.legend} == {"placeholder", "call_module", "output"}
    convbn.graph.color_mode = "flops"
    assert convbn.graph.legend[0]["label"].startswith("flops")
    convbn.graph.color_mode = "time"
    assert convbn.graph.legend[0]["label"].startswith("time") and "time share" in convbn.graph.status
    convbn.graph.color_mode = "diff"
    convbn.passes.select.value = "fuse_conv_bn"
    convbn.passes.apply.click()
    assert "diff against step 0" in convbn.graph.status
    assert {item["label"] for item in convbn.graph.legend} == set(colour_modes.MARK_MEANINGS.values())


def test_collapsing_a_module_in_the_view_redraws(resnet18):
    explorer = explore(resnet18, torch.randn(1, 3, 32, 32), profile="off")
    assert "layer1_0_conv1" in graph_names(explorer)
    explorer.graph.collapsed = ["layer1"]  # a click on the cluster in the browser
    kinds = {e["name"]: e["kind"] for e in explorer.graph.elements.values()}
    assert kinds.get("layer1") == "collapsed" and "layer1_0_conv1" not in graph_names(explorer)
    explorer.close()


def test_an_expansion_that_cannot_be_laid_out_keeps_the_drawing_on_screen(resnet18, monkeypatch):
    explorer = explore(resnet18, torch.randn(1, 3, 32, 32), profile="off")
    explorer.graph.collapsed = ["layer1", "layer2", "layer3", "layer4"]  # "Collapse all"
    svg, collapsed = explorer.graph.svg, list(explorer.graph.collapsed)

    def too_slow(source, **_):
        raise RenderError("Laying out 9999 boxes took longer than 10 s, so it was stopped.")

    monkeypatch.setattr(fxviz.draw.render, "layout_svg", too_slow)
    explorer.graph.collapsed = []  # "Expand all"
    assert "took longer than 10 s" in explorer.error.value and "kept" in explorer.error.value
    assert explorer.graph.svg == svg and explorer.graph.collapsed == collapsed
    explorer.close()


def test_a_graph_that_cannot_be_laid_out_shows_why_and_no_stale_picture(convbn, monkeypatch):
    def too_slow(source, **_):
        raise RenderError("Laying out 9999 boxes took longer than 10 s, so it was stopped.")

    monkeypatch.setattr(fxviz.draw.render, "layout_svg", too_slow)
    convbn.passes.select.value = "fuse_conv_bn"
    convbn.passes.apply.click()
    assert "took longer than 10 s" in convbn.error.value
    assert convbn.graph.svg == "" and convbn.graph.elements == {} and "not drawn" in convbn.graph.status
    assert convbn.session.index == 1 and "bn1" not in names(convbn)  # the rest still shows step 1


def test_timing_panel_table_chart_and_node_times(convbn):
    assert "forward" in convbn.timing.summary.value and "repeats" in convbn.timing.summary.value
    chart = convbn.timing.chart.value  # an inline SVG in the theme's colours, transparent: no white card
    assert chart.startswith("<svg") and "var(--jp-ui-font-color1" in chart and "#ffffff" not in chart.lower()
    assert "conv1" in convbn.timing.table.value
    rows = {r["name"]: r for r in convbn.table.rows}
    assert rows["conv1"]["time_us"] > 0 and rows["conv1"]["flops"] > 0 and "time_us" not in convbn.table.data[0]
    assert sum(r["share"] for r in rows.values()) == pytest.approx(100)
    times = dict(zip(convbn.graph.nodes, convbn.graph.times))  # the view's tooltip times (made in the browser)
    assert times["conv1"] == {"time_us": rows["conv1"]["time_us"], "share": rows["conv1"]["share"]}
    convbn.graph.selected = "conv1"
    assert "aten::conv2d" in convbn.details.aten.value and "µs" in convbn.details.body.value


def test_compare_steps_shows_the_timing_diff(convbn):
    convbn.passes.select.value = "fuse_conv_bn"
    convbn.passes.apply.click()
    assert (convbn.timing.step_a.value, convbn.timing.step_b.value) == (0, 1)
    convbn.timing.compare_button.click()
    result = convbn.timing.comparison.value
    assert "1 deleted" in result and "bn1 (BatchNorm2d)" in result
    assert convbn.timing.comparison_chart.value.startswith("<svg")


def test_code_diff_against_the_previous_or_a_chosen_step(convbn):
    assert convbn.code.diff.disabled  # step 0 alone: nothing to diff against
    convbn.passes.select.value = "fuse_conv_bn"
    convbn.passes.apply.click()
    convbn.code.diff.value = True
    assert 'class="fxviz-diff"' in convbn.code.view.html and "step 0 (trace)" in convbn.code.view.html
    assert "bn1 = self.bn1" in text(convbn.code.view.html)
    convbn.passes.select.value = "lower_modules"
    convbn.passes.apply.click()
    assert convbn.code.base.value == 1
    convbn.code.base.value = 0
    assert "step 0 (trace)" in convbn.code.view.html and "step 2 (lower_modules)" in convbn.code.view.html
    convbn.code.diff.value = False
    assert "fxviz-code-hl" in convbn.code.view.html


def test_code_diff_layouts_unified_fits_a_narrow_panel(convbn):
    convbn.passes.select.value = "fuse_conv_bn"
    convbn.passes.apply.click()
    convbn.code.diff.value = True
    fit = convbn.code.view.html  # both: CSS shows one by the panel's width
    assert 'class="fxviz-diff-fit"' in fit and 'class="fxviz-diff"' in fit and "fxviz-diff-unified" in fit
    convbn.code.layout_choice.value = "unified"
    unified = convbn.code.view.html
    assert 'class="fxviz-diff"' not in unified
    removed = [line for line in text(unified).splitlines() if line.startswith("-") and "bn1" in line]
    assert removed and "self.bn1(" in removed[0]
    convbn.code.layout_choice.value = "side by side"
    assert 'class="fxviz-diff"' in convbn.code.view.html and "fxviz-diff-unified" not in convbn.code.view.html


def test_background_profiling_never_holds_up_the_graph(image):
    GATE.clear()  # the worker's measurements wait until the graph has been checked here
    try:
        explorer = explore(Held().eval(), image, profile="background", profile_kwargs=FAST)
        assert explorer.graph.svg and explorer.table.rows[1]["time_us"] is None
        assert "Profiling this step" in explorer.timing.summary.value
        bar = explorer.profiler.progress
        assert bar.layout.display == "" and bar.value == 0  # the progress bar shows, nothing done yet:
        assert "fxviz-busy" in bar._dom_classes  # it moves (explorer.css), not an empty bar that looks stuck
    finally:
        GATE.set()
    explorer.profiler.wait_idle()
    assert explorer.table.rows[1]["time_us"] is not None and "forward" in explorer.timing.summary.value
    assert explorer.profiler.progress.layout.display == "none"
    explorer.close()


@pytest.mark.parametrize("fault, shown", [(RuntimeError("boom"), "profiling failed: RuntimeError: boom"),
                                          (KeyboardInterrupt(), "interrupted")])
def test_a_failure_in_profiling_shows_in_the_timing_panel(image, fault, shown):
    session = Session(Probed().eval(), (image,))
    session.current.graph  # shapes are known before the fault is injected
    FAULTS["profile"] = fault
    try:
        explorer = explore(session, profile="sync", profile_kwargs=FAST)
    finally:
        FAULTS["profile"] = None
    assert shown in explorer.timing.summary.value and explorer.table.rows[1]["time_us"] is None
    assert session.index == 0 and len(session.steps) == 1
    explorer.timing.profile_button.click()  # retried on request: now it works
    assert "forward" in explorer.timing.summary.value
    explorer.close()


def test_profile_off_profiles_on_request_in_the_background(convbn, image):
    explorer = explore(ConvBN().eval(), image, profile="off", profile_kwargs=FAST)
    assert "Profiling is off" in explorer.timing.summary.value
    explorer.timing.profile_button.click()
    explorer.profiler.wait_idle()
    assert "forward" in explorer.timing.summary.value
    explorer.close()


def test_explore_arguments(convbn, image):
    assert isinstance(convbn, Explorer) and isinstance(convbn, w.VBox)
    with pytest.raises(TypeError, match="needs example inputs"):
        explore(ConvBN())
    with pytest.raises(TypeError, match="session has them"):
        explore(convbn.session, image)
    with pytest.raises(ValueError, match="profile must be one of"):
        explore(convbn.session, profile="fast")


def test_the_same_drawing_is_laid_out_once(image, monkeypatch):
    import fxviz.draw.render

    layouts = []
    real = fxviz.draw.render.layout_svg
    monkeypatch.setattr(fxviz.draw.render, "layout_svg", lambda *a, **k: layouts.append(1) or real(*a, **k))
    explorer = explore(ConvBN().eval(), image, profile="sync", profile_kwargs=FAST)
    assert len(layouts) == 1  # the timings that arrived later change nothing in "op" colouring
    explorer.graph.color_mode = "time"
    assert len(layouts) == 2 and "time share" in explorer.graph.status
    explorer.close()


def test_refreshing_and_closing_leave_no_widgets_behind(image):
    from ipywidgets.widgets.widget import _instances as live

    existing = set(live)
    explorer = explore(ConvBN().eval(), image, profile="off")
    explorer.session.apply("fuse_conv_bn")
    drawn = len(set(live) - existing)
    for _ in range(5):
        explorer.undo_button.click()
        explorer.redo_button.click()
    assert len(set(live) - existing) <= drawn + 20  # history rows replaced, not piled up
    explorer.close()
    assert len(set(live) - existing) < 10


def test_keys_undo_and_redo_and_nodes_know_their_inputs_and_users(convbn):
    assert convbn.graph.nodes["bn1"]["inputs"] == ["conv1"] and "bn1" in convbn.graph.nodes["conv1"]["users"]
    press = lambda action: convbn.graph._handle_msg(  # noqa: E731 - what Ctrl+Z in the browser sends
        {"content": {"data": {"method": "custom", "content": {"action": action}}}, "buffers": []})
    press("undo")  # nothing to undo: nothing happens, no error shown
    assert convbn.session.index == 0 and convbn.error.value == ""
    convbn.passes.select.value = "fuse_conv_bn"
    convbn.passes.apply.click()
    press("undo")
    assert convbn.session.index == 0 and "bn1" in names(convbn)
    press("redo")
    assert convbn.session.index == 1 and "bn1" not in names(convbn)


def test_every_anywidget_class_holds_its_front_end_as_text():
    """anywidget turns a Path ``_esm``/``_css`` into a FileContents whose change signal
    holds every instance strongly: no widget made from such a class is ever freed."""
    import anywidget
    import traitlets

    import fxviz.widgets  # noqa: F401  (imports every widget class)

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    ours = [c for c in subclasses(anywidget.AnyWidget) if c.__module__.startswith("fxviz.")]
    assert {c.__name__ for c in ours} >= {"GraphView", "TableView", "CodeView"}
    for cls in ours:  # with the per-instance subclasses add_traits makes, which hold a trait
        for key in ("_esm", "_css"):
            value = cls.__dict__.get(key, "")
            assert isinstance(value, str | traitlets.TraitType), f"{cls.__name__}.{key} is {type(value)}"


class LongChain(nn.Module):
    """300 x (tanh, + 1): a code longer than the Code tab shows at once."""

    def forward(self, x):
        for _ in range(300):
            x = torch.tanh(x) + 1
        return x


def test_a_long_code_and_its_diff_show_the_part_at_the_selected_node():
    from fxviz.widgets.panel_code import CODE_WINDOW

    explorer = explore(LongChain(), torch.randn(2), profile="off")
    try:
        code = explorer.session.current.code  # numbered as diffs number it: FX's leading blank lines count
        lead = len(code) - len(code.lstrip("\n"))
        html_now = explorer.code.view.html
        expected = f"Lines {lead + 1}–{lead + CODE_WINDOW} of {len(code.splitlines())} (too long to show whole), from the start"
        assert expected in text(html_now)
        assert "add_100 =" in text(html_now) and "add_250 =" not in text(html_now)
        explorer.select("add_250")
        marked = re.search(r'<span class="hll">(.*?)</span>\n', explorer.code.view.html, re.S)
        assert "add_250 = " in text(marked.group(1)) and "around the selected node" in explorer.code.view.html
        assert "add_10 =" not in text(explorer.code.view.html)
        explorer.passes.select.value = "replace_op"  # every add becomes a mul: 900 diff lines
        explorer.passes.apply.click()
        explorer.select("mul_250")
        explorer.code.diff.value = True
        explorer.code.layout_choice.value = "unified"
        shown = text(explorer.code.view.html)
        assert "Part of a diff of " in shown and "from the selected node's line" in shown
        assert "+    mul_250 = " in shown and "mul_10 " not in shown
        explorer.code.layout_choice.value = "side by side"  # a changed line beside its old self
        rows = re.findall(r'<tr class="fxviz-diff-replace">(.*?)</tr>', explorer.code.view.html)
        assert any("add_250 = " in text(row) and "mul_250 = " in text(row) for row in rows)
        assert len(rows) <= CODE_WINDOW and not any("mul_10 " in text(row) for row in rows)
    finally:
        explorer.close()


def test_in_a_kernel_the_first_display_is_drawn_before_the_check_runs(monkeypatch):
    """A kernel runs what the Explorer puts off once the cell's output is sent: the check (inline
    with profile="off", else the worker's) waits for it, the drawing and the badge do not."""
    from fxviz.widgets import explorer as explorer_module

    later = []
    monkeypatch.setattr(explorer_module, "after_cell", lambda fn: later.append(fn) or True)
    session = Session(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), (torch.randn(2, 4),))
    explorer = Explorer(session, profile="off")
    try:
        assert "<svg" in explorer.graph.svg and not session.current.check_done
        assert text(explorer.badge.value) != "match"
        for fn in later:  # the cell is done
            fn()
        assert session.current.check_done and text(explorer.badge.value) == "match"
    finally:
        explorer.close()

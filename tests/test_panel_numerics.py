"""Where a step goes wrong, in the Explorer: the mismatch badge's "show where", the error
in Details and the node table, and the Memory tab (widgets/step_error.py, panel_memory.py)."""
from __future__ import annotations

import html
import operator
import re

import pytest
import torch
from torch import nn

from fxviz import passes

from fxviz.draw import colour_modes
from fxviz.widgets import explore


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 4, 3)

    def forward(self, x):
        return self.conv2(self.bn1(self.conv1(x)).relu())


def slip_after_conv1(gm, scale: float = 1.01):
    """A user's pass with a bug: conv1's users read conv1 * scale (conv1 in a module too)."""
    conv = next(n for n in gm.graph.nodes if n.name.endswith("conv1"))
    with gm.graph.inserting_after(conv):
        wrong = gm.graph.call_function(operator.mul, (conv, scale))
    conv.replace_all_uses_with(wrong, delete_user_cb=lambda user: user is not wrong)
    gm.recompile()
    return gm


def scale_output(gm, scale: float = 1.01):
    """Every output times ``scale``: the output is the first node off."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(out):
        wrong = gm.graph.call_function(operator.mul, (out.args[0], scale))
    out.args = (wrong,)
    gm.recompile()
    return gm


def text(markup):
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


@pytest.fixture
def explorer():
    passes.register(slip_after_conv1)
    passes.register(scale_output)
    torch.manual_seed(0)
    ex = explore(Net().eval(), torch.randn(1, 3, 10, 10), profile="off")
    yield ex
    ex.close()
    passes.unregister("slip_after_conv1")
    passes.unregister("scale_output")


def apply(ex, name):
    ex.passes.select.value = name
    ex.passes.apply.click()
    assert ex.session.current.pass_name == name, ex.error.value


def test_show_where_selects_the_first_divergent_node_and_details_splits_its_error(explorer):
    ex = explorer
    assert ex.step_error.where.layout.display == "none"  # step 0: nothing to compare
    apply(ex, "slip_after_conv1")
    assert "fxviz-badge-mismatch" in ex.badge.value and ex.step_error.where.layout.display == ""
    assert [c["key"] for c in ex.table.columns][-1] != "error"  # not compared until asked
    ex.step_error.where.click()
    assert ex.graph.selected == "bn1"  # the first node reading conv1 * 1.01
    shown = text(ex.details.body.value)
    rows = ex.session.compare(0, 1).numerics.set_index("node")
    assert "Error vs step 0" in shown and "the first node beyond the check's tolerance" in shown
    assert f"introduced here {rows.at['bn1', 'introduced']:.3g} (run on step 0's values" in shown
    assert 5e-3 < rows.at["bn1", "introduced"] < 2e-2  # the slip's 1 %, all of it introduced here
    assert ("carried in nothing to compare; input mul added by the pass (no counterpart in step 0): its change "
            "counts as introduced here") in shown  # the slip itself
    assert "verdict the first node beyond the check's tolerance: the error comes in through mul, which the pass added" \
        in shown
    assert "SQNR 40.0 dB" in shown and "cosine 1.000000" in shown  # 1 % off: 40 dB; a scale keeps the direction
    assert ex.status.value == ("First node beyond the check's tolerance against step 0: bn1 (Details: the error "
                               "introduced there, carried in).")

    ex.select("conv2")  # downstream: carried in, not introduced
    shown = text(ex.details.body.value)
    assert "verdict beyond the check's tolerance" in shown and "(the worst of its inputs: relu)" in shown
    assert rows.at["conv2", "introduced"] < 1e-5 < rows.at["conv2", "max_rel"]
    ex.select("mul")
    assert "a node the pass added: nothing in step 0 stands for it" in text(ex.details.body.value)

    errors = dict(zip(ex.table.rows.columns["name"], ex.table.rows.columns["error"]))
    assert ex.table.columns[-1] == {"key": "error", "label": "error vs step 0", "numeric": True, "significant": 2,
                                    "width": 124}
    assert errors["conv1"] == 0 and errors["mul"] is None
    assert errors["conv2"] == pytest.approx(rows.at["conv2", "max_rel"])

    ex.undo_button.click()  # step 0: no column, no link, no error rows
    assert ex.table.columns[-1]["key"] != "error" and ex.step_error.where.layout.display == "none"
    assert "Error vs" not in ex.details.body.value


def test_a_mismatch_carried_from_an_earlier_step_is_said_so(explorer):
    ex = explorer
    apply(ex, "scale_output")  # step 1: outputs 1 % off
    ex.step_error.where.click()
    assert ex.graph.selected == "output"  # the first (and only) node beyond tolerance
    ex.session.apply("scale_output", scale=1.0)  # step 2: exact against step 1, still off the original
    assert ex.session.current.check.status == "mismatch"
    ex.step_error.where.click()
    assert not ex.session.compare(1, 2).numerics["diverged"].any()
    assert ex.graph.selected == "output"  # left as it was: nothing to lead to
    status = ex.status.value
    assert status.startswith("Nothing of step 2 is beyond the check's tolerance against step 1 (largest relative "
                             "error 0)"), status  # a multiplication by 1.0: exact
    assert "yet its outputs differ from the original model's: step 1's own check says mismatch, look there" in status


def test_the_error_colour_mode_shows_the_errors_without_a_click(explorer):
    ex = explorer
    apply(ex, "slip_after_conv1")
    ex.graph.color_mode = "error"
    assert ex.table.columns[-1]["key"] == "error"
    legend = ex.graph.legend
    assert legend[0] == {"label": "not compared (no counterpart)", "color": colour_modes.NOT_COMPARED}
    worst = ex.session.compare(0, 1).numerics["max_rel"].max()
    assert legend[-1]["label"] == f"error {worst:.3g}"
    fills = dict(re.findall(r'<g id="fx&#45;(\w+)" class="node">\s*<title>\w+</title>\s*<path fill="(#\w+)"',
                            ex.graph.svg))
    assert fills["mul"] == colour_modes.NOT_COMPARED  # the pass's own node: never drawn as exact
    assert fills["conv1"] != fills["bn1"] != colour_modes.NOT_COMPARED
    ex.select("bn1")
    assert "introduced here" in text(ex.details.body.value)
    ex.graph.color_mode = "op"
    assert ex.table.columns[-1]["key"] != "error"


def test_errors_are_against_the_step_chosen_in_the_list(explorer):
    """The "against" list picks the earlier step: the colouring, the column, Details and show-where follow it."""
    ex = explorer
    apply(ex, "slip_after_conv1")  # step 1: off from bn1 on
    ex.session.apply("scale_output")  # step 2: against step 1 only its output is off
    against = ex.step_error.against
    assert against.layout.display == "none"  # no errors shown yet
    ex.graph.color_mode = "error"
    assert against.layout.display == "" and against.value == -1
    assert against.options == (("previous (step 1)", -1), (f"step 0 · {ex.session.steps[0].pass_name}", 0))
    vs1, vs0 = (ex.session.compare(i, 2).numerics.set_index("node") for i in (1, 0))

    def errors():
        return dict(zip(ex.table.rows.columns["name"], ex.table.rows.columns["error"]))

    ex.select("conv2")
    assert ex.table.columns[-1]["label"] == "error vs step 1" and errors()["conv2"] == 0
    assert ex.graph.legend[-1]["label"] == f"error {vs1['max_rel'].max():.3g}"
    assert "Error vs step 1 max rel 0 " in text(ex.details.body.value)

    against.value = 0  # the user picks the original
    assert vs0.at["conv2", "max_rel"] > 1e-3  # the slip, carried to conv2
    assert ex.table.columns[-1]["label"] == "error vs step 0"
    assert errors()["conv2"] == pytest.approx(vs0.at["conv2", "max_rel"])
    assert ex.graph.legend[-1]["label"] == f"error {vs0['max_rel'].max():.3g}"
    assert f"Error vs step 0 max rel {vs0.at['conv2', 'max_rel']:.3g}" in text(ex.details.body.value)
    ex.step_error.where.click()
    assert ex.graph.selected == "bn1"  # where step 2 starts to differ from step 0
    assert ex.status.value.startswith("First node beyond the check's tolerance against step 0: bn1")

    ex.undo_button.click()  # step 1: only step 0 before it, the choice kept for later
    assert against.options == (("previous (step 0)", -1),) and ex.table.columns[-1]["label"] == "error vs step 0"
    ex.redo_button.click()
    assert against.value == 0 and ex.table.columns[-1]["label"] == "error vs step 0"
    against.value = -1
    ex.step_error.where.click()
    assert ex.graph.selected == "output" and ex.table.columns[-1]["label"] == "error vs step 1"


class Wrapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = Net()

    def forward(self, x):
        return self.body(x)


def graph_names(ex):
    return {e["name"] for e in ex.graph.elements.values() if e["kind"] == "node"}


@pytest.mark.parametrize("selected_first", [False, True])
def test_show_where_opens_the_collapsed_module_that_hides_the_node(selected_first):
    """Selected already (then its module collapsed) or not: the view opens the box and shows it."""
    passes.register(slip_after_conv1)
    torch.manual_seed(0)
    ex = explore(Wrapped().eval(), torch.randn(1, 3, 10, 10), profile="off")
    try:
        apply(ex, "slip_after_conv1")
        if selected_first:
            ex.select("body_bn1")
        ex.graph.collapsed = ["body"]  # a click on the module's box in the browser
        assert "body_bn1" not in graph_names(ex) and "body" in ex.graph.collapsed
        ex.step_error.where.click()
        assert ex.graph.selected == "body_bn1" and "body_bn1" in graph_names(ex)
        assert "body" not in ex.graph.collapsed
    finally:
        ex.close()
        passes.unregister("slip_after_conv1")


def test_the_memory_tab_and_details_give_bytes_with_the_peak_selectable(explorer):
    ex = explorer
    memory = ex.session.current.memory
    peak, where = memory.attrs["peak_bytes"], memory.attrs["peak_node"]
    assert ex.memory.chart.value == ""  # drawn when opened
    memory.attrs["measured_peak_bytes"] = 2 * peak  # as on a GPU (Step.memory measures one forward there)
    ex.tabs.selected_index = 4
    assert f"Measured on the GPU over one forward: {2 * peak / 1e3:.3g} kB (the estimate is 0.50× that)" in \
        text(ex.memory.summary.value)
    assert "<svg" in ex.memory.chart.value and "bytes alive (kB)" in ex.memory.chart.value
    summary = text(ex.memory.summary.value)
    assert f"Peak: {peak / 1e3:.3g} kB of activations alive, at {where}" in summary
    ex.memory.peak.click()
    assert ex.graph.selected == where
    row = memory.set_index("node").loc["conv1"]
    ex.select("conv1")
    shown = text(ex.details.body.value)
    assert row["output_bytes"] == 8 * 8 * 8 * 4 and f"output {row['output_bytes'] / 1e3:.3g} kB" in shown
    assert f"alive after it {row['live_bytes'] / 1e3:.3g} kB of activations ({row['live_bytes'] / peak:.0%}" in shown
    ex.select("x")
    assert "an input or weight: alive throughout, counted apart" in text(ex.details.body.value)
    assert "Against step" not in summary  # step 0: nothing before it
    apply(ex, "fuse_conv_bn")  # bn1 folded into conv1: the same bytes at their peak, at another node
    after = ex.session.current.memory.attrs
    moved = text(ex.memory.summary.value)
    assert after["peak_node"] != where and after["peak_bytes"] == peak
    assert (f"Against step 0: peak {peak / 1e3:.3g} kB at {where} → {peak / 1e3:.3g} kB at {after['peak_node']} "
            "(1.00×, the peak moved to another node)") in moved, moved


def test_the_colouring_and_the_panels_share_one_run_of_both_steps(explorer, monkeypatch):
    from fxviz.diff import comparison
    from fxviz.checks.numerics import numerics

    runs = []
    monkeypatch.setattr(comparison, "numerics", lambda *args: runs.append(args) or numerics(*args))
    ex = explorer
    apply(ex, "slip_after_conv1")
    ex.graph.color_mode = "error"
    ex.step_error.where.click()
    ex.select("conv2")
    assert ex.graph.selected == "conv2" and "Error vs step 0" in ex.details.body.value
    assert len(runs) == 1


def test_a_differing_step_in_the_history_leads_there_and_to_where_it_starts(explorer):
    ex = explorer
    apply(ex, "slip_after_conv1")
    ex.session.apply("scale_output", scale=1.0)  # step 2; step 1 is the one that slipped
    links = {row.children[0].description: row.children[2] for row in ex.passes.history.children
             if len(row.children) == 3}
    assert list(links) == ["1 · slip_after_conv1", "2 · scale_output"]  # both differ from the original
    assert "fxviz-history-where" in links["1 · slip_after_conv1"]._dom_classes
    links["1 · slip_after_conv1"].click()
    assert ex.session.index == 1 and ex.graph.selected == "bn1"
    assert "introduced here" in text(ex.details.body.value)


def slip_after_relu(gm, scale: float = 1.01):
    """A training step's pass with a bug: the first ReLU's users read it times ``scale``."""
    relu = next(n for n in gm.graph.nodes if n.name == "relu")
    with gm.graph.inserting_after(relu):
        wrong = gm.graph.call_function(operator.mul, (relu, scale))
    relu.replace_all_uses_with(wrong, delete_user_cb=lambda user: user is not wrong)
    gm.recompile()
    return gm


def test_a_training_step_says_which_gradient_diverges_first():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

    def train_step(x, y):
        loss = nn.functional.mse_loss(mlp(x), y)
        loss.backward()
        return loss

    passes.register(slip_after_relu)
    ex = explore(train_step, torch.randn(4, 8), torch.randn(4, 1), profile="off")
    try:
        ex.session.apply("slip_after_relu")
        ex.step_error.where.click()
        gradients = ex.step_error.rows(ex.session.current).attrs["gradients"]
        first = gradients[gradients["diverged"]].iloc[0]
        assert len(gradients) == 4 and gradients["diverged"].all()  # every gradient flows through the slip
        assert (f"Gradients: 4 of 4 beyond the check's tolerance, the first {first['parameter']}'s (node "
                f"{first['node']})."
                in ex.status.value), ex.status.value
        ex.select("output")
        shown = text(ex.details.body.value)
        assert "Gradients vs step 0" in shown and f"{first['parameter']} (first to diverge)" in shown
        assert all(parameter in shown for parameter in gradients["parameter"])
        ex.select(first["node"])
        assert (f"Gradient vs step 0 gradient of {first['parameter']} max rel {first['max_rel']:.3g}, "
                f"{first['sqnr_db']:.1f} dB, beyond the check's tolerance") in text(ex.details.body.value)
    finally:
        ex.close()
        passes.unregister("slip_after_relu")


def test_the_memory_panel_runs_no_model(explorer):
    """On CUDA Step.memory measures a forward: a display must not start one behind the profiler's back."""
    ex = explorer
    apply(ex, "slip_after_conv1")
    ex.tabs.selected_index = 4
    ex.select("conv1")
    step = ex.session.current
    assert "<svg" in ex.memory.chart.value and "alive after it" in text(ex.details.body.value)
    assert "Against step 0: peak" in text(ex.memory.summary.value)
    assert "memory" not in vars(step) and "memory" not in vars(ex.session.steps[0])  # estimated from shapes only
    assert text(ex.memory.summary.value).startswith(f"Peak: {step.memory.attrs['peak_bytes'] / 1e3:.3g} kB")

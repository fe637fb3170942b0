"""The comparison of two steps and its per-node numerics judge as the check does: float32's
own rounding (judged against a float64 run) is no difference and no divergence; a real
error still is, at its first node."""
import torch

import fxviz
from fxviz.checks import _numerics_truth
from fxviz.checks.numerics import first_divergence
from fxviz.diff import comparison
from test_check_float64 import flip_sums, session


def wrong_constant(gm):
    """Sums flipped (float32 noise), and ``w``'s gradient scaled by 1.01 at its first node (a real error)."""
    flip_sums(gm)
    node = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.mul.Tensor and n.args[1] == 0.01
                and n.args[0].target == torch.ops.aten.ones_like.default)
    node.args = (node.args[0], 0.0101)
    gm.recompile()
    return gm


def test_the_comparison_of_a_step_that_differs_by_float32_rounding_agrees_with_its_check():
    s = session()
    s.apply(flip_sums)
    assert s.current.check.status == "match"
    cmp = s.compare(0, 1)
    assert cmp.output_diff.status == "match", cmp.output_diff.message
    assert cmp.output_diff.message.startswith("outputs match within float32's own error against float64")
    assert "from float32 step 0" in cmp.output_diff.message and "float64 run of step 0's graph" in cmp.output_diff.message
    rows = cmp.numerics.set_index("node")
    assert rows.at["sub_1", "rounding"] and not rows["diverged"].any()  # the cancelling difference: rounding
    assert cmp.first_divergence is None and cmp.first_gradient_divergence is None
    gradients = cmp.gradients.set_index("node")
    assert gradients["rounding"].any() and not gradients["diverged"].any()


def test_a_real_error_is_still_a_difference_at_its_first_node_past_the_rounding():
    s = session()
    s.apply(wrong_constant)
    assert s.current.check.status == "mismatch"
    cmp = s.compare(0, 1)
    assert cmp.output_diff.status == "mismatch" and "Not float32's rounding" in cmp.output_diff.message
    rows = cmp.numerics.set_index("node")
    assert rows.at["sub_1", "rounding"] and not rows.at["sub_1", "diverged"]  # before it in graph order: noise
    assert cmp.first_divergence == "mul_3"
    assert cmp.gradients.set_index("node").at["mul_4", "diverged"]


def unchanged(gm):
    gm.recompile()
    return gm


def test_no_float64_run_where_float32_finds_no_difference(monkeypatch):
    calls = []
    monkeypatch.setattr(comparison, "float64_outputs", lambda *a: calls.append("outputs"))
    monkeypatch.setattr(_numerics_truth, "float64_outputs", lambda *a: calls.append("nodes"))
    s = session()
    s.apply(unchanged)
    cmp = s.compare(0, 1)
    assert cmp.output_diff.status == "match" and cmp.first_divergence is None
    assert not cmp.numerics["rounding"].any() and calls == []


def test_the_explorer_calls_float32_rounding_no_divergence():
    from fxviz.widgets import explore
    from test_check_float64 import TwoScales, training_step
    from test_panel_numerics import text

    torch.manual_seed(0)
    ex = explore(training_step(TwoScales()), torch.randn(1000), tracer="make_fx", profile="off")
    try:
        ex.session.apply(flip_sums)
        ex.graph.color_mode = "error"
        ex.select("sub_1")
        assert "verdict within float32's own error against float64" in text(ex.details.body.value)
        ex.select("output")
        shown = text(ex.details.body.value)
        assert "0 of 2 beyond the check's tolerance" in shown and "first to diverge" not in shown
        assert "within float32's own error against float64" in shown  # the gradient of a, in the table
    finally:
        ex.close()


def test_runs_kept_within_their_element_budget_judge_every_node_alike(monkeypatch):
    """One node a run (the budget below any node's size): the same verdicts up to the first divergence."""
    s = session()
    s.apply(wrong_constant)
    whole = s.compare(0, 1).numerics
    monkeypatch.setattr(_numerics_truth, "ELEMENTS", 0)
    judged = []
    judge = _numerics_truth._judged
    monkeypatch.setattr(_numerics_truth, "_judged", lambda a, b, pairs: judged.append(len(pairs)) or judge(a, b, pairs))
    one_by_one = comparison.compare(s.steps[0], s.steps[1]).numerics
    assert judged[:3] == [1, 1, 1]  # sub_1, mul (rounding), mul_3 (no rounding: the search stops); then gradients
    assert first_divergence(one_by_one) == first_divergence(whole) == "mul_3"
    assert list(one_by_one.loc[one_by_one["rounding"], "node"]) == ["sub_1", "mul"]
    assert whole.set_index("node").loc[["sub_1", "mul"], "rounding"].all()


def test_a_training_step_after_run_decompositions_compares_its_gradients():
    """run_decompositions returns the outputs flat (its forward nests them again) and names its
    nodes anew: the gradients are found as forward returns them, and none diverges."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 1))
    params = list(net.parameters())

    def step(x):
        loss = net(x).pow(2).mean()
        return loss, torch.autograd.grad(loss, params)

    s = fxviz.Session(step, (torch.randn(4, 8),), tracer="make_fx")
    s.apply("run_decompositions")
    assert len(s.current.gm.graph.find_nodes(op="output")[0].args[0]) == 1 + len(params)  # flat
    cmp = s.compare(0, 1)
    assert len(cmp.gradients) == len(params) and cmp.gradients["max_rel"].notna().all()
    assert cmp.first_gradient_divergence is None and cmp.first_divergence is None
    assert cmp.output_diff.status == s.current.check.status == "match"

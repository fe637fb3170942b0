"""The numeric check: dtype-aware tolerances, nested outputs, honest statuses."""
import collections
import copy
import math

import pytest
import torch
from torch import nn

import fxviz
from fxviz.checks.check import CheckResult, check_outputs, compare_outputs, random_like, run_outputs, tolerance


def test_identical_outputs_match_with_zero_error():
    out = [torch.randn(4, 5)]
    result = compare_outputs(out, [out[0].clone()])
    assert (result.status, result.max_abs, result.max_rel, result.n_inputs) == ("match", 0.0, 0.0, 1)
    assert result.ok


def test_error_is_measured_against_the_scale_of_the_output():
    expected = torch.tensor([1000.0, 0.0])
    # 5e-3 absolute on an output of scale 1000: 5e-6 relative, a rounding-level change
    result = compare_outputs([expected], [expected + torch.tensor([0.0, 5e-3])])
    assert result.status == "match"
    assert result.max_abs == pytest.approx(5e-3, rel=1e-3)
    assert result.max_rel == pytest.approx(5e-6, rel=1e-3)


def test_an_error_beyond_tolerance_is_a_mismatch_that_names_the_leaf():
    expected = (torch.ones(3), {"logits": torch.ones(2)})
    actual = (torch.ones(3), {"logits": torch.tensor([1.0, 1.1])})
    result = compare_outputs([expected], [actual])
    assert result.status == "mismatch" and not result.ok
    assert result.max_abs == pytest.approx(0.1, rel=1e-5)
    assert "output[1]['logits']" in result.message


def test_tolerances_depend_on_dtype():
    assert tolerance(torch.float16) > tolerance(torch.float32) > tolerance(torch.float64)
    assert tolerance(torch.int64) == 0.0
    base = torch.ones(8)
    nudged = base + 2e-3
    assert compare_outputs([base.half()], [nudged.half()]).status == "match"
    assert compare_outputs([base], [nudged]).status == "mismatch"


def test_integer_outputs_must_be_equal():
    assert compare_outputs([torch.tensor([1, 2])], [torch.tensor([1, 2])]).status == "match"
    result = compare_outputs([torch.tensor([1, 2])], [torch.tensor([1, 3])])
    assert result.status == "mismatch" and math.isinf(result.max_abs)


def test_bool_outputs_are_compared_exactly():
    """A graph that returns a condition (a dynamo graph ending at a graph break) has a bool output."""
    assert compare_outputs([torch.tensor(True)], [torch.tensor(True)]).status == "match"
    assert compare_outputs([torch.tensor([True, False])], [torch.tensor([True, True])]).status == "mismatch"


def test_tf32_float32_gets_tf32s_tolerance_and_nothing_else_does():
    assert tolerance(torch.float32, tf32=True) == 1e-3 > tolerance(torch.float32)
    assert tolerance(torch.float16, tf32=True) == tolerance(torch.float16)  # already wider
    assert tolerance(torch.float64, tf32=True) == tolerance(torch.float64)


def test_topk_results_compare_values_and_indices():
    x = torch.tensor([[3.0, 1.0, 2.0]])
    same = compare_outputs([torch.topk(x, 2)], [torch.topk(x.clone(), 2)])
    swapped = compare_outputs([torch.topk(x, 2)], [torch.topk(torch.tensor([[1.0, 3.0, 2.0]]), 2)])
    assert same.status == "match"
    assert swapped.status == "mismatch" and "output[1]" in swapped.message


def test_named_tuples_and_plain_values_are_compared():
    Pair = collections.namedtuple("Pair", "a b")
    assert compare_outputs([Pair(torch.ones(1), 3)], [Pair(torch.ones(1), 3)]).status == "match"
    result = compare_outputs([Pair(torch.ones(1), 3)], [Pair(torch.ones(1), 4)])
    assert result.status == "mismatch" and "expected 3, got 4" in result.message


def test_a_different_structure_is_a_mismatch_with_a_reason():
    result = compare_outputs([(torch.ones(2), torch.ones(2))], [torch.ones(2)])
    assert result.status == "mismatch" and math.isinf(result.max_abs)
    assert "expected a sequence of 2, got a tensor of shape (2,)" in result.message
    shapes = compare_outputs([torch.ones(2)], [torch.ones(3)])
    assert "expected a tensor of shape (2,)" in shapes.message


def test_nan_must_sit_at_the_same_places():
    nan = float("nan")
    assert compare_outputs([torch.tensor([nan, 1.0])], [torch.tensor([nan, 1.0])]).status == "match"
    moved = compare_outputs([torch.tensor([nan, 1.0])], [torch.tensor([1.0, nan])])
    assert moved.status == "mismatch" and math.isinf(moved.max_abs)


def test_expected_to_differ_reports_numbers_but_not_a_mismatch():
    result = compare_outputs([torch.zeros(2)], [torch.ones(2)], expected_to_differ=True)
    assert result.status == "expected to differ" and result.ok
    assert result.max_abs == 1.0
    assert "outputs differ" in result.message


def test_check_outputs_runs_both_callables_on_every_input():
    inputs = [(torch.randn(2, 3),), (torch.randn(2, 3),)]
    result = check_outputs(torch.relu, lambda x: x.clamp(min=0), inputs)
    assert isinstance(result, CheckResult)
    assert (result.status, result.n_inputs) == ("match", 2)
    assert check_outputs(torch.relu, torch.abs, inputs).status == "mismatch"


def test_random_inputs_keep_shape_dtype_strides_and_integer_range():
    image = torch.randn(2, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    tokens = torch.tensor([[3, 7, 5]])
    new_image, new_tokens, flag = random_like((image, tokens, True), seed=1)
    assert new_image.shape == image.shape and new_image.stride() == image.stride()
    assert not torch.equal(new_image, image)
    assert new_tokens.dtype == torch.int64 and 3 <= int(new_tokens.min()) and int(new_tokens.max()) <= 7
    assert flag is True
    assert torch.equal(random_like((image,), seed=1)[0], new_image)


def test_run_outputs_draws_the_same_dropout_masks_and_keeps_buffers():
    model = nn.Sequential(nn.BatchNorm1d(4), nn.Dropout(0.5)).train()
    inputs = [(torch.randn(8, 4),)]
    first, second = run_outputs(model, inputs), run_outputs(model, inputs)
    assert torch.equal(first[0], second[0])
    assert torch.equal(model[0].running_mean, torch.zeros(4))


def test_tolerance_is_relative_to_a_tiny_output():
    """Outputs that peak at 1e-4 with one conv weight 1 % off: a mismatch (an absolute
    floor of 1e-5 used to swamp the 1.7 % relative error and say "match")."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.Linear(4 * 6 * 6, 5)).eval()
    inputs = [(torch.randn(1, 3, 8, 8),)]
    with torch.no_grad():
        model[2].weight.mul_(1e-4 / model(*inputs[0]).abs().max())
        model[2].bias.zero_()
    changed = copy.deepcopy(model)
    with torch.no_grad():
        changed[0].weight.mul_(1.01)  # the conv's weight 1 % off
    assert 5e-5 < float(run_outputs(model, inputs)[0].abs().max()) < 2e-4
    result = check_outputs(model, changed, inputs)
    assert result.status == "mismatch" and result.max_rel > 1e-3
    assert check_outputs(model, copy.deepcopy(model), inputs).status == "match"


def test_all_zero_outputs_say_nothing_was_compared():
    result = compare_outputs([torch.zeros(3)], [torch.zeros(3)])
    assert result.status == "nothing compared" and result.ok
    assert "nothing could be compared" in result.message
    assert compare_outputs([torch.zeros(3)], [torch.tensor([0.0, 1e-9, 0.0])]).status == "mismatch"
    mixed = compare_outputs([(torch.zeros(3), torch.ones(2))], [(torch.zeros(3), torch.ones(2))])
    assert mixed.status == "match" and "1 all-zero or empty output(s) not compared" in mixed.message


def test_a_zero_initialised_head_is_named_as_the_likely_cause_when_nothing_is_compared():
    """timm's and torchvision's ViTs start with a zero head: before training every output is zero."""
    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3))
    nn.init.zeros_(model[2].weight), nn.init.zeros_(model[2].bias)
    check = fxviz.Session(model, torch.randn(2, 4)).current.check
    assert check.status == "nothing compared"
    assert "on all 3 inputs tried" in check.message and "last layer initialised to zero" in check.message


def test_nan_in_one_output_only_is_a_mismatch():
    result = compare_outputs([torch.tensor([1.0, 2.0])], [torch.tensor([1.0, float("nan")])])
    assert result.status == "mismatch" and math.isinf(result.max_abs)


def test_a_training_step_returning_gradients_is_checked():
    """A function calling torch.autograd.grad runs with autograd on (it used to fail with
    'element 0 of tensors does not require grad'); its outputs come back detached."""
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))

    def step(x):
        return torch.autograd.grad(model(x).sum(), [model[0].weight])

    inputs = [(torch.randn(5, 4),)]
    (grad,) = run_outputs(step, inputs)[0]
    assert grad.shape == (3, 4) and not grad.requires_grad and float(grad.abs().max()) > 0
    assert check_outputs(step, step, inputs).status == "match"


def test_a_check_that_cannot_run_is_an_error_state_with_advice():
    result = CheckResult.failed("running the model", RuntimeError("boom"), 3, "Try X.")
    assert (result.status, result.ok, result.n_inputs) == ("error", False, 3)
    assert result.message == "running the model failed: RuntimeError: boom. Try X."


def test_a_make_fx_training_step_session_checks_and_a_failing_reference_is_an_error():
    from fxviz import Session

    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))

    def step(x):
        return torch.autograd.grad(model(x).sum(), [model[0].weight])

    session = Session(step, (torch.randn(5, 4),), tracer="make_fx", module=model)
    assert session.current.check.status == "match" and session.current.check.n_inputs == 3

    calls = []

    def flaky(x):  # runs while tracing, fails when the check runs it again
        calls.append(1)
        if len(calls) > 1:
            raise ValueError("only once")
        return x * 2

    broken = Session(flaky, (torch.ones(2),), tracer="make_fx")
    check = broken.current.check  # no exception: a state with the error and advice
    assert check.status == "error" and "ValueError: only once" in check.message
    assert "n_random_inputs=0" in check.message and broken.current.check_done


class FastPathWithoutGrad(nn.Module):
    """Computes otherwise under no_grad, as nn.TransformerEncoder's fast path does with a
    padding mask (it zeroes the padded positions); a trace follows the autograd path."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        return y.clamp(min=0) if not torch.is_grad_enabled() else y


def test_a_model_that_computes_otherwise_without_autograd_is_named_in_the_mismatch():
    check = fxviz.Session(FastPathWithoutGrad(), torch.randn(3, 4)).current.check
    assert check.status == "mismatch"
    assert "the graph matches it run with autograd on" in check.message
    counting = fxviz.Session(CountsItsCalls(), torch.randn(3, 4)).current.check
    assert counting.status == "mismatch" and "autograd" not in counting.message  # only where it explains


class CountsItsCalls(nn.Module):
    """A Python counter the trace bakes in: a mismatch in either grad mode."""

    calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


def test_gradients_allow_rounding_noise_that_follows_the_largest_and_catch_a_one_percent_error():
    """An LLM step's embedding gradient (a few % of the largest) comes back 3e-6 of the
    largest off after a reordering (bench/frontends.py "qwen3 (export joint)"): rounding,
    not a bug (1.5e-4 of its own scale: judged by it alone, a mismatch). A 1 % error in a
    gradient at 20 % of the largest is one."""
    from fxviz.checks.check import Gradients

    ramp = torch.linspace(-1, 1, 64)  # the largest gradient: 1
    grads = Gradients(big=ramp, embed=0.02 * ramp, mid=0.2 * ramp)
    noisy = Gradients({**grads, "embed": grads["embed"] + 3e-6 * torch.ones(64)})
    assert compare_outputs([(grads,)], [(noisy,)]).status == "match"
    wrong = Gradients({**grads, "mid": grads["mid"] * 1.01})
    result = compare_outputs([(grads,)], [(wrong,)])
    assert result.status == "mismatch" and "'mid'" in result.message

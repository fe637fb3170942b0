"""The numeric check: dtype-aware tolerances, nested outputs, honest statuses."""
import collections
import math

import pytest
import torch
from torch import nn

from fxviz.check import CheckResult, check_outputs, compare_outputs, random_like, run_outputs, tolerances


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
    assert tolerances(torch.float16)[1] > tolerances(torch.float32)[1] > tolerances(torch.float64)[1]
    assert tolerances(torch.int64) == (0.0, 0.0)
    base = torch.ones(8)
    nudged = base + 2e-3
    assert compare_outputs([base.half()], [nudged.half()]).status == "match"
    assert compare_outputs([base], [nudged]).status == "mismatch"


def test_integer_outputs_must_be_equal():
    assert compare_outputs([torch.tensor([1, 2])], [torch.tensor([1, 2])]).status == "match"
    result = compare_outputs([torch.tensor([1, 2])], [torch.tensor([1, 3])])
    assert result.status == "mismatch" and math.isinf(result.max_abs)


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

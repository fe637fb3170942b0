"""A check that compared nothing says why: empty outputs (a detector's level that got no
boxes: MultiScaleRoIAlign's [0, 5] under dynamo) are not a zero-initialised head."""
import pytest
import torch
from torch import nn

import fxviz
from fxviz.checks.check import compare_outputs


class Empty(nn.Module):
    def forward(self, x):
        return x[x > 1e9]  # no element ever that large: an output with no elements


class Zeros(nn.Module):
    def forward(self, x):
        return x * 0


def test_empty_outputs_say_they_are_empty_not_a_zero_head():
    check = fxviz.Session(Empty(), torch.randn(2, 4)).current.check
    assert check.status == "nothing compared" and check.ok
    assert "the outputs are empty" in check.message and "try inputs that give nonempty outputs" in check.message
    assert "initialised to zero" not in check.message


def test_all_zero_outputs_keep_the_zero_head_advice():
    check = fxviz.Session(Zeros(), torch.randn(2, 4)).current.check
    assert check.status == "nothing compared"
    assert "last layer initialised to zero" in check.message and "empty on all" not in check.message


def test_empty_and_zero_outputs_together_are_worded_as_zeros():
    """The empty wording only when every output not compared has no elements."""
    result = compare_outputs([(torch.zeros(0, 5), torch.zeros(3))], [(torch.zeros(0, 5), torch.zeros(3))])
    assert result.status == "nothing compared" and "initialised to zero" in result.message
    assert "the outputs are empty" in compare_outputs([torch.zeros(0, 5)], [torch.zeros(0, 5)]).message


class ReturnsNone(nn.Module):
    def forward(self, x):
        return None


class ReturnsANumber(nn.Module):
    def forward(self, x):
        return x.sum().item()


@pytest.mark.parametrize("model", [ReturnsNone, ReturnsANumber])
def test_outputs_without_a_tensor_say_so_not_that_they_are_empty(model):
    """They read "the outputs are empty ... for a detector, images with objects"."""
    check = fxviz.Session(model(), torch.randn(3)).current.check
    assert check.status == "nothing compared"
    assert "hold no tensor" in check.message and "detector" not in check.message

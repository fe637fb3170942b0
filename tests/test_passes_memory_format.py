"""channels_last: 4-D weights (and, in a Session, the inputs) stored NHWC."""
import pytest
import torch
from torch import nn

from fxviz.checks.check import check_outputs
from fxviz.passes import NothingToDo, get
from fxviz.passes.memory_format import to_channels_last
from fxviz.capture import trace

CHANNELS_LAST = get("channels_last")


def test_4d_weights_become_channels_last_without_touching_the_model():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    gm = CHANNELS_LAST(trace(model)).graph_module
    weight = gm.get_submodule("0").weight
    assert isinstance(weight, nn.Parameter) and weight.is_contiguous(memory_format=torch.channels_last)
    assert model[0].weight.is_contiguous()
    x = torch.randn(2, 3, 8, 8)
    assert check_outputs(model, gm, [to_channels_last((x,))]).status == "match"


def test_inputs_are_converted_and_keep_their_values():
    x = torch.randn(10, 3, 16, 16)
    (converted, flat) = to_channels_last((x, torch.ones(3)))
    assert converted.stride() == (768, 1, 48, 3)
    assert torch.equal(converted, x) and flat.is_contiguous()
    assert CHANNELS_LAST.convert_inputs is to_channels_last


def test_a_model_without_4d_weights_has_nothing_to_convert():
    with pytest.raises(NothingToDo, match="no 4-D weights"):
        CHANNELS_LAST(trace(nn.Sequential(nn.Linear(3, 3))))

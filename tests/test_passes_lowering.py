"""lower_modules: leaf modules become the functional calls they make."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fxviz.checks.check import check_outputs
from fxviz.errors import PassError
from fxviz.passes import NothingToDo, get
from fxviz.capture import trace

LOWER = get("lower_modules")


def lowered(model: nn.Module, **params) -> torch.fx.GraphModule:
    return LOWER(trace(model), **params).graph_module


def node(gm: torch.fx.GraphModule, name: str) -> torch.fx.Node:
    return next(n for n in gm.graph.nodes if n.name == name)


def test_relu_becomes_functional_relu_not_in_place_keeping_its_name():
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True))
    gm = lowered(model)
    relu = node(gm, "_1")
    assert (relu.op, relu.target, relu.kwargs) == ("call_function", F.relu, {"inplace": False})
    assert "torch.nn.functional.relu" in gm.code
    assert not hasattr(gm, "1")  # the module itself is gone from the GraphModule


def test_module_settings_travel_into_the_call():
    model = nn.Sequential(nn.GELU(approximate="tanh"), nn.LeakyReLU(0.3), nn.Softmax(dim=1))
    gm = lowered(model, types=("GELU", "LeakyReLU", "Softmax"))
    assert node(gm, "_0").kwargs == {"approximate": "tanh"}
    assert node(gm, "_1").kwargs == {"negative_slope": 0.3, "inplace": False}
    assert node(gm, "_2").kwargs == {"dim": 1}
    x = torch.randn(2, 5)
    assert check_outputs(model, gm, [(x,)]).status == "match"


def test_eval_dropout_and_identity_are_removed():
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.Identity()).eval()
    gm = lowered(model, types=("Dropout", "Identity"))
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "call_module", "output"]


def test_training_dropout_becomes_functional_dropout():
    model = nn.Sequential(nn.Dropout(0.25)).train()
    gm = lowered(model, types=("Dropout",))
    assert node(gm, "_0").kwargs == {"p": 0.25, "training": True, "inplace": False}


def test_types_may_be_given_as_classes():
    gm = lowered(nn.Sequential(nn.Tanh()), types=(nn.Tanh,))
    assert node(gm, "_0").target is torch.tanh


def test_a_selection_lowers_only_the_selected_nodes():
    gm = lowered(nn.Sequential(nn.ReLU(), nn.ReLU()), nodes=["_1"])
    assert [n.op for n in gm.graph.nodes][1:3] == ["call_module", "call_function"]


def test_nothing_to_lower_says_which_types_were_looked_for():
    with pytest.raises(NothingToDo, match="no call_module node of type GELU found"):
        lowered(nn.Sequential(nn.ReLU()), types=("GELU",))


def test_an_unsupported_type_is_refused_with_the_supported_ones():
    with pytest.raises(PassError, match=r"types=\('Conv2d',\) is not one of 'ReLU', 'ReLU6'"):
        lowered(nn.Sequential(nn.ReLU()), types=("Conv2d",))


def test_resnet_lowering_keeps_outputs(resnet18, small_image):
    gm = lowered(resnet18, types=("ReLU", "MaxPool2d", "AdaptiveAvgPool2d"))
    assert not any(type(m) in (nn.ReLU, nn.MaxPool2d, nn.AdaptiveAvgPool2d) for m in gm.modules())
    assert check_outputs(resnet18, gm, [(small_image,)]).status == "match"

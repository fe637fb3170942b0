"""fake_quantize: outputs of conv/linear rounded to a few bits, labelled as changing results."""
import pytest
import torch
from torch import nn

from fxviz.errors import PassError
from fxviz.passes import NothingToDo, get
from fxviz.passes.quantize import fake_quant
from fxviz.capture import trace

QUANTIZE = get("fake_quantize")


def test_fake_quant_rounds_to_a_symmetric_grid_scaled_to_the_tensor():
    x = torch.tensor([-1.0, 0.26, 0.6, 1.0])
    assert torch.equal(fake_quant(x, 2), torch.tensor([-1.0, 0.0, 1.0, 1.0]))
    assert (fake_quant(x, 8) - x).abs().max() <= 1 / 127 / 2 + 1e-7


def test_a_fake_quant_node_follows_each_conv_and_linear():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(8, 2))
    gm = QUANTIZE(trace(model), bits=4).graph_module
    ops = [(n.op, type(gm.get_submodule(n.target)).__name__ if n.op == "call_module" else n.target)
           for n in gm.graph.nodes]
    assert ops[1:-1] == [
        ("call_module", "Conv2d"), ("call_function", fake_quant), ("call_module", "Flatten"),
        ("call_module", "Linear"), ("call_function", fake_quant),
    ]
    x = torch.randn(1, 1, 4, 4)
    assert not torch.equal(gm(x), model(x))
    assert QUANTIZE.preserves_semantics is False


def test_bits_out_of_range_are_refused():
    with pytest.raises(PassError, match="bits=1 is out of range; use 2 to 16"):
        QUANTIZE(trace(nn.Sequential(nn.Linear(2, 2))), bits=1)


def test_no_layers_is_nothing_to_do():
    with pytest.raises(NothingToDo, match="no conv or linear output found"):
        QUANTIZE(trace(nn.Sequential(nn.ReLU())))


def test_aten_convolutions_are_quantized_too():
    model, x = nn.Sequential(nn.Conv2d(1, 2, 3)), torch.randn(1, 1, 4, 4)
    gm = QUANTIZE(trace(model, (x,), tracer="make_fx")).graph_module
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert calls == [torch.ops.aten.convolution.default, fake_quant]

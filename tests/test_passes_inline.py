"""inline_module: open up one call_module node into the ops of its forward."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fxviz.checks.check import check_outputs
from fxviz.errors import PassError
from fxviz.passes import get
from fxviz.capture import trace

INLINE = get("inline_module")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1)
        self.scale = nn.Parameter(torch.tensor(2.0))

    def forward(self, x, shift=1.0):
        return torch.relu(self.conv(x)) * self.scale + shift


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.block(x))


def test_inlining_a_relu_gives_the_functional_call():
    gm = INLINE(trace(Net(), leaf_modules=["block"]), nodes=["act"]).graph_module
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [F.relu]


def test_inlining_a_block_exposes_its_children_and_parameters_under_its_path():
    model, x = Net(), torch.randn(1, 2, 4, 4)
    gm = INLINE(trace(model, leaf_modules=["block"]), nodes=["block"]).graph_module
    calls = {n.name: (n.op, n.target, n.meta.get("module_path")) for n in gm.graph.nodes}
    assert calls["block_conv"] == ("call_module", "block.conv", "block.conv")
    assert calls["block_scale"] == ("get_attr", "block.scale", "block")
    assert "block" not in calls
    assert check_outputs(model, gm, [(x,)]).status == "match"


def test_tuple_outputs_are_unpacked_through_their_indexing_nodes():
    class Split(nn.Module):
        def forward(self, x):
            return x.sin(), x.cos()

    class UsesSplit(nn.Module):
        def __init__(self):
            super().__init__()
            self.split = Split()

        def forward(self, x):
            a, b = self.split(x)
            return a - b

    model, x = UsesSplit(), torch.randn(3)
    gm = INLINE(trace(model, leaf_modules=["split"]), nodes=["split"]).graph_module
    assert [n.target for n in gm.graph.nodes if n.op == "call_method"] == ["sin", "cos"]
    assert torch.equal(gm(x), model(x))


def test_inline_needs_a_call_module_selection():
    gm = trace(Net())
    with pytest.raises(PassError, match="inline_module needs a selection"):
        INLINE(gm)
    with pytest.raises(PassError, match="node 'x' is a placeholder, not a call_module node"):
        INLINE(gm, nodes=["x"])


def test_an_untraceable_block_stays_one_node_with_the_reason():
    class Branchy(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.branchy = Branchy()

        def forward(self, x):
            return self.branchy(x)

    with pytest.raises(PassError, match=r"cannot trace the forward of 'branchy' \(Branchy, node 'branchy'\)"):
        INLINE(trace(Outer(), leaf_modules=["branchy"]), nodes=["branchy"])

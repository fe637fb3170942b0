"""export's joint graph on nested inputs (dicts, lists, tuples, keyword inputs) and tied weights."""
from collections import OrderedDict

import pytest
import torch
from torch import nn

import fxviz


class DictIn(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, d):
        return (self.a(d["a"]) * self.b(d["b"])).sum()


def test_a_dict_input_runs_in_the_joint_graph():
    """The joint takes its inputs flat: with nothing to unpack a dict, its check read 'error'."""
    d = {"a": torch.randn(2, 4), "b": torch.randn(2, 4)}
    model = DictIn()
    session = fxviz.Session(model, (d,), tracer="export (joint)")
    assert session.current.check.status == "match", session.current.check.message
    loss, grads = session.current.gm(d)
    assert torch.equal(loss, model(d))
    want = torch.autograd.grad(model(d), list(model.parameters()))
    for (name, _), got in zip(model.named_parameters(), want):
        torch.testing.assert_close(grads[name], got)


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, xs, pair, *, scale):
        return ((self.lin(xs[0]) + self.lin(xs[1]) * pair[0] - pair[1]) * scale).sum()


def test_lists_tuples_and_keyword_inputs_run_in_the_joint_graph():
    xs, pair, scale = [torch.randn(2, 4), torch.randn(2, 4)], (torch.randn(2, 4), torch.randn(2, 4)), torch.randn(4)
    model = Nested()
    session = fxviz.Session(model, (xs, pair), kwargs={"scale": scale}, tracer="export (joint)")
    assert session.current.check.status == "match", session.current.check.message
    gm = session.current.gm
    assert [n.name for n in gm.graph.find_nodes(op="placeholder")] == ["xs_0", "xs_1", "pair_0", "pair_1", "scale"]
    loss, _ = gm(xs, pair, scale)  # as fxviz calls a graph: the keyword input last
    assert torch.equal(loss, model(xs, pair, scale=scale))


class FPNLoss(nn.Module):
    """torchvision's FeaturePyramidNetwork (an OrderedDict of feature maps in and out) and a loss."""

    def __init__(self):
        super().__init__()
        from torchvision.ops import FeaturePyramidNetwork

        self.fpn = FeaturePyramidNetwork([8, 16], 8)

    def forward(self, features):
        return sum(out.sum() for out in self.fpn(features).values())


def test_a_feature_pyramid_networks_joint_graph_matches_eager():
    pytest.importorskip("torchvision")
    features = OrderedDict(p0=torch.randn(1, 8, 8, 8), p1=torch.randn(1, 16, 4, 4))
    session = fxviz.Session(FPNLoss(), (features,), tracer="export (joint)")
    assert session.current.check.status == "match", session.current.check.message

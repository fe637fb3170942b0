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


class Tied(nn.Module):
    """An embedding tied to the output projection: one parameter under two names."""

    def __init__(self):
        super().__init__()
        self.emb, self.mid, self.out = nn.Embedding(10, 4), nn.Linear(4, 4), nn.Linear(4, 10, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, ids):
        return self.out(torch.tanh(self.mid(self.emb(ids)))).logsumexp(-1).mean()


def test_tied_weights_get_one_gradient_under_the_first_name():
    """torch.export lists ``out.weight`` as a parameter of its own and reads the tensor through it
    alone: its joint graph refused ``emb.weight``, which got no gradient."""
    model, ids = Tied(), torch.tensor([[1, 2, 3], [4, 5, 6]])
    session = fxviz.Session(model, (ids,), tracer="export (joint)")
    assert session.current.check.status == "match", session.current.check.message
    gm = session.current.gm
    _, grads = gm(ids)
    assert list(grads) == [name for name, _ in model.named_parameters()] == ["emb.weight", "mid.weight", "mid.bias"]
    want = torch.autograd.grad(model(ids), [model.emb.weight])[0]  # both uses' gradients, summed
    torch.testing.assert_close(grads["emb.weight"], want)
    assert {n.target for n in gm.graph.find_nodes(op="get_attr")} == {"emb.weight", "mid.weight", "mid.bias"}
    assert model.out.weight is model.emb.weight  # the user's model untouched


def test_a_parameter_torch_leaves_without_a_gradient_is_not_blamed_on_the_loss(monkeypatch):
    """Where eager autograd gives every parameter a gradient and torch's joint does not (the
    tied weights above, were they not read under one name), the advice is another tracer."""
    from fxviz._torch_internals import joint

    monkeypatch.setattr(joint, "_one_name_per_tensor", lambda program: program)
    with pytest.raises(fxviz.TraceError, match="(?s)did not receive a gradient.*reaches every parameter in eager.*"
                                               "tracer='auto' or 'make_fx'") as info:
        fxviz.Session(Tied(), (torch.tensor([[1, 2, 3]]),), tracer="export (joint)")
    assert "contributes to" not in str(info.value)

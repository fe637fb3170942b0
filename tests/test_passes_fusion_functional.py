"""conv+BN folding on ATen graphs (export, make_fx) and on F.batch_norm calls."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import fxviz
from fxviz.passes import NothingToDo


def _net():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 3, bias=False), nn.BatchNorm2d(4))
    for bn in (net[1], net[4]):  # non-trivial statistics, so a wrong fold shows
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    return net.eval()


class BNAct(nn.BatchNorm2d):
    """Like timm's BatchNormAct2d: a BatchNorm subclass whose forward calls F.batch_norm."""

    def forward(self, x):
        shape = x.shape  # reads the input's metadata, as timm does
        return torch.relu(F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                       False, 0.1, self.eps)).reshape(shape)


@pytest.mark.parametrize("tracer", ["export", "make_fx"])
def test_aten_graphs_fold_both_batchnorms_and_still_match(tracer):
    session = fxviz.Session(_net(), torch.randn(2, 3, 10, 10), tracer=tracer)
    step = session.apply("fuse_conv_bn")
    targets = [str(n.target) for n in step.gm.graph.nodes if n.op == "call_function"]
    assert not any("batch_norm" in t for t in targets)
    assert step.check.status == "match"
    fused = [n.target for n in step.gm.graph.find_nodes(op="get_attr") if "fused" in str(n.target)]
    assert len(fused) == 4  # weight and bias per conv, beside the conv's own tensors
    assert session.steps[0].check.status == "match"  # step 0 keeps its tensors
    read = {str(n.target) for n in step.gm.graph.find_nodes(op="get_attr") if n.users}
    unread = {str(n.target) for n in step.gm.graph.find_nodes(op="get_attr") if not n.users}
    assert read == set(fused)  # the old conv weights and every BN parameter are gone from the drawing
    assert all(t.endswith("num_batches_tracked") for t in unread)  # as export left them in step 0


def test_batchnorm_subclass_traced_to_functional_call_is_folded():
    net = nn.Sequential(nn.Conv2d(3, 4, 3), BNAct(4)).eval()
    net[1].running_mean.uniform_(-1, 1)
    session = fxviz.Session(net, torch.randn(1, 3, 8, 8), tracer="symbolic")
    step = session.apply("fuse_conv_bn")
    assert not any(n.target is F.batch_norm for n in step.gm.graph.nodes)
    assert step.check.status == "match"


def test_training_mode_functional_batchnorm_says_why():
    class TrainBN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

        def forward(self, x):
            return F.batch_norm(self.conv(x), self.bn.running_mean, self.bn.running_var, training=True)

    gm = fxviz.trace(TrainBN().eval())
    with pytest.raises(NothingToDo, match="training mode"):
        fxviz.passes.get("fuse_conv_bn")(gm)


class StdConv(nn.Conv2d):
    """Like timm's StdConv2d: the weight standardised by a training-mode F.batch_norm
    without running statistics, then a functional convolution."""

    def forward(self, x):
        weight = F.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None, training=True,
                              momentum=0., eps=1e-6).reshape_as(self.weight)
        return F.conv2d(x, weight, self.bias)


class Mixed(nn.Module):
    """A foldable conv+BN beside BatchNorms that cannot fold: functional ones after an
    Identity and a ReLU (timm's sehalonet, mobileone), a weight-standardising conv, and
    a BatchNorm module after it (nf_resnet: its conv's weight is computed)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.bn, self.ident, self.act = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Identity(), nn.ReLU()
        self.stats, self.std, self.bn_after_std = nn.BatchNorm2d(4), StdConv(4, 4, 1), nn.BatchNorm2d(4)
        for bn in (self.bn, self.stats, self.bn_after_std):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        s = self.stats
        y = F.batch_norm(self.ident(self.bn(self.conv(x))), s.running_mean, s.running_var, s.weight, s.bias)
        y = F.batch_norm(self.act(y), s.running_mean, s.running_var)
        return self.bn_after_std(self.std(y))


@pytest.mark.parametrize("tracer", ["symbolic", "export", "make_fx"])
def test_every_foldable_pair_is_folded_and_the_rest_are_noted_with_why(tracer):
    """The pass stopped at the first BatchNorm after something other than a conv
    ('Identity' object has no attribute 'weight'), folding nothing."""
    session = fxviz.Session(Mixed().eval(), torch.randn(2, 3, 8, 8), tracer=tracer, n_random_inputs=1)
    before = _batch_norms(session.current.gm)
    step = session.apply("fuse_conv_bn")
    assert step.check.status == "match", step.check.message
    note = step.gm.meta["pass_note"]
    # export and make_fx drop the Identity: the BatchNorm after it follows the conv, and folds too
    folded = 1 if tracer == "symbolic" else 2
    assert note.startswith(f"folded {folded} BatchNorm")
    assert len(_batch_norms(step.gm)) == len(before) - folded
    assert f"left {len(before) - folded}: " in note
    assert "after ReLU" in note or "after relu, not a convolution" in note
    assert "standardises a weight, as timm's StdConv2d does" in note
    assert ("after conv2d, not a layer it folds into" in note if tracer == "symbolic"
            else "weights or statistics not stored in the model" in note)
    if tracer == "symbolic":
        assert "after Identity, not a convolution (batch_norm)" in note
    assert "pass_note" not in session.steps[0].gm.meta


def _batch_norms(gm):
    calls = gm.graph.find_nodes(op="call_module")
    modules = {n for n in calls if isinstance(gm.get_submodule(n.target), nn.BatchNorm2d)}
    return [n for n in gm.graph.nodes if "batch_norm" in str(n.target) or n in modules]


@pytest.mark.parametrize("tracer", ["symbolic", "export"])
def test_nothing_to_fold_says_why_for_each_batchnorm_and_is_not_offered(tracer):
    class Unfoldable(nn.Module):
        def __init__(self):
            super().__init__()
            self.act, self.std = nn.ReLU(), StdConv(3, 4, 1)

        def forward(self, x):
            return self.std(F.batch_norm(self.act(x), torch.zeros(3), torch.ones(3)))

    session = fxviz.Session(Unfoldable().eval(), torch.randn(1, 3, 4, 4), tracer=tracer, n_random_inputs=0)
    why = fxviz.passes.get("fuse_conv_bn").why_not(session.current.gm)
    assert why.startswith("no BatchNorm can be folded: ") and "standardises a weight" in why
    assert "after ReLU, not a convolution" in why or "after relu, not a convolution" in why
    with pytest.raises(NothingToDo) as raised:
        session.apply("fuse_conv_bn")
    assert str(raised.value) == why and session.index == 0
    plain = fxviz.Session(nn.Conv2d(3, 4, 1), torch.randn(1, 3, 4, 4), tracer=tracer, n_random_inputs=0)
    assert fxviz.passes.get("fuse_conv_bn").why_not(plain.current.gm) == "no BatchNorm in this graph"


def test_a_selection_notes_only_the_batchnorms_it_holds():
    session = fxviz.Session(Mixed().eval(), torch.randn(2, 3, 8, 8), tracer="symbolic", n_random_inputs=0)
    step = session.apply("fuse_conv_bn", nodes=["bn", "batch_norm_1"])
    assert step.gm.meta["pass_note"] == "folded 1 BatchNorm; left 1: after ReLU, not a convolution (batch_norm_1)"

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

"""Passes record provenance in meta["from_node"], as torch's GraphTransformObserver does."""
import torch
from torch import nn
from torch.fx.traceback import NodeSourceAction

import fxviz


def test_replace_op_records_the_replaced_node_and_the_pass():
    class Adds(nn.Module):
        def forward(self, x):
            return torch.add(x, 1) * 2

    session = fxviz.Session(Adds(), torch.randn(3), tracer="symbolic")
    step = session.apply("replace_op", old="add", new="mul")
    new = next(n for n in step.gm.graph.nodes if n.op == "call_function" and n.target is torch.mul and
               n.meta.get("from_node"))
    (source,) = new.meta["from_node"]
    assert source.name == "add" and source.pass_name == "replace_op"
    assert NodeSourceAction.REPLACE in source.action and NodeSourceAction.CREATE in source.action
    assert step.gm.meta["pass_changes"]["erased"] == ["add"]
    assert session.steps[0].gm.meta.get("pass_changes") is None  # the earlier step is untouched


def test_fusion_marks_the_conv_as_replacing_the_batchnorm():
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).eval()
    step = fxviz.Session(net, torch.randn(1, 3, 8, 8), tracer="export").apply("fuse_conv_bn")
    conv = next(n for n in step.gm.graph.nodes if "conv" in str(n.target))
    mine = [(s.name, s.pass_name) for s in conv.meta["from_node"] if s.pass_name == "fuse_conv_bn"]
    assert mine == [("batch_norm", "fuse_conv_bn")]  # (export's own sources stay before it)

"""Dynamo graphs that start inside a submodule (a graph break in its forward) name their
ops by the root model's module paths, as their lifted parameters are: one module, one
cluster, in dynamo's graphs and AOT's forward and backward graphs."""
import pytest
import torch
from torch import nn

import fxviz
from fxviz.capture.backward import MARK


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(4, 4)
        self.o = nn.Linear(4, 4)
        self.proj = nn.ModuleList([nn.Identity(), nn.Linear(4, 4)])  # dynamo names it L['self'].proj.1

    def forward(self, x):
        y = self.q(x) * 2  # the '* 2' is in no submodule call: Attention's own op
        torch._dynamo.graph_break()
        y = self.proj[1](self.o(y).relu())
        torch._dynamo.graph_break()  # a second break: a resume function's resume
        return y - 1


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.SelfAttention = Attention()

    def forward(self, x):
        return self.SelfAttention(x) + x  # after the break, `self` is no longer live here


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.ModuleList([Layer(), Layer()])

    def forward(self, x):
        for layer in self.layer:
            x = layer(x)
        return x


class Encoder(nn.Module):
    """T5-like nesting: ``encoder.block.0.layer.1.SelfAttention.q``."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.ModuleDict({"block": nn.ModuleList([Block()])})
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.encoder["block"][0](x))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Encoder()


@pytest.fixture(scope="module")
def result(model):
    return fxviz.compiled(model, torch.randn(2, 4, requires_grad=True), backward=True)


def _parts(result):
    return [(g.index, part, g.part(part)) for g in result.graphs for part in g.parts]


def test_every_node_is_in_a_module_of_the_root_model(model, result):
    real = dict(model.named_modules())
    parts = _parts(result)
    assert {part for _, part, _ in parts} == {"dynamo", "forward", "backward"}
    for index, part, gm in parts:
        for node in gm.graph.nodes:
            path = node.meta["module_path"]
            if node.op != "output" and path not in ("backward", "loss"):
                assert path.removesuffix(MARK) in real, (index, part, node.name, path)


def test_parameters_and_the_ops_reading_them_share_one_cluster(result):
    pairs = set()
    for _, part, gm in _parts(result):
        if part == "backward":
            continue
        for node in gm.graph.find_nodes(op="placeholder"):
            if "qualified_name" not in node.meta:
                continue
            for user in node.users:
                pairs.add((node.meta["qualified_name"], user.meta["module_path"]))
    assert pairs >= {("encoder.block.0.layer.0.SelfAttention.q.weight", "encoder.block.0.layer.0.SelfAttention.q"),
                     ("encoder.block.0.layer.0.SelfAttention.o.bias", "encoder.block.0.layer.0.SelfAttention.o"),
                     ("head.weight", "head")}
    assert all(param.rpartition(".")[0] == path for param, path in pairs), sorted(pairs)


def test_ops_outside_any_submodule_call_take_the_frame_module(result):
    """'* 2', '.relu()' and '- 1' run in Attention's frame, '+ x' in Layer's resumed frame (whose
    `self` dynamo did not keep): each in the module whose forward ran it."""
    paths = {}
    for graph in result.graphs:
        for node in (n for n in graph.gm.graph.nodes if n.op in ("call_function", "call_method")):
            paths.setdefault(getattr(node.target, "__name__", str(node.target)), set()).add(node.meta["module_path"])
    assert paths["mul"] == {"encoder.block.0.layer.0.SelfAttention"}
    assert paths["sub"] == {"encoder.block.0.layer.0.SelfAttention"}
    assert paths["add"] == {"encoder.block.0.layer.0"}
    assert paths["relu"] == {"encoder.block.0.layer.0.SelfAttention"}  # called on o's output, outside o
    assert paths["linear"] >= {"encoder.block.0.layer.0.SelfAttention.o", "encoder.block.0.layer.0.SelfAttention.proj.1",
                               "head"}


def test_backward_ops_sit_beside_their_forward_module(result):
    backward = {node.meta["module_path"] for g in result.graphs if g.backward is not None
                for node in g.backward.graph.nodes if node.op == "call_function"}
    assert "encoder.block.0.layer.0.SelfAttention.q" + MARK in backward
    assert not any(path.startswith(("q", "o", "L[")) for path in backward), backward


def test_the_drawing_puts_q_and_its_weight_in_one_cluster(result):
    """Before, the weight was drawn in SelfAttention's cluster and its linear in a 'q' one."""
    dot = fxviz.draw.render.to_dot(result.graphs[0].gm, show_weights=True).source
    cluster = dot.partition("label=<SelfAttention · Attention>")[2].partition("}")[0]
    assert '"fx-l_self_modules_q_parameters_weight_"' in cluster and '"fx-linear"' in cluster
    assert "label=<q" not in dot.partition("label=<encoder · ModuleDict>")[0]

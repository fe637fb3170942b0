"""ExportedProgram and .pt2 files as inputs: module clusters, qualified names, source lines."""
import pytest
import torch
from torch import nn

import fxviz
from fxviz.capture import capture


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))  # the line stack_trace points at


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(4, 2)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x):
        return self.head(self.block(x).mean((2, 3))) * self.scale


@pytest.fixture
def exported():
    x = torch.randn(2, 3, 8, 8)
    return torch.export.export(Net().eval(), (x,)), x


def test_exported_program_opens_with_clusters_qualified_names_and_source(exported):
    ep, x = exported
    session = fxviz.Session(ep, x)
    assert session.capture.method == "exported program"
    graph = session.current.graph
    paths = {d["module_path"] for _, d in graph.nodes(data=True)}
    assert {"block.conv", "block.bn", "head"} <= paths
    attrs = {n.target for n in session.current.gm.graph.find_nodes(op="get_attr")}
    assert {"block.conv.weight", "head.bias", "scale"} <= attrs
    relu = next(d for _, d in graph.nodes(data=True) if "relu" in d["target"])
    assert relu["source"].endswith(f"test_capture_export.py:{Block.forward.__code__.co_firstlineno + 1}")
    assert session.current.check.status == "match"


def test_pt2_file_keeps_its_example_inputs_and_to_svg_takes_a_program(exported, tmp_path):
    ep, x = exported
    path = tmp_path / "net.pt2"
    torch.export.save(ep, path)
    session = fxviz.Session(str(path))
    assert session.example_inputs[0].shape == x.shape
    assert session.current.check.status == "match"
    svg = fxviz.to_svg(ep)
    assert 'id="fxcl&#45;' in svg  # drawn with module clusters (graphviz escapes the dash)


def test_session_over_an_unlifted_export_module_with_nested_graph_constants():
    class WithCond(nn.Module):  # cond's branches are nested GraphModules reading root constants
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda t: t + torch.tensor(1.0), lambda t: t - 1, (x,))

    x = torch.randn(3)
    module = torch.export.export(WithCond(), (x,)).module()
    session = fxviz.Session(module, x)
    torch.testing.assert_close(session.current.gm(x), WithCond()(x))


def test_auto_records_why_symbolic_failed_before_export():
    class TopBranch(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            if x.shape[0] != 2:  # shape checks are fine for export, not for symbolic tracing
                raise ValueError("batch of 2 expected")
            return self.lin(x)

    result = capture(TopBranch(), torch.randn(2, 3))
    assert result.method == "export"
    assert result.attempts[0][0] == "symbolic" and "test_capture_export.py" in result.attempts[0][1]
    assert {n.meta["module_path"] for n in result.gm.graph.nodes if n.op == "call_function"} == {"lin"}


class Masked(nn.Module):
    """Called as HF models are exported: keyword inputs, one of them not a tensor."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, *, mask=None, scale=2.0):
        return {"y": self.lin(x) * mask * scale}


def test_exported_program_with_keyword_inputs_opens_checks_and_profiles(tmp_path):
    x, mask = torch.randn(2, 4), (torch.rand(2, 4) > 0.5).float()
    ep = torch.export.export(Masked(), (x,), {"mask": mask, "scale": 3.0})
    session = fxviz.Session(ep)  # the inputs it was exported with: keyword ones after the positional
    assert session.current.example_inputs[1] is mask and session.current.example_inputs[2] == 3.0
    assert session.current.check.status == "match"
    out = session.current.gm(x, mask, 3.0)["y"]
    torch.testing.assert_close(out, ep.module()(x, mask=mask, scale=3.0)["y"])
    df = session.current.profile(warmup=0, repeats=3)
    assert len(df) == len(session.current.gm.graph.nodes) and (df["median_us"] >= 0).all()
    torch.export.save(ep, tmp_path / "masked.pt2")
    assert fxviz.Session(str(tmp_path / "masked.pt2")).current.check.status == "match"
    advice = r"takes 1 positional input, then its keyword inputs \(mask, scale\), in that order: {} given"
    for wrong in ((x,), (x, mask)):
        with pytest.raises(fxviz.errors.InputError, match=advice.format(len(wrong))):
            fxviz.Session(ep, wrong)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.norm = nn.Linear(8, 8), nn.LayerNorm(8)

    def forward(self, x):
        return x + torch.tanh(self.norm(self.lin(x)))


def test_each_block_of_an_exported_model_keeps_its_box():
    """ep.module() reads every parameter first; far from its ops, each block was drawn in
    its parent (one box for all of a transformer's layers). Weights are not drawn, so a
    one-op module (lin, norm) is a node of its block, as it is in a symbolic trace."""
    from fxviz.draw.layout_tree import build_tree

    model = nn.Sequential(*(_Block() for _ in range(4)))
    x = torch.randn(2, 8)
    for opened in (fxviz.Session(model, x, tracer="export"), fxviz.Session(torch.export.export(model, (x,)), x)):
        gm = opened.current.gm
        weight = next(n for n in gm.graph.find_nodes(op="get_attr") if n.target == "2.lin.weight")
        assert weight.next.target == "2.lin.bias" and "linear" in str(weight.next.next.target)
        graph = opened.current.graph
        tree = build_tree(graph)
        assert {"0", "1", "2", "3"} <= set(tree.boxes)  # each block's box holds its ops (one-op modules: no box)
        assert {tree.box_of[n] for n, a in graph.nodes(data=True) if "linear" in a["target"]} == {"0", "1", "2", "3"}
        assert build_tree(graph, weights_as_nodes=True).box_of[weight.name] == "2.lin"  # drawn as a node: in its module
        assert opened.current.check.status == "match"


class BucketCache:
    """Reformer's cache: a plain class of lists of tensors, which torch's pytree does not know."""

    def __init__(self):
        self.buckets, self.states, self.seen_tokens = [], [], 0


class ReturnsItsCache(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        cache, h = BucketCache(), self.lin(x)
        cache.buckets.append(h.argmax(-1))
        cache.states.append(h * 2)
        return h.relu(), cache


def test_a_cache_object_torch_does_not_know_is_returned_as_its_lists_of_tensors():
    session = fxviz.Session(ReturnsItsCache(), torch.randn(2, 3))
    assert session.capture.method == "export"  # was dynamo's graphs: export and make_fx refused the type
    relu, (buckets, states) = session.current.gm(torch.randn(2, 3))
    assert buckets[0].dtype == torch.int64 and states[0].shape == (2, 3)
    assert session.current.check.status == "match"


def test_a_buffer_the_program_never_reads_is_not_a_node():
    """An eval BatchNorm's num_batches_tracked: a get_attr with no user was the table's first rows
    and a line of code; the module still holds it (state_dict as the model's)."""
    model = Net().eval()
    ep = torch.export.export(model, (torch.randn(1, 3, 8, 8),))
    assert "block.bn.num_batches_tracked" in ep.graph_signature.buffers  # the program lists it
    gm = fxviz.Session(ep).current.gm
    read = {str(n.target) for n in gm.graph.find_nodes(op="get_attr")}
    assert "block.bn.weight" in read and not any(t.endswith("num_batches_tracked") for t in read)
    assert all(n.users for n in gm.graph.find_nodes(op="get_attr"))
    assert "num_batches_tracked" not in gm.code
    assert int(gm.get_buffer("block.bn.num_batches_tracked")) == int(model.block.bn.num_batches_tracked)

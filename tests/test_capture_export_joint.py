"""torch.export's joint forward+backward graph as a front-end (tracer="export (joint)")."""
import pytest
import torch
from torch import nn

import fxviz
from fxviz.checks.check import Gradients, compare_outputs
from fxviz.draw.layout_tree import build_tree
from fxviz.capture.info import graph_info


class Loss(nn.Module):
    """A model and its loss as one module: what export's joint graph needs."""

    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(144, 2))

    def forward(self, x, y):
        return nn.functional.cross_entropy(self.model(x), y)


def test_a_model_and_its_loss_open_as_exports_joint_graph_with_backward_clusters():
    step = Loss().train()
    before = {k: v.clone() for k, v in step.state_dict().items()}
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
    session = fxviz.Session(step, (x, y), tracer="export (joint)")
    assert session.capture.method == "export (joint)"
    gm = session.current.gm
    assert session.current.check.status == "match"
    assert all(torch.equal(before[k], v) for k, v in step.state_dict().items())  # running stats untouched
    loss, grads = gm(x, y)
    assert set(grads) == {name for name, _ in step.named_parameters()}
    expected = torch.autograd.grad(step(x, y), list(step.parameters()))
    for got, want in zip(grads.values(), expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    # (the check matched though conv bias before a training BatchNorm has a zero gradient in
    # exact maths, rounding noise in both)
    paths = {n.meta.get("module_path") for n in gm.graph.nodes}
    assert {"model.0", "model.1", "model.4", "model.0 · backward", "model.1 · backward", "model.4 · backward"} <= paths
    conv_bwd = next(n for n in gm.graph.nodes if "convolution_backward" in str(n.target))
    assert conv_bwd.meta["backward_of"] == "model.0"
    assert {n.target for n in gm.graph.find_nodes(op="get_attr")} >= {"model.0.weight", "model.1.running_mean"}
    assert graph_info(gm).backward_attribution == "seq_nr (aligned)"
    # BatchNorm's backward (decomposed into muls and sums) is BatchNorm's, ReLU's is ReLU's
    grads = gm.graph.output_node().args[0][1]
    assert grads["model.1.bias"].meta["backward_of"] == "model.1" and grads["model.1.weight"].meta["backward_of"] == "model.1"
    relu_bwd = next(n for n in gm.graph.nodes if n.meta.get("backward_of") and str(n.target) == "aten.le.Scalar")
    assert relu_bwd.meta["backward_of"] == "model.2"
    assert not any(str(n.target).startswith("aten.native_batch_norm_backward") for n in gm.graph.nodes)  # core ATen


class NormedBlocks(nn.Module):
    """Repeated blocks whose layer norm saves statistics for the backward."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(*(nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Tanh()) for _ in range(4)))

    def forward(self, x):
        return self.blocks(x).pow(2).mean()


def test_each_forward_op_of_repeated_blocks_is_in_its_own_block():
    """The joint keeps three items of each layer norm's outputs where the forward has one:
    the pairing of the two op sequences slipped by a block (the third block's ops drawn in
    the fourth, the fourth's at the top level)."""
    gm = fxviz.trace(NormedBlocks(), torch.randn(2, 8), tracer="export (joint)")
    paths = [(str(n.target), n.meta["module_path"]) for n in gm.graph.nodes
             if str(n.target) in ("aten.addmm.default", "aten.native_layer_norm.default")]
    assert paths == [(op, f"blocks.{i}.{sub}") for i in range(4)
                     for op, sub in (("aten.addmm.default", "0"), ("aten.native_layer_norm.default", "1"))]
    boxes = build_tree(fxviz.to_networkx(gm)).boxes  # each parameter read next to its ops, as in export's graphs
    assert {f"blocks.{i}.{sub}" for i in range(4) for sub in ("0", "1")} <= set(boxes)


def test_a_model_without_a_scalar_loss_gets_a_clear_error():
    with pytest.raises(fxviz.TraceError, match="(?s)joint graph failed.*to be a scalar.*What to do: make output 0 of the model a scalar loss"):
        fxviz.Session(nn.Linear(3, 2), (torch.randn(4, 3),), tracer="export (joint)")


def test_gradients_are_judged_against_the_steps_largest_gradient():
    big, zero = torch.full((3,), 0.5), torch.tensor([1e-9, -2e-9])
    noisy = torch.tensor([3e-9, 1e-9])  # rounding noise on an analytically zero gradient
    assert compare_outputs([Gradients(w=big, b=zero)], [{"w": big, "b": noisy}]).status == "match"
    assert compare_outputs([{"w": big, "b": zero}], [{"w": big, "b": noisy}]).status == "mismatch"
    wrong = torch.tensor([0.02, 0.0])  # 4 % of the largest gradient: a real error
    result = compare_outputs([Gradients(w=big, b=zero)], [{"w": big, "b": wrong}])
    assert result.status == "mismatch" and "'b'" in result.message


def test_without_sequence_numbers_the_joint_graphs_backward_falls_back_to_the_heuristic(monkeypatch):
    from fxviz.capture import export_joint

    made = export_joint.export_forward_backward

    def unnumbered(*args, **kwargs):  # a first trace that recorded no autograd sequence numbers
        joint, traced = made(*args, **kwargs)
        for node in traced.graph.nodes:
            node.meta.pop("seq_nr", None)
        return joint, traced

    monkeypatch.setattr(export_joint, "export_forward_backward", unnumbered)
    gm = fxviz.trace(Loss().train(), (torch.randn(2, 3, 8, 8), torch.tensor([0, 1])), tracer="export (joint)")
    assert graph_info(gm).backward_attribution == "heuristic"
    conv_bwd = next(n for n in gm.graph.nodes if "convolution_backward" in str(n.target))
    assert conv_bwd.meta["module_path"] == "model.0 · backward"


class Counted(Loss):
    """Loss, counting the runs of its forward."""

    runs = 0

    def forward(self, x, y):
        type(self).runs += 1
        return super().forward(x, y)


def test_the_joint_graph_traces_the_model_once(monkeypatch):
    """export runs the model; AOT autograd traces export's program once (and torch traces
    that graph again to flatten it): forward module paths and backward clusters come from
    that trace, not from tracing the decomposed forward and the step with make_fx too."""
    from torch.fx.experimental import proxy_tensor

    traces = []
    trace = proxy_tensor._MakefxTracer.trace
    monkeypatch.setattr(proxy_tensor._MakefxTracer, "trace", lambda self, *a, **k: traces.append(1) or trace(self, *a, **k))
    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions",
                        lambda *a, **k: pytest.fail("the forward program was decomposed (traced) again"))
    Counted.runs = 0
    gm = fxviz.trace(Counted().train(), (torch.randn(2, 3, 8, 8), torch.tensor([0, 1])), tracer="export (joint)")
    assert Counted.runs == 1
    assert len(traces) == 3  # export's, AOT autograd's, its flattening (was 5: the forward again, the step)
    assert graph_info(gm).backward_attribution == "seq_nr (aligned)"
    assert {"model.0", "model.1", "model.4", "model.0 · backward", "model.4 · backward"} <= {
        n.meta.get("module_path") for n in gm.graph.nodes}
    assert all(n.meta.get("source", "").startswith(__file__) for n in gm.graph.nodes
               if n.op == "call_function" and "backward_of" not in n.meta)  # every forward op, its items too
    assert not any("<eval_with_key>" in n.meta.get("source", "") for n in gm.graph.nodes)  # torch's own code: no line


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.inner, self.outer = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        h = self.stem(x)
        return (self.outer(torch.tanh(self.inner(h))) + h).pow(2).mean()


def test_a_sum_of_gradients_is_the_backward_of_the_module_that_made_the_last_one():
    """torch numbers a sum of a tensor's gradients (``h`` used twice) after the loss: read as
    such it would be the loss's backward. The autograd engine adds them running ``inner``'s
    backward, which makes the gradient that reaches ``h`` last."""
    gm = fxviz.trace(Residual(), torch.randn(3, 4), tracer="export (joint)")
    backward = [n for n in gm.graph.nodes if "backward_of" in n.meta]
    sums = [n for n in backward if str(n.target) == "aten.add.Tensor"
            and all("backward_of" in a.meta for a in n.all_input_nodes)]
    assert len(sums) == 1 and sums[0].meta["backward_of"] == "inner"
    assert sums[0].users and next(iter(sums[0].users)).meta["backward_of"] == "stem"


def test_the_joint_graph_of_masked_attention_has_the_eager_gradients(masked_attention):
    """torch's decomposition of the CPU flash-attention forward returns the attention
    weights where the backward kernel reads the log-sum-exp: the gradients were wrong."""
    model, inputs = masked_attention
    session = fxviz.Session(model(loss=True), inputs, tracer="export (joint)")
    assert session.current.check.status == "match", session.current.check.message


def test_a_torch_that_makes_the_joint_another_way_gets_a_clear_error(monkeypatch):
    """fxviz reads the joint's first trace where AOT autograd returns it: a torch that no
    longer goes through there is named, with what works meanwhile, not blamed on the model."""
    from torch._functorch import aot_autograd
    from torch.export import exported_program

    real, decompose = aot_autograd._aot_export_function, exported_program._decompose_exported_program

    def elsewhere(*args, **kwargs):
        hooked, aot_autograd._aot_export_function = aot_autograd._aot_export_function, real
        try:
            return decompose(*args, **kwargs)
        finally:
            aot_autograd._aot_export_function = hooked

    monkeypatch.setattr(exported_program, "_decompose_exported_program", elsewhere)
    with pytest.raises(fxviz.TraceError, match=r"(?s)needs updating for it.*What to do: meanwhile .*tracer='make_fx'") as info:
        fxviz.trace(Loss().train(), (torch.randn(2, 3, 8, 8), torch.tensor([0, 1])), tracer="export (joint)")
    assert "scalar loss" not in str(info.value)

"""run_decompositions as a step, and passes that say why they do not apply to an IR level."""
import pytest
import torch
from torch import nn

import fxviz
from fxviz.errors import PassError
from fxviz.passes import get
from fxviz.passes.levels import ir_level


def _net():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.SiLU(), nn.Flatten(), nn.Linear(4 * 36, 2)).eval()


def test_run_decompositions_lowers_to_core_aten_keeping_clusters_and_outputs():
    session = fxviz.Session(_net(), torch.randn(2, 3, 8, 8), tracer="export")
    before = {str(n.target) for n in session.current.gm.graph.nodes if n.op == "call_function"}
    assert "aten.silu.default" in before and "aten.linear.default" in before
    step = session.apply("run_decompositions")
    after = {str(n.target) for n in step.gm.graph.nodes if n.op == "call_function"}
    assert "aten.linear.default" not in after and "aten.addmm.default" in after
    assert {"0", "1", "4"} <= {d["module_path"] for _, d in step.graph.nodes(data=True)}
    assert step.check.status == "match"
    with pytest.raises(PassError, match="core aten already"):
        session.apply("run_decompositions")


def test_passes_say_why_they_do_not_apply_to_the_graph_level():
    symbolic = fxviz.trace(_net())
    aten = fxviz.trace(_net(), torch.randn(1, 3, 8, 8), tracer="export")
    assert (ir_level(symbolic), ir_level(aten)) == ("torch", "aten")
    assert "works on ATen graphs" in get("run_decompositions").why_not(symbolic)
    assert "works on torch-IR graphs" in get("lower_modules").why_not(aten)
    assert get("fuse_conv_bn").why_not(aten) is None and get("fuse_conv_bn").why_not(symbolic) is None
    with pytest.raises(PassError, match="this graph is aten-level"):
        fxviz.Session(_net(), torch.randn(1, 3, 8, 8), tracer="export").apply("inline_module", nodes=["conv2d"])


def test_decomposing_a_training_step_with_attention_keeps_its_gradients(masked_attention):
    """torch's decomposition of the CPU flash-attention forward returns the attention
    weights where its backward kernel reads the log-sum-exp: the gradients came out wrong."""
    attention, inputs = masked_attention
    model = attention(loss=True)

    def train_step(x, mask):
        loss = model(x, mask)
        return loss, torch.autograd.grad(loss, list(model.parameters()))

    session = fxviz.Session(train_step, inputs)
    assert "aten._scaled_dot_product_flash_attention_for_cpu_backward.default" in {
        str(n.target) for n in session.current.gm.graph.nodes}
    step = session.apply("run_decompositions")
    assert step.check.status == "match", step.check.message


def test_an_exported_program_with_a_dynamic_size_decomposes():
    """Its placeholders record symbolic sizes: the stand-in inputs could not be made of them
    ('SymIntArrayRef expected to contain only concrete integers')."""
    net, x = _net(), torch.randn(2, 3, 8, 8)
    program = torch.export.export(net, (x,), dynamic_shapes=({0: torch.export.Dim.AUTO},))
    session = fxviz.Session(program, x)
    step = session.apply("run_decompositions")
    assert step.check.status == "match"
    assert "aten.silu.default" not in {str(n.target) for n in step.gm.graph.nodes}


def test_a_graph_that_takes_a_list_decomposes_and_is_called_as_before():
    """make_fx of a detector takes a list of images: the lowered graph was exported from the
    flat inputs and took them flat ('aten::sub() Expected a value of type Tensor ... found list')."""
    def detect(images):
        return [nn.functional.silu(image) - image.mean() for image in images]

    session = fxviz.Session(detect, ([torch.randn(3, 4, 4), torch.randn(3, 4, 4)],), tracer="make_fx")
    step = session.apply("run_decompositions")
    assert step.check.status == "match", step.check.message
    assert "aten.silu.default" not in {str(n.target) for n in step.gm.graph.nodes}


class Masked(nn.Module):
    """A forward with an optional mask and a number, called with mask None (SpeechT5 with
    attention_mask=None: 'NoneType' object has no attribute 'shape' at args_1)."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.act = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()

    def forward(self, x, mask=None, times=2):
        y = self.act(self.bn(self.conv(x))) + x.mean() * times
        return y if mask is None else y * mask


@pytest.mark.parametrize("tracer", ["export", "make_fx"])
def test_every_offered_pass_runs_on_a_graph_with_none_and_number_inputs(tracer):
    session = fxviz.Session(Masked().eval(), (torch.randn(1, 3, 8, 8), None, 3), tracer=tracer)
    assert ir_level(session.current.gm) == "aten"  # make_fx records nothing for the None input
    applied = []
    for name in fxviz.passes.available():
        if get(name).why_not(session.current.gm) is None:
            step = session.apply(name)
            assert step.check.status in ("match", "expected to differ"), (name, step.check.message)
            applied.append(name)
            session.undo()
    assert {"run_decompositions", "fuse_conv_bn", "channels_last", "replace_op"} <= set(applied)

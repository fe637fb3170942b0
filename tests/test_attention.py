"""Attention counted on every front-end, and annotation that never refuses a graph that runs
(issues 28 and 32)."""
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import fxviz
import fxviz._torch_internals
import fxviz.annotation.shapes
from fxviz._torch_internals import FlopCounter
from fxviz.timing.aten_breakdown import profile_aten
from fxviz.capture import capture, forget_front_end, front_end
from fxviz.annotation.shapes import annotated_run

B, H, L, E = 2, 4, 16, 8  # batch, heads, sequence, head size
SDPA_FLOPS = 4 * B * H * L * L * E  # QK^T and AV, 2 FLOPs per multiply-add


class SelfAttention(nn.Module):
    def __init__(self, heads: int = H, size: int = E):
        super().__init__()
        self.heads, self.qkv = heads, nn.Linear(heads * size, 3 * heads * size)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, n, d)


def _attention_notes(session: fxviz.Session) -> list[dict]:
    graph = session.current.graph
    return [graph.nodes[n] for n in graph if "attention" in str(graph.nodes[n].get("target", ""))]


@pytest.mark.parametrize("tracer", ["symbolic", "export", "make_fx"])
def test_scaled_dot_product_attention_is_counted_on_every_front_end(tracer):
    """symbolic calls F.scaled_dot_product_attention, export aten's, make_fx the CPU flash
    kernel: all count 4*B*H*L*S*E (torch's formula covers only the CUDA kernels)."""
    session = fxviz.Session(SelfAttention().eval(), torch.randn(B, L, H * E), tracer=tracer)
    [attention] = _attention_notes(session)
    assert attention["flops"] == SDPA_FLOPS and attention["macs"] == SDPA_FLOPS // 2


def test_attention_backward_on_cpu_is_counted_as_torch_counts_the_cuda_kernels():
    q, k, v = (torch.randn(B, H, L, E, requires_grad=True) for _ in range(3))
    with FlopCounter(display=False) as counter:
        F.scaled_dot_product_attention(q, k, v).sum().backward()
    counts = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    assert counts["aten._scaled_dot_product_flash_attention_for_cpu"] == SDPA_FLOPS
    # sdpa_backward_flop_count: the four gradient matmuls and the recomputed scores
    assert counts["aten._scaled_dot_product_flash_attention_for_cpu_backward"] == 10 * B * H * L * L * E


def test_flex_attention_is_counted():
    """torch's mode counts flex attention only when compiled; in eager code it refused to run it."""
    from torch.nn.attention.flex_attention import flex_attention

    class Flex(nn.Module):
        def forward(self, q, k, v):
            return flex_attention(q, k, v)

    q = torch.randn(B, H, L, E)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # flex attention warns that it is not compiled
        session = fxviz.Session(Flex(), (q, q, q), tracer="export")
    [flex] = _attention_notes(session)
    assert flex["flops"] == SDPA_FLOPS and session.current.check.status == "match"


class _AttentionPool(nn.Module):
    """A learned query fed to a module, as timm's attention pools do (vit_pe_core)."""

    def __init__(self):
        super().__init__()
        self.query = nn.Parameter(torch.randn(1, 8))
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return self.proj(self.query.expand(x.shape[0], -1)) + x


def test_a_module_fed_a_view_of_a_parameter_opens_with_its_flops():
    """The view, made under no_grad, needs a gradient but has no gradient function: torch's
    module tracker failed on it, and the Session was refused ("cannot run")."""
    session = fxviz.Session(_AttentionPool().eval(), torch.randn(2, 8))
    assert session.capture.method == "symbolic" and session.current.check.status == "match"
    assert session.current.graph.nodes["proj"]["flops"] == 2 * 2 * 8 * 8


def test_a_flop_formula_that_fails_leaves_the_flops_unknown_with_the_reason():
    @torch.library.custom_op("fxviz_test::doubled", mutates_args=())
    def doubled(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    from torch.utils.flop_counter import register_flop_formula

    @register_flop_formula(torch.ops.fxviz_test.doubled)
    def broken_formula(*args, **kwargs):
        raise ValueError("no formula for this shape")

    class Doubles(nn.Module):
        def forward(self, x):
            return torch.ops.fxviz_test.doubled(x) + 1

    x = torch.randn(3)
    gm = fxviz.trace(Doubles(), x)
    outputs, notes = annotated_run(gm, x)
    torch.testing.assert_close(outputs, x * 2 + 1)
    [node] = [name for name in notes if "doubled" in name]
    assert notes[node]["flops"] is None and notes[node]["macs"] is None
    assert "fxviz_test.doubled" in notes[node]["flops_why"] and "no formula for this shape" in notes[node]["flops_why"]
    assert notes[node]["tensor_meta"].shape == (3,) and notes[node]["bytes"] == 2 * 3 * 4


class _BrokenCounter(FlopCounter):
    def __enter__(self):
        raise RuntimeError("the counter broke")


def test_a_counter_that_breaks_leaves_flops_unknown_and_the_graph_runs(monkeypatch):
    """Whatever fails in torch's counter, the call runs again without it (a module too: it
    wrote nothing before failing), and the reason is kept."""
    monkeypatch.setattr(fxviz._torch_internals, "FlopCounter", _BrokenCounter)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval()
    x = torch.randn(4)  # a vector: the Linear runs under the counter, not by its formula on a batch
    outputs, notes = annotated_run(fxviz.trace(model, x), x)
    torch.testing.assert_close(outputs, model(x))
    linear = notes["_0"]
    assert linear["flops"] is None and "the counter broke" in linear["flops_why"]
    assert linear["tensor_meta"].shape == (4,) and linear["bytes"] == 4 * (4 + 4 * 4 + 4 + 4)


def test_auto_goes_on_when_fxviz_fails_after_a_capture():
    """A front-end raises TraceError for its capture; anything else came after it (fxviz
    processing the graph): the next method is tried, and the attempt names the part."""
    def broken(request):
        raise KeyError("module path")

    front_end("broken after capture", auto=-1)(broken)
    try:
        result = capture(nn.Linear(2, 2), torch.randn(1, 2))
    finally:
        forget_front_end("broken after capture")
    assert result.method == "symbolic"
    method, reason = result.attempts[0]
    assert method == "broken after capture"
    assert "captured, then fxviz failed processing its graph: KeyError" in reason


def test_node_time_and_aten_breakdown_of_attention_agree():
    """Both are medians over forwards of the graph's own code. The breakdown was one forward
    through an Interpreter: CPU attention, which splits over torch's thread pool, waits in
    some forwards for a descheduled thread of the pool on a busy machine (6.6 ms against a
    node time of 127 µs). One thread here: the test does not depend on how busy the machine is."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = nn.Sequential(*[SelfAttention(heads=4, size=16) for _ in range(4)]).eval()
        x = torch.randn(1, 64, 64)
        session = fxviz.Session(model, x)
        times = session.current.profile(repeats=20)
        breakdown = profile_aten(session.current.gm, x)
    finally:
        torch.set_num_threads(threads)
    assert breakdown.attrs["repeats"] == 5
    nodes = times[times["target"].str.contains("scaled_dot_product_attention")]
    kernels = breakdown[breakdown["aten_op"] == "aten::_scaled_dot_product_flash_attention_for_cpu"]
    kernel_us = kernels.set_index("node")["self_us"]
    assert len(nodes) == 4 and set(kernel_us.index) == set(nodes["node"])
    for node, median_us in zip(nodes["node"], nodes["median_us"]):
        # within 5x: the node's time includes the call's Python and dispatch, the kernel's not
        assert kernel_us[node] / 5 <= median_us <= kernel_us[node] * 5, (node, median_us, kernel_us[node])

"""fxviz on a CUDA device: timing reads device time (events, not launch time), passes
and checks run on the GPU, and the user's model stays where and as it was.

Skipped where there is no GPU (CI); run them on a GPU machine with
``pytest tests/test_cuda.py``.
"""
from __future__ import annotations

import copy
import operator

import pytest
import torch
import torch.fx
from torch import nn

import fxviz
from fxviz.timing.aten_breakdown import profile_aten
from fxviz.timing.profiling import profile
from fxviz.timing.timing_ab import measure_pair, paired_timing

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

DEVICE = "cuda"


def _matmul_graph(extra: bool = False) -> torch.fx.GraphModule:
    """x @ w, then (with ``extra``) a second x @ w, then a sum."""
    graph = torch.fx.Graph()
    x, w = graph.placeholder("x"), graph.placeholder("w")
    y = graph.call_function(torch.matmul, (x, w))
    if extra:
        y = graph.call_function(torch.matmul, (y, w))
    graph.output(graph.call_function(torch.sum, (y,)))
    return torch.fx.GraphModule(nn.Module(), graph)


def _event_time_us(fn, repeats: int = 30) -> float:
    """Median device time (µs) of ``fn()`` between two CUDA events."""
    times = []
    for _ in range(repeats + 3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return float(torch.tensor(times[3:]).median())


def test_profile_reads_device_time_not_launch_time():
    """A 4096³ matmul takes milliseconds on the device but microseconds to launch: the
    profile must report the former, as CUDA events around the op alone measure it."""
    x = torch.randn(4096, 4096, device=DEVICE)
    w = torch.randn(4096, 4096, device=DEVICE)
    gm = _matmul_graph()
    df = profile(gm, (x, w), warmup=3, repeats=20).set_index("node")
    alone = _event_time_us(lambda: torch.matmul(x, w))
    assert alone > 100  # a real device workload, far above launch cost
    assert 0.7 < df.loc["matmul", "median_us"] / alone < 1.4
    assert df.attrs["device"].startswith("cuda")
    assert df.attrs["overhead_per_node_us"] >= 0
    assert df.loc["matmul", "share"] > 80
    # device-bound: the kernels' own time agrees with the events, and nothing is flagged
    assert 0.8 < df.loc["matmul", "kernel_us"] / df.loc["matmul", "median_us"] < 1.25
    assert df.attrs["launch_bound"] is False and df.attrs["device_busy"] > 0.8


def test_profile_says_when_the_gpu_waits_for_the_host():
    """Sixty tiny ops: the GPU idles between launches, event times are host times, and
    the profile says so (launch_bound) with the kernels' own, much smaller, times."""
    graph = torch.fx.Graph()
    value = graph.placeholder("x")
    for _ in range(60):
        value = graph.call_function(torch.relu, (value,))
    graph.output(value)
    df = profile(torch.fx.GraphModule(nn.Module(), graph), torch.randn(16, device=DEVICE), warmup=3, repeats=20)
    assert df.attrs["launch_bound"] is True
    assert df.attrs["device_busy"] < 0.5
    relus = df[df["op"] == "call_function"]
    assert (relus["kernel_us"] < relus["median_us"]).mean() > 0.9


@pytest.mark.parametrize("launch_bound", [False, True])
def test_node_device_times_add_up_to_the_forward(launch_bound):
    """Per-node kernel times add up to an uninstrumented forward's device time within
    10 %, device-bound (a convnet at batch 64) or launch-bound (the same at batch 1, and
    a chain of tiny ops); the host's launch time is its own column."""
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(64, 10)).to(DEVICE).eval()
    x = torch.randn(1 if launch_bound else 64, 3, 64 if launch_bound else 224, 64 if launch_bound else 224,
                    device=DEVICE)
    df = profile(fxviz.trace(model), x, warmup=3, repeats=10)
    assert df.attrs["launch_bound"] is launch_bound
    assert 0.9 <= df.attrs["kernel_sum_ratio"] <= 1.1, df.attrs
    computing = df[(df["op"] == "call_module") & (df["kind"] != "Flatten")]  # Flatten is a view: no kernel
    assert (computing["host_us"] > 0).all() and (computing["kernel_us"] > 0).all()


def test_interleaved_compare_on_cuda_flags_what_changed():
    """Same graph, 4x the rows in B: the matmul is flagged increased (about 4x);
    an added matmul is 'added'; a shared node whose work did not change is not flagged."""
    w = torch.randn(2048, 2048, device=DEVICE)
    small, big = torch.randn(1024, 2048, device=DEVICE), torch.randn(4096, 2048, device=DEVICE)
    gm = _matmul_graph()
    rows = paired_timing(measure_pair(gm, (small, w), gm, (big, w), repeats=30), "node").set_index("node")
    assert rows.loc["matmul", "category"] == "increased"
    assert 3.0 < rows.loc["matmul", "ratio"] < 5.0

    rows = paired_timing(measure_pair(gm, (big, w), _matmul_graph(extra=True), (big, w), repeats=30),
                         "node").set_index("node")
    assert rows.loc["matmul_1", "category"] == "added"
    assert rows.loc["matmul", "category"] in ("unchanged", "too noisy to tell")


def _convnet() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def test_session_passes_and_checks_on_cuda_leave_the_model_alone():
    torch.manual_seed(0)
    model = _convnet().to(DEVICE).eval()
    with torch.no_grad():  # non-trivial statistics, so fusion has something to fold
        for bn in (model[1], model[4]):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    before = copy.deepcopy(model.state_dict())
    x = torch.randn(2, 3, 32, 32, device=DEVICE)
    session = fxviz.Session(model, x)
    assert session.current.check.status == "match"
    fused = session.apply("fuse_conv_bn")
    assert fused.check.status == "match"
    assert fused.check.max_rel < 1e-3
    assert not any(n.op == "call_module" and "BatchNorm" in type(fused.gm.get_submodule(n.target)).__name__
                   for n in fused.gm.graph.nodes)
    assert all(p.device.type == DEVICE for p in fused.gm.parameters())
    lowered = session.apply("channels_last")
    assert lowered.check.status == "match"
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.device.type == DEVICE for p in model.parameters())

    comparison = session.compare(0, 1, profile_kwargs={"repeats": 20})
    timing = comparison.timing_by_node.set_index("node")
    assert set(timing["category"]) <= {"added", "deleted", "increased", "decreased", "unchanged",
                                       "too noisy to tell"}
    assert (timing["control_us"] >= 0).all() and (timing["test_us"] >= 0).all()
    assert comparison.output_diff.status == "match"


def test_a_fused_resnet_matches_under_tf32():
    """cuDNN convolves float32 in TF32 by default: fusion moves a ResNet18's outputs by
    about 1e-4 of their scale there, a match, not a mismatch."""
    import torchvision

    model = torchvision.models.resnet18(weights=None).to(DEVICE).eval()
    session = fxviz.Session(model, torch.randn(2, 3, 64, 64, device=DEVICE))
    fused = session.apply("fuse_conv_bn")
    assert fused.check.status == "match", fused.check.message
    assert fused.check.max_rel < 1e-3


def test_run_decompositions_on_an_exported_cuda_program():
    model = _convnet().to(DEVICE).eval()
    program = torch.export.export(model, (torch.randn(2, 3, 32, 32, device=DEVICE),))
    session = fxviz.Session(program)
    step = session.apply("run_decompositions")
    assert step.check.status == "match"
    assert "aten.batch_norm.default" not in {str(n.target) for n in step.gm.graph.nodes}


def test_a_dynamo_graph_ending_at_a_data_dependent_branch_checks_on_cuda():
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x):
            y = self.linear(x)
            if y.sum() > 0:  # a graph break: the first graph returns the condition
                return y.relu()
            return y.sigmoid()

    session = fxviz.Session(Branchy().to(DEVICE), torch.randn(4, 8, device=DEVICE), tracer="dynamo")
    assert session.current.check.status == "match", session.current.check.message


def test_torch_compile_graphs_and_their_aot_parts_on_cuda():
    """fxviz.compiled on a GPU model: the graphs split at the branch, and AOT's forward
    and backward graphs run and check on the device."""
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.out = nn.Linear(8, 8), nn.Linear(8, 2)

        def forward(self, x):
            h = self.lin(x)
            if h.sum() > 0:
                h = h * 2
            return self.out(torch.relu(h))

    compiled = fxviz.compiled(Branchy().to(DEVICE), torch.randn(4, 8, device=DEVICE), backward=True)
    assert len(compiled.graphs) == 2 and compiled.graph_breaks[0]["reason"] == "Data-dependent branching"
    for index in range(2):
        for part in ("dynamo", "forward", "backward"):
            session = compiled.session(index, part)
            assert session.current.check.status == "match", (index, part, session.current.check.message)
            assert all(t.device.type == DEVICE for t in session.example_inputs if isinstance(t, torch.Tensor))


def test_profile_aten_attributes_kernels_to_nodes_on_cuda():
    x = torch.randn(2048, 2048, device=DEVICE)
    gm = _matmul_graph()
    df = profile_aten(gm, (x, x), warmup=2, repeats=3)
    node_rows = df[df["node"] == "matmul"]
    assert len(node_rows), "the matmul node's operators were not attributed to it"
    kernels = node_rows[node_rows["kind"] == "kernel"]
    assert len(kernels), "no kernel rows under the matmul node on CUDA"
    expected = _event_time_us(lambda: torch.matmul(x, x), repeats=10)
    assert 0.5 < kernels["device_total_us"].sum() / expected < 2.0


def test_training_step_on_cuda_is_checked():
    """A training step on the GPU (make_fx): opens with backward clusters and its check ends."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(DEVICE)
    before = copy.deepcopy(model.state_dict())

    def train_step(x, y):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    x, y = torch.randn(4, 8, device=DEVICE), torch.randn(4, 1, device=DEVICE)
    session = fxviz.Session(train_step, (x, y), tracer="make_fx")
    assert session.current.check.status == "match"
    paths = {n.meta.get("module_path") for n in session.current.gm.graph.nodes}
    assert "2 · backward" in paths, sorted(p for p in paths if p)
    assert all(t.device.type == DEVICE for t in session.current.gm.state_dict().values())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_profile_timed_forward_matches_plain_on_cuda():
    """Per-node events must not serialise the GPU: the instrumented forward's wall time
    stays within 10 % of the plain one on a device-bound chain."""
    graph = torch.fx.Graph()
    value = graph.placeholder("x")
    for _ in range(20):
        value = graph.call_function(operator.mul, (value, 1.0001))
    graph.output(value)
    gm = torch.fx.GraphModule(nn.Module(), graph)
    df = profile(gm, torch.randn(64 * 1024 * 1024, device=DEVICE), warmup=3, repeats=20)
    assert df.attrs["profiled_forward_us"] / df.attrs["plain_forward_us"] < 1.1
    assert abs(df["median_us"].sum() / df.attrs["profiled_forward_us"] - 1) < 0.15


def test_inductor_triton_kernels_mapped_to_nodes_and_timed_from_kernel_records():
    """fxviz.compiled(..., backend="inductor") on the GPU: Triton kernels, each computing
    node in exactly one kernel, fusion visible, times from the device's kernel records
    adding up to no more than the compiled call's time between CUDA events."""
    from test_kernels import Tiny, _computing, _is_view

    torch.manual_seed(0)
    model = Tiny().to(DEVICE).eval()
    with torch.no_grad():
        c = fxviz.compiled(model, torch.randn(4096, 3, 16, 16, device=DEVICE), backend="inductor")
    kernels = c.kernels
    assert "triton" in set(kernels.kind) and "extern" in set(kernels.kind)
    gm = c.session(0, "forward").current.gm
    counts = {}
    for nodes in kernels.nodes:
        for name in nodes:
            counts[name] = counts.get(name, 0) + 1
    assert all(count == 1 for count in counts.values())
    assert all(_is_view(n) for n in _computing(gm) if n.name not in counts)
    fused = kernels[(kernels.kind == "triton") & (kernels.nodes.map(len) >= 3)]
    assert len(fused) >= 1 and all("@triton.jit" in code for code in fused.code)
    assert (kernels.time_us > 0).all()
    ratio = kernels.time_us.sum() / c.kernel_totals[(0, "forward")]  # over the call's time between CUDA events
    # No more than the call; less by the gaps where the GPU waits for the wrapper's launches: this small
    # model is launch-bound (0.33 at this batch, 0.11 at batch 64, on an H200 with torch 2.11)
    assert 0.15 <= ratio <= 1.1, ratio


class ConvMLP(nn.Module):
    """Activations of megabytes: the caching allocator's 512-byte rounding is lost in them."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 32, 3, padding=1)
        self.fc1, self.fc2 = nn.Linear(32 * 16 * 16, 256), nn.Linear(256, 10)

    def forward(self, x):  # 32x3x64x64: conv1 and its ReLU 8 MiB each, conv2 and its ReLU 16 MiB each
        x = torch.max_pool2d(torch.relu(self.conv2(torch.relu(self.conv1(x)))), 4)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def test_memory_estimate_is_within_10_percent_of_the_measured_peak():
    torch.manual_seed(0)
    x = torch.randn(32, 3, 64, 64, device=DEVICE)
    rows = fxviz.Session(ConvMLP().eval().to(DEVICE), x).current.memory
    measured = rows.attrs["measured_peak_bytes"]
    assert rows.attrs["peak_bytes"] == 32 << 20 and rows.attrs["peak_node"] == "relu_1"  # conv2's output and its ReLU
    assert measured == pytest.approx(rows.attrs["peak_bytes"], rel=0.10)

"""Per-node profiling: the facts a user reads off the table (those of torch.fx's per-node profiler tutorial)."""
import gc
import subprocess
import sys
import time
import weakref
from types import SimpleNamespace

import matplotlib
import numpy as np

matplotlib.use("Agg")

import pytest
import torch
import torch.fx
import torchvision
from torch import nn

from fxviz.background.jobs import cancellable
from fxviz.timing import _clock
from fxviz.timing._clock import instrument
from fxviz.errors import Cancelled, FxvizError
from fxviz.timing.aten_breakdown import attribute_events, auto_repeats, profile_aten
from fxviz.timing.profiling import _table, plot_profile, profile
from fxviz.annotation.shapes import annotate
from fxviz.capture import trace

COLUMNS = ["node", "op", "target", "kind", "module_path", "median_us", "p25_us", "p75_us", "share", "flops", "gflops",
           "bytes", "gbps"]


@pytest.fixture(scope="module")
def resnet18():
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    gm = annotate(trace(model), (x,))
    return gm, x


@pytest.fixture(scope="module")
def resnet18_profile(resnet18):
    gm, x = resnet18
    return profile(gm, (x,), warmup=1, repeats=3)


class Sleep(nn.Module):
    """A node whose minimum duration is known: its time must land on it, not a neighbour."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def forward(self, x):
        time.sleep(self.seconds)
        return x


class ConvBN(nn.Module):
    def __init__(self, middle=None):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.middle = middle or nn.Identity()
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.middle(self.conv(x))).relu()


class Tracer(torch.fx.Tracer):
    def is_leaf_module(self, m, qualname):
        return isinstance(m, (Sleep, Interrupt, Count)) or super().is_leaf_module(m, qualname)


def fx_trace(model):
    return torch.fx.GraphModule(model, Tracer().trace(model))


class Interrupt(nn.Module):
    """Raises KeyboardInterrupt on its n-th call, as Ctrl-C in the middle of a profile."""

    def __init__(self, at):
        super().__init__()
        self.calls, self.at = 0, at

    def forward(self, x):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return x


class Count(nn.Module):
    """Counts its forwards: where a cancelled measurement stopped."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x


def test_resnet18_has_one_row_per_node_and_shares_sum_to_100(resnet18, resnet18_profile):
    gm, _ = resnet18
    df = resnet18_profile
    assert len(df) == 71
    assert list(df.columns[: len(COLUMNS)]) == COLUMNS
    assert list(df["node"]) == [n.name for n in gm.graph.nodes]
    assert (df["node"].iloc[0], df["node"].iloc[-1]) == ("x", "output")
    assert df["share"].sum() == pytest.approx(100.0)
    assert (df["p25_us"] <= df["median_us"]).all() and (df["median_us"] <= df["p75_us"]).all()
    conv1 = df.set_index("node").loc["conv1"]
    assert (conv1["op"], conv1["target"], conv1["kind"], conv1["module_path"]) == (
        "call_module", "conv1 (Conv2d)", "Conv2d", "conv1")
    assert df.set_index("node").loc["add", "target"] == "operator.add"


def test_attrs_report_overhead_against_a_plain_forward(resnet18_profile):
    attrs = resnet18_profile.attrs
    assert attrs["repeats"] == 3 and attrs["warmup"] == 1 and attrs["device"] == "cpu"
    assert attrs["plain_forward_us"] > 0 and attrs["profiled_forward_us"] > 0


def test_overhead_pairs_each_plain_forward_with_the_timed_one_after_it():
    gm = torch.fx.symbolic_trace(nn.ReLU())  # 3 nodes
    nodes = list(gm.graph.nodes)
    times = np.ones((5, 3))
    # a burst slows repeat 2 only; the paired differences are 3, 6, 9 µs
    df = _table(gm, nodes, {}, torch.device("cpu"), 1,
                plain=[100, 500, 100], profiled=[103, 104, 506, 900, 109], times=times)
    assert df.attrs["overhead_per_node_us"] == pytest.approx(6 / 3)
    assert (df.attrs["plain_forward_us"], df.attrs["profiled_forward_us"]) == (100, 109)


def test_flops_come_from_annotate_and_give_achieved_rate(resnet18_profile):
    rows = resnet18_profile.set_index("node")
    assert rows.loc["conv1", "flops"] == 2 * 64 * 3 * 7 * 7 * 32 * 32
    assert rows.loc["conv1", "gflops"] == pytest.approx(
        rows.loc["conv1", "flops"] / rows.loc["conv1", "median_us"] / 1e3)
    assert np.isnan(rows.loc["bn1", "flops"]) and np.isnan(rows.loc["bn1", "gflops"])  # not counted, not 0
    assert rows.loc["bn1", "bytes"] == 4 * (2 * 64 * 32 * 32 + 4 * 64) + 8
    assert rows.loc["bn1", "gbps"] == pytest.approx(rows.loc["bn1", "bytes"] / rows.loc["bn1", "median_us"] / 1e3)
    unannotated = profile(torch.fx.symbolic_trace(nn.Linear(4, 4)), torch.randn(2, 4), warmup=0, repeats=1)
    assert unannotated["flops"].isna().all() and unannotated["gflops"].isna().all()
    assert unannotated["bytes"].isna().all()
    assert unannotated["module_path"].isna().all()
    given = profile(torch.fx.symbolic_trace(nn.Linear(4, 4)), torch.randn(2, 4), warmup=0, repeats=1,
                    flops={"linear": 64})  # e.g. annotated on a copy of the graph
    assert given.set_index("node")["flops"].fillna(-1).to_dict() == {
        "input_1": -1, "weight": -1, "bias": -1, "linear": 64, "output": -1}


class FakeClock:
    """The timing engine's clock (``time`` in :mod:`fxviz.timing._clock`), moved on only by
    :class:`Spend`: what each node is charged is exact, however busy the machine."""

    def __init__(self):
        self.ns = 0

    def perf_counter_ns(self):
        return self.ns

    def __getattr__(self, name):  # the rest of the time module, as it is
        return getattr(time, name)


class Spend(Sleep):
    """A :class:`Sleep` (a leaf) on a :class:`FakeClock`: ``us`` µs of it, no real time."""

    def __init__(self, clock, us):
        super().__init__(us / 1e6)
        self.clock, self.us = clock, us

    def forward(self, x):
        self.clock.ns += self.us * 1000
        return x


def test_time_is_charged_to_the_node_that_spent_it(monkeypatch):
    slept = profile(fx_trace(nn.Sequential(nn.ReLU(), Sleep(0.005))), torch.randn(2), warmup=0, repeats=3)
    assert slept.set_index("node").loc["_1", "p25_us"] >= 5000  # the real clock: at least the sleep
    clock = FakeClock()
    monkeypatch.setattr(_clock, "time", clock)
    model = nn.Sequential(nn.ReLU(), Spend(clock, 5000), nn.ReLU(), Spend(clock, 700))
    df = profile(fx_trace(model), torch.randn(2), warmup=0, repeats=3).set_index("node")
    assert df["median_us"].to_dict() == {"input_1": 0, "_0": 0, "_1": 5000, "_2": 0, "_3": 700, "output": 0}
    assert df["share"].idxmax() == "_1" and df.attrs["profiled_forward_us"] == 5700


def test_timed_forward_computes_what_the_module_computes():
    gm = torch.fx.symbolic_trace(ConvBN().eval())
    stamps = []

    def tick(i):
        stamps.append(i)

    x = torch.randn(1, 3, 8, 8)
    torch.testing.assert_close(instrument(gm, tick)(x), gm(x), rtol=0, atol=0)
    assert stamps == list(range(len(gm.graph.nodes)))


def test_making_timed_code_leaves_no_copy_for_the_collector():
    """The timed code is made from the graph's own code, not from a copy of the graph:
    nothing is left for a full collection of the whole heap."""
    gm = trace(nn.Sequential(*[nn.ReLU() for _ in range(300)]))
    _clock._timed_code(trace(nn.ReLU()))  # one-off imports and caches
    while gc.collect():  # what earlier tests left, finalizers that free more included
        pass
    _clock._timed_code(gm)
    assert gm in _clock._kept and gc.isenabled()
    assert gc.collect() < len(gm.graph.nodes)  # the copy: 4 objects per node


def test_timed_code_is_made_once_per_graph_and_kept_only_while_it_lives():
    gm, x = fx_trace(ConvBN().eval()), torch.randn(1, 3, 8, 8)
    first, second = [], []
    with cancellable(lambda: False):
        one = instrument(gm, first.append)
    with cancellable(lambda: True):  # kept: nothing to copy, so nothing to cancel
        two = instrument(gm, second.append)
    torch.testing.assert_close(two(x), one(x), rtol=0, atol=0)
    assert first == second == list(range(len(gm.graph.nodes)))  # each its own clock
    assert one.code.__code__ is two.code.__code__
    gm.recompile()  # the same code: the same timed code
    assert instrument(gm, first.append).code.__code__ is one.code.__code__
    relu = next(n for n in gm.graph.nodes if n.target == "relu")
    with gm.graph.inserting_after(relu):  # edited without recompiling, as FX allows: timed afresh
        gm.graph.call_function(torch.neg, (relu,))
    ticks = []
    instrument(gm, ticks.append)(x)
    assert ticks == list(range(len(gm.graph.nodes)))
    others = [fx_trace(ConvBN()) for _ in range(_clock.MAX_KEPT)]
    for other in others[:-1]:
        instrument(other, first.append)
    instrument(gm, first.append)  # measured again: now the most recent
    instrument(others[-1], first.append)  # the least recently measured goes, not gm
    assert gm in _clock._kept and others[0] not in _clock._kept
    kept = fx_trace(ConvBN())
    instrument(kept, first.append)
    alive = weakref.ref(kept)
    del kept, one, two
    gc.collect()
    assert alive() is None  # the code kept does not keep its graph alive


def test_plain_and_timed_forwards_both_leave_out_module_hooks():
    """An exported program's module checks its inputs in a hook (40 µs): counted in the
    plain forward only, it hid the clock's overhead (always "below resolution")."""
    gm, x = fx_trace(nn.Sequential(nn.ReLU(), nn.ReLU())), torch.randn(2)
    hooked = []
    gm.register_forward_pre_hook(lambda *_: hooked.append(1))
    df = profile(gm, x, warmup=1, repeats=5)
    assert df.attrs["repeats"] == 5 and hooked == []  # 1 + 5 timed forwards, 1 + 3 plain ones: none ran it
    gm(x)
    assert hooked == [1]  # the hook is there: a call of gm runs it


def test_budget_bounds_warmup_and_repeats():
    gm = fx_trace(nn.Sequential(Sleep(0.01)))
    df = profile(gm, torch.randn(2), warmup=100, repeats=1000, budget_s=0.3)
    # every forward takes at least 10 ms: warm-up (two per run) stops after 0.075 s,
    # and at most 30 timed forwards fit in 0.3 s
    assert 1 <= df.attrs["warmup"] <= 4
    assert 3 <= df.attrs["repeats"] <= 30
    assert profile(gm, torch.randn(2), warmup=0, repeats=1000, budget_s=0.0).attrs["repeats"] == 3


def test_profile_leaves_a_training_model_unchanged():
    model = ConvBN().train()
    gm = torch.fx.symbolic_trace(model)
    before = {k: v.clone() for k, v in gm.state_dict().items()}
    code = gm.code
    profile(gm, torch.randn(2, 3, 8, 8), warmup=1, repeats=3)
    after = gm.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert int(model.bn.num_batches_tracked) == 0
    assert gm.training and model.bn.training
    assert gm.code == code and torch.is_grad_enabled()


def test_ctrl_c_leaves_nothing_broken():
    model = ConvBN(middle=Interrupt(at=6)).train()  # the timed forward of repeat 1
    gm = fx_trace(model)
    mean = model.bn.running_mean.clone()
    with pytest.raises(KeyboardInterrupt):
        profile(gm, torch.randn(2, 3, 8, 8), warmup=2, repeats=5)
    assert gc.isenabled() and torch.is_grad_enabled()
    assert torch.equal(model.bn.running_mean, mean) and int(model.bn.num_batches_tracked) == 0
    df = profile(gm, torch.randn(2, 3, 8, 8), warmup=0, repeats=3)
    assert df.attrs["repeats"] == 3


def test_a_cancelled_job_stops_at_the_next_forward_and_leaves_nothing_broken():
    count = Count()
    model = ConvBN(middle=count).train()
    gm, x = fx_trace(model), torch.randn(2, 3, 8, 8)
    mean = model.bn.running_mean.clone()
    with cancellable(lambda: count.calls >= 4), pytest.raises(Cancelled, match="cancelled before it finished"):
        profile(gm, x, warmup=2, repeats=10**6)
    assert count.calls == 4  # two warm-up rounds (plain and timed forward), then none
    assert gc.isenabled() and torch.is_grad_enabled()
    assert torch.equal(model.bn.running_mean, mean) and int(model.bn.num_batches_tracked) == 0

    def tick(i):
        pass

    fresh = fx_trace(model)  # gm's timed code is made (and kept) already: nothing left to cancel
    for measure in (lambda: instrument(fresh, tick), lambda: profile_aten(gm, x)):  # between nodes
        with cancellable(lambda: True), pytest.raises(Cancelled):
            measure()
    assert count.calls == 4 and profile(gm, x, warmup=0, repeats=3).attrs["repeats"] == 3


def test_profile_rejects_what_it_cannot_time():
    with pytest.raises(FxvizError, match="Trace the model first"):
        profile(nn.Linear(2, 2), torch.randn(1, 2))
    with pytest.raises(FxvizError, match="repeats >= 1"):
        profile(torch.fx.symbolic_trace(nn.Linear(2, 2)), torch.randn(1, 2), repeats=0)


def test_aten_breakdown_keeps_kinetos_notes_out_of_the_cell_and_passes_the_rest_on():
    """kineto writes "USDT ... profiler_start" and, without a GPU, "ERROR ... gpuGetDeviceCount
    failed" to file descriptor 2: in a notebook, lines under the cell that read as a failure."""
    script = (
        "import os, torch, fxviz\n"
        "from torch import nn\n"
        "class Loud(nn.Module):\n"
        "    def forward(self, x):\n"
        "        os.write(2, b'mine\\n')\n"
        "        return x + 1\n"
        "gm = fxviz.trace(nn.Sequential(nn.Linear(4, 4), Loud()), torch.randn(2, 4), tracer='symbolic',"
        " leaf_modules=[Loud])\n"
        "print(len(fxviz.profile_aten(gm, torch.randn(2, 4), warmup=1, repeats=1)))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and int(done.stdout) > 0, done.stderr
    assert done.stderr.splitlines().count("mine") == 2  # the warm-up's, and the profiled run's kept back and passed on
    assert "profiler_start" not in done.stderr and ("gpuGetDeviceCount" not in done.stderr
                                                    or torch.cuda.is_available()), done.stderr


def test_aten_attribution_lists_convolution_under_the_conv_node():
    gm = torch.fx.symbolic_trace(ConvBN().eval())
    df = profile_aten(gm, torch.randn(1, 3, 8, 8))
    conv = df[df["node"] == "conv"]
    assert "aten::convolution" in set(conv["aten_op"])
    assert conv.set_index("aten_op").loc["aten::conv2d", "depth"] == 0
    assert set(df["node"]) <= {n.name for n in gm.graph.nodes}
    assert "aten::batch_norm" in set(df[df["node"] == "bn"]["aten_op"])
    assert list(df.columns) == ["node", "aten_op", "kind", "depth", "count", "self_us", "total_us"]


def test_aten_breakdown_leaves_no_cycles_for_the_collector():
    """The parsed trace is freed at once: its events, left to the collector, would each
    cost a full collection of the kernel's heap (2.2 million objects at 100k nodes)."""
    model = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(20)])
    gm, x = trace(model), torch.randn(2, 4)
    profile_aten(gm, x)  # one-off imports and caches
    gc.collect()
    df = profile_aten(gm, x)
    assert len(df) >= 2 * 20 and gc.isenabled()
    assert gc.collect() < 4 * len(gm.graph.nodes)  # 119 here; the trace left 3,213


def _event(name, parent=None, self_us=0.0, total_us=0.0, kernels=()):
    return SimpleNamespace(name=name, cpu_parent=parent, self_cpu_time_total=self_us, cpu_time_total=total_us,
                           self_device_time_total=0.0, device_time_total=sum(k.duration for k in kernels),
                           kernels=list(kernels))


def test_attribute_events_groups_by_enclosing_node_per_forward():
    events = []
    for _ in range(2):  # two repeats of the same forward
        node = _event("fxviz::node::conv", total_us=30)
        conv = _event("aten::conv2d", node, self_us=2, total_us=20)
        launch = _event("cudaLaunchKernel", conv, self_us=4, total_us=4,
                        kernels=[SimpleNamespace(name="implicit_gemm", device=0, duration=50.0)])
        stray = _event("aten::empty")  # outside any node: left out
        events += [node, conv, launch, stray]
    df = attribute_events(events, ["x", "conv", "output"], repeats=2, device_time=True)
    rows = df.set_index("aten_op")
    assert list(df["aten_op"]) == ["aten::conv2d", "cudaLaunchKernel", "implicit_gemm"]
    assert rows.loc["aten::conv2d", ["depth", "count", "self_us", "total_us"]].tolist() == [0, 1, 2, 20]
    assert rows.loc["implicit_gemm", ["kind", "depth", "device_total_us"]].tolist() == ["kernel", 2, 50.0]
    assert rows.loc["cudaLaunchKernel", "device_total_us"] == 50.0


def test_attribute_events_takes_the_median_forward_so_one_stalled_forward_does_not_count():
    """An op that splits over torch's thread pool waits for a descheduled thread on a busy
    machine (20 ms for a 20 µs attention): the mean of 5 forwards moved 1000x, the median not.
    A forward where an op did not run counts 0 for it."""
    events = []
    for run, self_us in enumerate([20.0, 21.0, 20_000.0, 19.0, 22.0]):
        node = _event("fxviz::node::attention", total_us=self_us + 5)
        events.append(node)
        events.append(_event("aten::_scaled_dot_product_flash_attention_for_cpu", node, self_us, self_us))
        if run < 2:  # an allocation in two forwards of five: its median is 0
            events.append(_event("aten::empty", node, 1.0, 1.0))
    df = attribute_events(events, ["attention"], repeats=5).set_index("aten_op")
    assert df.loc["aten::_scaled_dot_product_flash_attention_for_cpu", ["count", "self_us"]].tolist() == [1, 21.0]
    assert df.loc["aten::empty", ["count", "self_us"]].tolist() == [0, 0.0]


def test_aten_breakdown_profiles_several_forwards_unless_the_graph_is_large():
    assert [auto_repeats(n) for n in (10, 3_363, 20_000, 50_000, 100_000)] == [5, 5, 5, 2, 1]
    gm = torch.fx.symbolic_trace(ConvBN().eval())
    assert profile_aten(gm, torch.randn(1, 3, 8, 8)).attrs["repeats"] == 5


def test_plot_profile_draws_the_slowest_nodes(resnet18_profile):
    ax = plot_profile(resnet18_profile, top=5)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(ax.patches) == 5
    assert labels[-1] == resnet18_profile.loc[resnet18_profile["median_us"].idxmax(), "node"]


def test_overhead_is_never_negative_and_says_when_it_is_below_resolution():
    gm = torch.fx.symbolic_trace(nn.ReLU())
    nodes, times = list(gm.graph.nodes), np.ones((4, 3))
    # a busy machine: the timed forwards ran faster than the plain ones before them
    df = _table(gm, nodes, {}, torch.device("cpu"), 1,
                plain=[200, 190], profiled=[150, 300, 180, 310], times=times)
    assert df.attrs["overhead_per_node_us"] == 0.0 and df.attrs["overhead_below_resolution"]
    assert df.attrs["spread"] == pytest.approx((302.5 - 172.5) / 240)
    clear = _table(gm, nodes, {}, torch.device("cpu"), 1,
                   plain=[100, 100], profiled=[106, 106, 106, 106], times=times)
    assert clear.attrs["overhead_per_node_us"] == pytest.approx(2.0) and not clear.attrs["overhead_below_resolution"]


def test_a_profile_records_its_conditions_and_noise():
    df = profile(torch.fx.symbolic_trace(nn.Linear(4, 4)), torch.randn(2, 4), warmup=1, repeats=5)
    taken = df.attrs["conditions"]
    assert taken["threads"] == torch.get_num_threads() and taken["device"] == "cpu"
    assert taken["cpu_count"] >= 1 and taken["load"] >= 0 and taken["load_after"] >= 0
    busy = max(taken["load"], taken["load_after"]) > taken["cpu_count"]
    assert df.attrs["noisy"] == (busy or df.attrs["spread"] > 0.10)

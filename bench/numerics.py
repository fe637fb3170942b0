"""What ``Comparison.numerics`` costs: time and peak memory as ratios to plain forwards.

Cases: resnet50 (random weights, eval, 1x3x64x64) before and after ``fuse_conv_bn``
(every fused conv is run again on the first step's values: the shadow run), and a
30k-node synthetic graph of small elementwise ops (1x16 values: per-node overhead at its
worst) against a copy whose first op is scaled by 1.001 (every node differs).
Time: ``numerics`` given the two steps' structure, as ``Comparison.numerics`` is (the
structure, which the comparison shows first, is timed apart), over both plain forwards
(one of each step's GraphModule), alternating, the minimum of 5 each, in the same
process, as this thread's CPU time (torch runs on this one thread): the machine is shared,
and wall time counts the turns other processes take; the first call
on fresh steps is what is timed each time (nothing is cached between calls).
Memory, two ways, each the numerics call's peak over one forward of step a's:
tensors: the peak of the bytes torch's CPU allocator holds beyond what it held before,
from the profiler's memory events (the values both runs hold: what the target is about);
RSS: the process's peak resident memory above what it held just before (VmHWM, reset
through /proc/self/clear_refs), in a fresh process per measurement, with glibc's mmap
threshold fixed at 64 KiB; it counts Python objects too (the result's table, a closure
per node), which a plain forward of a 30k-node graph of 64-byte values does not have
(its RSS ratio is printed only where the forward adds a MiB or more; both sizes always).
Targets: <= 3x time, <= 2x memory. Run: ``.venv/bin/python bench/numerics.py``.
"""
from __future__ import annotations

import copy
import operator
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import torch

import fxviz
from fxviz.checks.numerics import numerics
from fxviz.diff.structure import structure

OPS = (torch.sin, torch.relu, torch.tanh)


def resnet50():
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    session = fxviz.Session(model, x)  # its check is computed on first use: never here
    session.apply("fuse_conv_bn")
    return session.steps[0], session.steps[1]


def synthetic(n_nodes: int = 30_000):
    """A chain of small elementwise ops with a residual add every 25 (one graph, built directly)."""
    graph = torch.fx.Graph()
    x = h = graph.placeholder("x")
    for i in range(n_nodes - 2):
        h = graph.call_function(operator.add, (h, x)) if i % 25 == 24 else graph.call_function(OPS[i % 3], (h,))
        if i % 25 == 24:
            x = h
    graph.output(h)
    gm_a = torch.fx.GraphModule(torch.nn.Module(), graph)
    gm_b = copy.deepcopy(gm_a)
    first = next(n for n in gm_b.graph.nodes if n.op == "call_function")
    with gm_b.graph.inserting_after(first):
        scaled = gm_b.graph.call_function(operator.mul, (first, 1.001))
    first.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled)
    gm_b.recompile()
    inputs = (torch.randn(1, 16),)
    return (SimpleNamespace(index=0, gm=gm_a, code="", example_inputs=inputs),
            SimpleNamespace(index=1, gm=gm_b, code="", example_inputs=inputs))


CASES = {"resnet50 (fuse_conv_bn)": resnet50, "30k-node chain (one op off)": synthetic}


def forward(step):
    with torch.no_grad():
        return step.gm(*step.example_inputs)


def peak_rss(case: str, what: str) -> int:
    """Run in a child: bytes of resident memory the measured call added at its peak."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run([sys.executable, __file__, "--memory", case, what], env=env, capture_output=True,
                         text=True, check=True)
    return int(out.stdout.split()[-1])


def _measure_memory(case: str, what: str) -> None:
    step_a, step_b = CASES[case]()
    shape = structure(step_a.gm, step_b.gm)
    forward(step_a), forward(step_b)  # code and kernels loaded before the baseline
    if what == "numerics":
        numerics(step_a, step_b, shape)  # and numerics' own (modules it imports, its first pandas and numpy calls)
    with open("/proc/self/clear_refs", "w") as clear:  # the peak (VmHWM) starts again from now
        clear.write("5")
    before = _status("VmRSS")
    forward(step_a) if what == "forward" else numerics(step_a, step_b, shape)
    print(_status("VmHWM") - before)


def _status(field: str) -> int:
    """A /proc/self/status memory field in bytes."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def peak_tensor_bytes(fn) -> int:
    """The most bytes torch's allocators held during ``fn()`` beyond what they held before."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]")
    total = peak = 0
    for _, size in events:
        total += size
        peak = max(peak, total)
    return peak


def main() -> None:
    torch.set_num_threads(1)
    print(f"{'case':30} {'numerics / 2 forwards':>22} {'tensors / 1 forward':>20} {'RSS / 1 forward':>16}")
    for case, make in CASES.items():
        times = {"numerics": [], "forwards": [], "structure": []}
        for _ in range(5):
            step_a, step_b = make()  # fresh steps: nothing of an earlier call reused
            start = time.thread_time()
            shape = structure(step_a.gm, step_b.gm)
            times["structure"].append(time.thread_time() - start)
            start = time.thread_time()
            forward(step_a), forward(step_b)
            times["forwards"].append(time.thread_time() - start)
            start = time.thread_time()
            numerics(step_a, step_b, shape)
            times["numerics"].append(time.thread_time() - start)
        took, plain, shape_s = (min(times[k]) for k in ("numerics", "forwards", "structure"))
        tensors = peak_tensor_bytes(lambda: numerics(step_a, step_b, shape))
        one = peak_tensor_bytes(lambda: forward(step_a))
        rss_numerics, rss_forward = peak_rss(case, "numerics"), peak_rss(case, "forward")
        rss = f"{rss_numerics / rss_forward:15.2f}x" if rss_forward >= 1 << 20 else f"{'n/a':>16}"  # pages: 1 MiB at least
        print(f"{case:30} {took / plain:21.2f}x {tensors / max(one, 1):19.2f}x {rss}   "
              f"({took:.3f} s vs {plain:.3f} s; tensors {tensors / 1024:.0f} KiB vs {one / 1024:.1f} KiB; "
              f"RSS {rss_numerics / 2**20:.1f} MiB vs {rss_forward / 2**20:.1f} MiB; structure {shape_s:.3f} s apart)")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--memory"]:
        torch.set_num_threads(1)
        _measure_memory(sys.argv[2], sys.argv[3])
    else:
        main()

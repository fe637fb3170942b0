"""What ``Comparison.numerics`` costs: time and peak memory as ratios to plain forwards.

Cases: resnet50 (random weights, eval, 1x3x64x64) before and after ``fuse_conv_bn``
(every node after the first conv differs in rounding, so every node is also shadow-run),
and a 30k-node synthetic graph of small elementwise ops against a copy whose first op is
scaled by 1.001 (every node differs: the worst case for the shadow run).
Time: the median of 3 ``numerics`` runs over the median of 3 runs of both plain
forwards (one of each step's GraphModule), measured in the same process. Memory: the
process's peak resident memory above what it held just before (VmHWM, reset through
/proc/self/clear_refs), in a fresh process per measurement, with glibc's mmap threshold fixed at 64 KiB so that freed
tensors go back to the system (RSS then follows the tensors torch's CPU allocator holds;
tracemalloc does not see them); the ratio is ``numerics``' over one forward of step a.
Targets: <= 3x time, <= 2x memory. Run: ``.venv/bin/python bench/numerics.py``.
"""
from __future__ import annotations

import copy
import operator
import os
import statistics
import subprocess
import sys
import time
from types import SimpleNamespace

import torch

import fxviz
from fxviz.numerics import numerics

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


def median_time(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_rss(case: str, what: str) -> int:
    """Run in a child: bytes of resident memory the measured call added at its peak."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run([sys.executable, __file__, "--memory", case, what], env=env, capture_output=True,
                         text=True, check=True)
    return int(out.stdout.split()[-1])


def _measure_memory(case: str, what: str) -> None:
    step_a, step_b = CASES[case]()
    forward(step_a), forward(step_b)  # code and kernels loaded before the baseline
    with open("/proc/self/clear_refs", "w") as clear:  # the peak (VmHWM) starts again from now
        clear.write("5")
    before = _status("VmRSS")
    forward(step_a) if what == "forward" else numerics(step_a, step_b)
    print(_status("VmHWM") - before)


def _status(field: str) -> int:
    """A /proc/self/status memory field in bytes."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def main() -> None:
    torch.set_num_threads(1)
    print(f"{'case':32} {'numerics / 2 forwards':>22} {'peak memory / 1 forward':>24}")
    for case, make in CASES.items():
        step_a, step_b = make()
        numerics(step_a, step_b)  # warm
        plain = median_time(lambda: (forward(step_a), forward(step_b)))
        took = median_time(lambda: numerics(step_a, step_b))
        memory = peak_rss(case, "numerics") / max(peak_rss(case, "forward"), 1)
        print(f"{case:32} {took / plain:21.2f}x {memory:23.2f}x   ({took:.3f} s vs {plain:.3f} s)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--memory"]:
        torch.set_num_threads(1)
        _measure_memory(sys.argv[2], sys.argv[3])
    else:
        main()

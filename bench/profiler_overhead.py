"""Cost of fxviz.profile against a plain forward, measured in the same run.

Prints, for resnet18 and resnet50 (random weights, 224x224) at batch 1 and 10: the
plain forward, the profiled (instrumented) forward, the per-node overhead and their
ratio; the same for a naive timed Interpreter (the tutorial's profiler) as a second
baseline; and whether two 3-second profiles of resnet50 at batch 1 agree.
Targets: ratio < 1.1 on resnet50 batch 10, overhead < 15 µs per node, and medians of
nodes above 1 % share within 10 % from one profile to the next.
On a shared machine, ``--threads 1`` keeps other processes from stalling torch's
thread pool, which otherwise swamps these sub-microsecond effects.
"""
from __future__ import annotations

import argparse
import operator
import os
import statistics
import time

import torch
import torch.fx
import torchvision

from fxviz.timing.profiling import profile
from fxviz.capture import trace


def sync() -> None:
    """Drain the device: a wall clock around GPU work measures launches otherwise."""
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


class NaiveTimer(torch.fx.Interpreter):
    """The tutorial's profiler: time every ``run_node`` with a wall clock (on a GPU,
    synchronising after each node, the only honest way a wall clock can)."""

    def run_node(self, n):
        start = time.perf_counter()
        result = super().run_node(n)
        sync()
        self.times[n.name] = time.perf_counter() - start
        return result

    def run(self, *args):
        self.times = {}
        return super().run(*args)


def chain(length: int) -> torch.fx.GraphModule:
    """``length`` near-free adds on a one-element tensor: a forward that is all overhead."""
    graph = torch.fx.Graph()
    value = graph.placeholder("x")
    for _ in range(length):
        value = graph.call_function(operator.add, (value, 1))
    graph.output(value)
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def naive_overhead(gm, x, repeats: int) -> tuple[float, float, float]:
    """Plain and naive-Interpreter forwards, interleaved: (median plain µs, median
    naive µs, median of paired differences per node µs), as profile() reports its own."""
    timer, plain, naive = NaiveTimer(gm), [], []
    with torch.no_grad():
        gm(x), timer.run(x)
        for _ in range(repeats):
            sync()
            start = time.perf_counter()
            gm(x)
            sync()
            plain.append(time.perf_counter() - start)
            start = time.perf_counter()
            timer.run(x)
            naive.append(time.perf_counter() - start)
    paired = statistics.median(n - p for p, n in zip(plain, naive))
    nodes = len(gm.graph.nodes)
    return statistics.median(plain) * 1e6, statistics.median(naive) * 1e6, paired * 1e6 / nodes


def row(name: str, nodes: int, plain_us: float, profiled_us: float, overhead_us: float | None) -> None:
    """One line; an overhead of None is below what this run resolves (never a negative number)."""
    ratio = profiled_us / plain_us
    overhead = "<res" if overhead_us is None else f"{max(overhead_us, 0.0):.2f}"
    print(f"{name:<38}{nodes:>6}{plain_us / 1e3:>12.2f}{profiled_us / 1e3:>14.2f}{overhead:>10}{ratio:>8.3f}")


def fxviz_row(name: str, df) -> None:
    attrs = df.attrs
    overhead = None if attrs["overhead_below_resolution"] else attrs["overhead_per_node_us"]
    row(name, len(df), attrs["plain_forward_us"], attrs["profiled_forward_us"], overhead)
    if "device_busy" in attrs:
        print(f"{'':<4}GPU busy {attrs['device_busy']:.0%} of the plain forward"
              f"{' (launch-bound)' if attrs['launch_bound'] else ''}; kernels {df['kernel_us'].sum() / 1e3:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--device", default="cpu", help="where models and inputs live, e.g. cuda")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"torch {torch.__version__} on {device}, {torch.get_num_threads()} threads on {os.cpu_count()} CPUs, "
          f"load average {load}")
    print("µs/node: median over repeats of (profiled - plain forward run just before it) / nodes; "
          "<res: a quarter or more of those pairs show none (below resolution)")
    print(f"{'':<38}{'nodes':>6}{'plain ms':>12}{'profiled ms':>14}{'µs/node':>10}{'ratio':>8}")
    gm, x = chain(500), torch.ones(1, device=device)
    fxviz_row("chain of 500 adds: fxviz", profile(gm, x, warmup=20, repeats=200))
    row("chain of 500 adds: naive Interpreter", len(gm.graph.nodes), *naive_overhead(gm, x, 100))

    for arch in ("resnet18", "resnet50"):
        gm = trace(getattr(torchvision.models, arch)(weights=None).eval().to(device))
        # on a GPU, batch 1 and 10 leave it waiting for Python; 64 keeps it busy
        for batch, repeats in ((1, 20), (10, 5), *(((64, 10),) if device.type == "cuda" else ())):
            x = torch.randn(batch, 3, 224, 224, device=device)
            df = profile(gm, x, warmup=1, repeats=repeats)
            fxviz_row(f"{arch} batch {batch}: fxviz", df)
            if batch == 1:
                row(f"{arch} batch {batch}: naive Interpreter", len(df), *naive_overhead(gm, x, repeats // 2))

    batch = 64 if device.type == "cuda" else 1  # a GPU busy with kernels, not waiting on Python
    gm = trace(torchvision.models.resnet50(weights=None).eval().to(device))
    x = torch.randn(batch, 3, 224, 224, device=device)
    runs = []
    for _ in range(2):
        start = time.perf_counter()
        runs.append(profile(gm, x, repeats=1000, budget_s=3.0).set_index("node"))
        runs[-1].attrs["wall_s"] = time.perf_counter() - start
    big = runs[0].index[(runs[0]["share"] > 1) & (runs[1]["share"] > 1)]
    change = (runs[1].loc[big, "median_us"] / runs[0].loc[big, "median_us"] - 1).abs()
    print(f"\nresnet50 batch {batch}, two profiles with budget_s=3: wall {runs[0].attrs['wall_s']:.2f} s and "
          f"{runs[1].attrs['wall_s']:.2f} s, {runs[0].attrs['repeats']} and {runs[1].attrs['repeats']} repeats")
    if len(big):
        print(f"  {len(big)} nodes above 1 % share: {(change <= 0.10).sum()} within 10 % run to run, "
              f"median change {change.median():.1%}, largest {change.max():.1%} ({change.idxmax()})")
    else:
        print("  no node above 1 % share in both profiles")


if __name__ == "__main__":
    main()

"""Does a timing comparison flag what changed, and only that, on a busy machine?

resnet18 (random weights) against itself, and against a step made by a registered
user pass that adds arithmetic to one conv (same output, more time; see ``Busier``). Each pair is
compared under three conditions: quiet, loaded (a competing CPU-bound process runs
throughout) and a load spike (the competing process starts halfway), by two methods
with the same time budget:

- interleaved: ``fxviz.compare(...).timing_by_node`` (both steps in one run, A B, B A…,
  each node judged on a bootstrap interval of its paired ratios);
- cached profiles: ``diff_timing`` of two ``fxviz.profile`` runs taken one after the
  other (the old method: a profile taken while the machine was busy stays in the cache).

Prints false positives (a node flagged slower or faster that was not changed) and
false negatives (the slowed conv not flagged slower), summed over ``--trials``, and
``runs``: the median number of rounds (interleaved) or repeats per profile (cached).
On a machine with more runnable work than CPUs, torch's intra-op thread pool stalls
at every parallel region (a node of 0.7 ms takes 40 ms); ``--threads`` (default 1,
the same for both steps and both methods) keeps those stalls out of the numbers.
Run: ``.venv/bin/python bench/compare.py``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import threading
from collections.abc import Iterator

import torch
import torchvision
from torch import nn

import fxviz
from fxviz.timing.profiling import profile
from fxviz.timing.timing_diff import diff_timing

SLOWED = "layer3_0_conv2"
CONDITIONS = ("quiet", "loaded", "load spike")
METHODS = ("interleaved", "cached profiles")


class Busier(nn.Module):
    """A conv followed by extra arithmetic on a tiny tensor that stays in L1: the same
    output, more time, and no other node's data pushed out of the cache (running the conv
    twice would evict the block's input, and the downsample conv reading it after would
    really be slower too)."""

    def __init__(self, conv: nn.Module, rounds: int = 300):
        super().__init__()
        self.conv, self.rounds = conv, rounds
        self.register_buffer("scratch", torch.eye(32))

    def forward(self, x):
        y, z = self.conv(x), self.scratch
        for _ in range(self.rounds):
            z = z @ self.scratch
        return y + 0 * z[0, 0]


@fxviz.passes.register(name="add_work", targets_nodes=True)
def add_work(gm: torch.fx.GraphModule, nodes=None):
    """Give the selected modules extra arithmetic (a user pass that makes one node slower)."""
    for node in nodes or ():
        parent, _, name = node.target.rpartition(".")
        owner = gm.get_submodule(parent)
        setattr(owner, name, Busier(getattr(owner, name)))
    return gm


@contextlib.contextmanager
def competing(start_after_s: float | None) -> Iterator[None]:
    """A CPU-bound process, started at once or after ``start_after_s`` (None: none)."""
    procs: list[subprocess.Popen] = []

    def start() -> None:
        procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))

    timer = threading.Timer(start_after_s, start) if start_after_s else None
    if start_after_s == 0:
        start()
    elif timer is not None:
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()
        for proc in procs:
            proc.kill()
            proc.wait()


def interleaved(step_a, step_b, condition: str, budget_s: float) -> dict[str, str]:
    start = {"quiet": None, "loaded": 0, "load spike": budget_s / 2}[condition]
    with competing(start):
        cmp = fxviz.compare(step_a, step_b, profile_kwargs={"budget_s": budget_s, "repeats": 10_000})
        timing = cmp.timing_by_node
    return dict(zip(timing["node"], timing["category"])), cmp.paired.rounds


def cached_profiles(step_a, step_b, condition: str, budget_s: float) -> dict[str, str]:
    kwargs = {"budget_s": budget_s / 2, "repeats": 10_000}
    with competing(0 if condition == "loaded" else None):
        first = profile(step_a.gm, step_a.example_inputs, **kwargs)
        with competing(0 if condition == "load spike" else None):
            second = profile(step_b.gm, step_b.example_inputs, **kwargs)
    diff = diff_timing(first, second, key="node")
    return dict(zip(diff["node"], diff["category"])), min(first.attrs["repeats"], second.attrs["repeats"])


def errors(categories: dict[str, str], slowed: str | None) -> tuple[int, int]:
    """(false positives, false negatives) of one comparison."""
    flagged = {n for n, c in categories.items() if c in ("increased", "decreased")}
    false_negative = int(slowed is not None and categories.get(slowed) != "increased")
    return len(flagged - {slowed}), false_negative


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--budget", type=float, default=4.0, help="seconds per comparison, both methods")
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    session = fxviz.Session(model, (torch.randn(1, 3, args.size, args.size),))
    base = session.current
    slowed = session.apply("add_work", nodes=[SLOWED])
    nodes = len(base.gm.graph.nodes)
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads on {os.cpu_count()} CPUs, "
          f"load average {load}; resnet18 1x3x{args.size}x{args.size}, {nodes} nodes, slowed: {SLOWED}")
    print(f"{args.trials} trials x {args.budget:g} s per comparison; FP: unchanged nodes flagged (of "
          f"{nodes} per identical pair, {nodes - 1} per slowed pair), FN: slowed node not flagged slower\n")
    print(f"{'condition':<12}{'method':<17}{'identical FP':>13}{'slowed FP':>11}{'slowed FN':>11}{'runs':>7}")
    for condition in CONDITIONS:
        for method, run in zip(METHODS, (interleaved, cached_profiles)):
            same_fp = slowed_fp = slowed_fn = 0
            runs = []
            for _ in range(args.trials):
                categories, rounds = run(base, base, condition, args.budget)
                same_fp += errors(categories, None)[0]
                categories, more = run(base, slowed, condition, args.budget)
                fp, fn = errors(categories, SLOWED)
                slowed_fp, slowed_fn, runs = slowed_fp + fp, slowed_fn + fn, runs + [rounds, more]
            print(f"{condition:<12}{method:<17}{same_fp:>13}{slowed_fp:>11}{slowed_fn:>8} / {args.trials}"
                  f"{int(statistics.median(runs)):>7}", flush=True)


if __name__ == "__main__":
    main()

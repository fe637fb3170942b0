"""What measuring a step again costs, now that its timed code is kept.

A step is measured more than once: its profile is retaken after a pass applied in
another cell or a preemption (``Scheduler.paused``), its A/B compare with the step
before runs after its profile, and a user re-measures. Each measurement used to make
the timed code again (its source and its compilation: seconds at
100k nodes, the part that cannot be cancelled). Per graph size this times, in one
run and interleaved, a profile and an A/B ``measure_pair`` with the timed code made
afresh (the baseline: the code dropped first) and with it kept from the measurement
before, and prints the ratio kept/afresh (median over rounds, with min-max).

Run: .venv/bin/python bench/retime.py [--sizes 1000,10000,30000] [--rounds 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402  (bench/scale.py: the synthetic graph)

import fxviz  # noqa: E402
from fxviz.timing import _clock  # noqa: E402
from fxviz.timing.profiling import profile  # noqa: E402
from fxviz.timing.timing_ab import measure_pair  # noqa: E402

SETTINGS = {"warmup": 1, "repeats": 5}  # few forwards: what is compared is making the code


def seconds(fn, *, kept: bool, gms) -> float:
    if not kept:
        for gm in gms:
            _clock._kept.pop(gm, None)
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,30000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{'nodes':>7} {'measurement':<12} {'afresh s':>9} {'kept s':>8} {'kept/afresh':>12} {'min-max':>12}")
    for size in (int(s) for s in args.sizes.split(",")):
        model, inputs, opts = scale.synthetic(size)
        gm_a, gm_b = fxviz.trace(model, inputs, **opts), fxviz.trace(model, inputs, **opts)
        jobs = {"profile": (lambda: profile(gm_a, inputs, **SETTINGS), (gm_a,)),
                "measure_pair": (lambda: measure_pair(gm_a, inputs, gm_b, inputs, warmup=1, repeats=5),
                                 (gm_a, gm_b))}
        for name, (job, gms) in jobs.items():
            job()  # warm: torch's first calls, and the code kept
            times: dict[bool, list[float]] = {True: [], False: []}
            for r in range(args.rounds):
                for kept in ((False, True) if r % 2 == 0 else (True, False)):
                    times[kept].append(seconds(job, kept=kept, gms=gms))
            ratios = [k / a for k, a in zip(times[True], times[False])]
            print(f"{size:7d} {name:<12} {statistics.median(times[False]):9.2f} {statistics.median(times[True]):8.2f}"
                  f" {statistics.median(ratios):12.2f} {min(ratios):5.2f}-{max(ratios):.2f}", flush=True)


if __name__ == "__main__":
    main()

"""What making a graph's timed forward costs, against torch making the graph's own code.

A profile's timed forward is ``gm.code`` with a tick line before each node, compiled
(fxviz/timing/_clock.py); the baseline is ``gm.recompile()`` (torch generating and compiling the
same graph's code), timed in the same run, interleaved, on bench/scale.py's synthetic
graph. Prints per size the medians over rounds and the ratio timed/recompile (min-max).

Run: .venv/bin/python bench/timed_code.py [--sizes 1000,10000,30000] [--rounds 3]
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


def timed_code_s(gm) -> float:
    _clock._kept.pop(gm, None)  # made afresh, not found kept
    start = time.perf_counter()
    _clock._timed_code(gm)
    return time.perf_counter() - start


def recompile_s(gm) -> float:
    start = time.perf_counter()
    gm.recompile()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,30000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{'nodes':>7} {'timed s':>8} {'recompile s':>12} {'timed/recompile':>16} {'min-max':>12}")
    for size in (int(s) for s in args.sizes.split(",")):
        model, inputs, opts = scale.synthetic(size)
        gm = fxviz.trace(model, inputs, **opts)
        timed_code_s(gm), recompile_s(gm)  # warm: torch's first calls
        timed, recompiled = [], []
        for r in range(args.rounds):
            for job in ((timed_code_s, recompile_s) if r % 2 == 0 else (recompile_s, timed_code_s)):
                (timed if job is timed_code_s else recompiled).append(job(gm))
        ratios = [t / c for t, c in zip(timed, recompiled)]
        print(f"{size:7d} {statistics.median(timed):8.3f} {statistics.median(recompiled):12.3f}"
              f" {statistics.median(ratios):16.2f} {min(ratios):5.2f}-{max(ratios):.2f}", flush=True)


if __name__ == "__main__":
    main()

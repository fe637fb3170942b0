"""How long the kernel freezes while an Explorer measures in the background.

A click waits for the kernel's thread, and the kernel's thread waits for the interpreter's
lock: a measuring job that holds it (a full garbage collection of the kernel's heap, a long
C call) freezes the kernel meanwhile. This opens an Explorer (profiling in the background,
as by default) on bench/scale.py's synthetic graph, then sleeps 5 ms at a time on the
kernel's thread until the background work ends, and prints per stage (checking, profiling,
ATen ops) how long it ran, how often a 5 ms sleep overran by more than 50 ms, and the
longest overrun: the longest a click made then would have waited before the kernel even
read it. The baseline, in the same run: the same sleeps with no Explorer measuring.

Run from the repository root: .venv/bin/python -P bench/freeze.py [--nodes 100000]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import scale  # noqa: E402  (bench/ is not a package)

import fxviz  # noqa: E402
from fxviz.widgets import Explorer  # noqa: E402

TICK_S, FREEZE_S = 0.005, 0.05


def overruns(until, start: float) -> list[tuple[float, float]]:
    """(seconds after ``start``, overrun in s) of each ``TICK_S`` sleep that overran by
    more than ``FREEZE_S``, until ``until()``."""
    found = []
    while not until():
        before = time.perf_counter()
        time.sleep(TICK_S)
        late = time.perf_counter() - before - TICK_S
        if late > FREEZE_S:
            found.append((before - start, late))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    small = scale.synthetic(200)
    Explorer(fxviz.Session(*small[:2], **small[2]), profile="off").close()  # imports, outside the run
    model, inputs, options = scale.synthetic(args.nodes)
    session = fxviz.Session(model, inputs, **options)
    session.current.graph  # noqa: B018  (built before the clock starts, as the first drawing does)

    idle_start = time.perf_counter()
    idle = overruns(lambda: time.perf_counter() > idle_start + 3.0, idle_start)

    stages: list[tuple[float, str, int]] = []  # (when, what, total): the scheduler's progress
    start = time.perf_counter()
    explorer = Explorer(session)
    built = time.perf_counter()
    report = explorer.profiler._progress
    explorer.profiler._progress = lambda what, done, total: (
        stages.append((time.perf_counter() - start, what, total)), report(what, done, total))
    # The worker reports (…, 0) when idle; give up after a minute.
    freezes = overruns(lambda: (stages and stages[-1][2] == 0 and stages[-1][1] == "ATen ops")
                       or time.perf_counter() - start > 60, start)
    explorer.close()

    spans = [(at, what) for at, what, total in stages if total]  # each stage's start
    ends = [at for at, _, total in stages if not total]
    print(f"{args.nodes} nodes (synthetic): the kernel's freezes (a {TICK_S * 1e3:.0f} ms sleep overrunning "
          f"by > {FREEZE_S * 1e3:.0f} ms) while the Explorer measures in the background")
    print(f"  {'stage':10} {'from':>6} {'to':>6} {'freezes':>8} {'longest':>8}")
    print(f"  {'idle':10} {'':>6} {'':>6} {len(idle):8d} {max((f for _, f in idle), default=0):7.2f}s  (baseline)")
    for (begin, what), end in zip(spans, ends):
        inside = [f for at, f in freezes if begin <= at < end]
        print(f"  {what:10} {begin:5.1f}s {end:5.1f}s {len(inside):8d} {max(inside, default=0):7.2f}s")
    print(f"  from, to: seconds after Explorer(session) began; it returned at {built - start:.1f}s "
          "(with its table rows: outside a kernel they are not sent later)")


if __name__ == "__main__":
    main()

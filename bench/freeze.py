"""How long the kernel freezes while an Explorer measures in the background.

A click waits for the kernel's thread, and the kernel's thread waits for the interpreter's
lock: a measuring job that holds it (a full garbage collection of the kernel's heap, a long
C call) freezes the kernel meanwhile. This opens an Explorer (profiling in the background,
as by default) on bench/scale.py's synthetic graph, then sleeps 5 ms at a time on the
kernel's thread until a second after the background work ends, and prints per stage
(queued, checking, profiling, ATen ops; "elsewhere": between them) how long it ran, how
often a 5 ms sleep overran by more than 50 ms, the longest overrun (the longest a click
made then would have waited before the kernel even read it) and their sum. The baseline,
in the same run: the same sleeps with no Explorer measuring.

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
from fxviz.widgets.profiling import Profiler  # noqa: E402

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
    show = Profiler._show  # hooked before the Explorer starts its worker, which reports from 0.5 s on
    Profiler._show = lambda self, what, done, total: (
        stages.append((time.perf_counter() - start, what, total)), show(self, what, done, total))
    start = time.perf_counter()
    try:
        explorer = Explorer(session)
        built = time.perf_counter()
        # Until the worker is idle after its last stage (give up after a minute), and a second
        # more: the results' callbacks run after that report.
        done: list[float] = []
        freezes = overruns(lambda: _finished(stages, done) or time.perf_counter() - start > 60, start)
        explorer.close()
    finally:
        Profiler._show = show

    spans = _spans(stages)
    print(f"{args.nodes} nodes (synthetic): the kernel's freezes (a {TICK_S * 1e3:.0f} ms sleep overrunning "
          f"by > {FREEZE_S * 1e3:.0f} ms) while the Explorer measures in the background")
    print(f"  {'stage':10} {'from':>6} {'to':>6} {'freezes':>8} {'longest':>8} {'in all':>7}")
    rows = [("idle", None, None, [f for _, f in idle])]
    rows += [(what, begin, end, [f for at, f in freezes if begin <= at < end]) for what, begin, end in spans]
    rows.append(("elsewhere", None, None, [f for at, f in freezes if not any(b <= at < e for _, b, e in spans)]))
    for what, begin, end, inside in rows:
        span = "" if begin is None else f"{begin:5.1f}s {end:5.1f}s"
        print(f"  {what:10} {span:>13} {len(inside):8d} {max(inside, default=0):7.2f}s {sum(inside):6.2f}s"
              + {"idle": "  (baseline: nothing measuring)",
                 "elsewhere": "  (between stages: the results' callbacks)"}.get(what, ""))
    print(f"  from, to: seconds after Explorer(session) began; it returned at {built - start:.1f}s (its own work,"
          " table rows included outside a kernel, is not watched: the sleeps start then)")


def _finished(stages: list[tuple[float, str, int]], done: list[float]) -> bool:
    """Whether a second has passed since the worker went idle after its ATen stage."""
    if not done and any(what == "ATen ops" for _, what, total in stages if total) and stages[-1][2] == 0:
        done.append(time.perf_counter())
    return bool(done) and time.perf_counter() - done[0] > 1.0


def _spans(stages: list[tuple[float, str, int]]) -> list[tuple[str, float, float]]:
    """(stage, from, to) from the progress reports: a stage runs from its first report
    until another stage's or the idle report (total 0)."""
    spans: list[tuple[str, float, float]] = []
    current: tuple[str, float] | None = None
    for at, what, total in stages:
        if current is not None and (not total or what != current[0]):
            spans.append((current[0], current[1], at))
            current = None
        if total and current is None:
            current = (what, at)
    return spans


if __name__ == "__main__":
    main()

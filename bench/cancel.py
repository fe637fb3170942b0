"""How long closing a scheduler (``Explorer.close()``, the end of a script) waits for a
profile in flight on a 100,000-node step.

The step's full profile is timed first (the baseline, same run); then, for delays
spread over that duration, a background Scheduler starts profiling, ``close()`` is
called after the delay, and the seconds until its worker stopped are printed with
their ratio to the full profile, and whether anything of the cancelled profile was
kept (it must not be). Where the profile was decides the wait: the timed forwards are
cancelled between forwards (well under a second), and writing the timed source stops
at its next pause point once closed, but compiling it cannot be interrupted (seconds
at 100k nodes): the bound. At exit the scheduler waits 5 s for its worker.

Run: .venv/bin/python bench/cancel.py [--nodes 100000] [--points 8]
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402  (bench/scale.py: the synthetic graph)

import fxviz  # noqa: E402
from fxviz.background.measure import Scheduler  # noqa: E402


def cancel_after(step, delay: float) -> float:
    """Seconds ``close()`` waits when called ``delay`` s into the step's profile."""
    profiling = threading.Event()
    scheduler = Scheduler("background", progress=lambda what, done, total: what == "profiling" and total
                          and profiling.set())
    scheduler.request([step])
    if not profiling.wait(120):
        raise SystemExit("the scheduler never started profiling")
    time.sleep(delay)
    start = time.perf_counter()
    scheduler.close(timeout=120)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--points", type=int, default=8, help="delays spread over the full profile")
    args = parser.parse_args()
    model, inputs, options = scale.synthetic(args.nodes)
    step = fxviz.Session(model, inputs, **options).current
    assert step.check.status == "match" and len(step.graph)  # made now: only profiling is timed below
    start = time.perf_counter()
    step.profile()
    full = time.perf_counter() - start
    step.drop_profile()
    print(f"{args.nodes} nodes: full profile {full:.2f} s (baseline)")
    print("cancelled after   close() waited   ratio to full   kept")
    for k in range(args.points):
        delay = full * k / args.points
        waited = cancel_after(step, delay)
        kept = step.measured_profile is not None
        print(f"{delay:13.2f} s {waited:14.2f} s {waited / full:15.3f}   {kept}")
        if kept:
            raise SystemExit("a cancelled profile was kept")


if __name__ == "__main__":
    main()

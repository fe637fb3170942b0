"""Apply (or undo) on a large graph while the background profiler makes its timed code.

On bench/scale.py's synthetic graph (100k nodes by default) an Explorer opens with
profiling in the background; at the moment its worker is in a given stage of making the
profile's timed code, the kernel applies "replace_op" as the apply button does (with
``--action undo``: the session has it applied already, and the undo button is clicked).
Stages: ``source`` (the timed forward's source written from the graph's own code),
``compile`` (its compilation), ``check`` (the step's numeric check, which cannot stop) and ``off``
(no profiler: the baseline). Each run is a fresh process; the
stages alternate, round after round, and each is reported as its median over the rounds
(min-max) and over the baseline's median: the seconds of the apply (wall), the kernel
thread's CPU seconds in it (what it did), its seconds ready to run but waiting for a CPU
(``queued``: other processes on a busy machine; Linux's schedstat) and the rest
(``blocked``: the thread waited, mostly for the interpreter's lock held by the worker;
the baseline's blocked seconds are its own waits). Run from the repository root:
.venv/bin/python -P bench/apply_profiling.py [--nodes 100000] [--rounds 3] [--action apply|undo]
[--stages off,source,compile,check]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

STAGES = {"off": None, "source": "_ticked", "compile": "_compiled",
          "check": "Step.check"}


def _in(thread, qualname: str) -> bool:
    frame = sys._current_frames().get(thread.ident) if thread is not None else None
    while frame is not None:
        if frame.f_code.co_qualname == qualname:
            return True
        frame = frame.f_back
    return False


def child(stage: str, nodes: int, action: str) -> dict:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import scale

    import fxviz
    from fxviz.widgets.explorer import Explorer

    torch.set_num_threads(1)
    model, inputs, opts = scale.synthetic(nodes)
    session = fxviz.Session(model, inputs, **opts)
    if action == "undo":
        session.apply("replace_op")
    explorer = Explorer(session, profile="off" if stage == "off" else "background")
    explorer.passes.select.value = "replace_op"
    start = time.perf_counter()
    if STAGES[stage]:
        worker = lambda: explorer.profiler.jobs.worker  # noqa: E731
        while not _in(worker(), STAGES[stage]):
            time.sleep(0.002)
    waited = time.perf_counter() - start
    wall, cpu, queued = time.perf_counter(), time.thread_time(), _queued()
    explorer._act(explorer._apply) if action == "apply" else explorer.undo_button.click()
    wall, cpu, queued = time.perf_counter() - wall, time.thread_time() - cpu, _queued() - queued
    assert explorer.session.index == (action == "apply"), explorer.error.value
    explorer.close()
    return {"wall": wall, "cpu": cpu, "queued": queued, "blocked": max(0.0, wall - cpu - queued), "waited": waited}


def _queued() -> float:
    """Seconds this thread has waited for a CPU while ready to run (0 where not known)."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--action", choices=("apply", "undo"), default="apply")
    parser.add_argument("--stages", default="off,source,compile", help="comma-separated: " + ",".join(STAGES))
    parser.add_argument("--child", choices=STAGES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.nodes, args.action)))
        return
    stages = ["off", *(s for s in args.stages.split(",") if s != "off")]  # the baseline, always
    runs: dict[str, list[dict]] = {stage: [] for stage in stages}
    for r in range(args.rounds):
        for stage in stages:
            out = subprocess.run([sys.executable, "-P", __file__, "--child", stage, "--nodes", str(args.nodes),
                                  "--action", args.action], capture_output=True, text=True, check=True).stdout
            runs[stage].append(json.loads(out.splitlines()[-1]))
            print(f"round {r + 1} {stage:<12} " + " ".join(f"{k} {v:.2f}" for k, v in runs[stage][-1].items()),
                  flush=True)
    keys = ("wall", "cpu", "queued", "blocked")
    base = {key: statistics.median(run[key] for run in runs["off"]) for key in keys}
    print(f"\n{args.action}, {args.nodes} nodes, {args.rounds} rounds: median (min-max) and over the baseline's median")
    for stage, done in runs.items():
        cells = []
        for key in keys:
            values = [run[key] for run in done]
            ratio = f"{statistics.median(values) / base[key]:4.2f}x" if base[key] > 0.05 else "  -  "
            cells.append(f"{key} {statistics.median(values):5.2f} s ({min(values):.2f}-{max(values):.2f}) {ratio}")
        print(f"  {stage:<12} " + "   ".join(cells))


if __name__ == "__main__":
    main()

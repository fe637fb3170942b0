"""Apply on a large graph while the background profiler makes its timed code.

On bench/scale.py's synthetic graph (100k nodes by default) an Explorer opens with
profiling in the background; at the moment its worker is in a given stage of making the
profile's timed code, the kernel applies "replace_op" as the apply button does. Stages:
``python_code`` (torch's code generator writing the timed forward), ``compile`` (its
compilation), and ``off`` (no profiler: the baseline). Each run is a fresh process; the
stages alternate, round after round, and each is reported as its median over the rounds
(min-max) and over the baseline's median: the seconds of the apply (wall), the kernel
thread's CPU seconds in it (what it did), its seconds ready to run but waiting for a CPU
(``queued``: other processes on a busy machine; Linux's schedstat) and the rest
(``blocked``: the thread waited, mostly for the interpreter's lock held by the worker;
the baseline's blocked seconds are its own waits). Run from the repository root:
.venv/bin/python -P bench/apply_profiling.py [--nodes 100000] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

STAGES = {"off": None, "python_code": "CodeGen._gen_python_code", "compile": "_TimedCode.__init__"}


def _in(thread, qualname: str) -> bool:
    frame = sys._current_frames().get(thread.ident) if thread is not None else None
    while frame is not None:
        if frame.f_code.co_qualname == qualname:
            return True
        frame = frame.f_back
    return False


def child(stage: str, nodes: int) -> dict:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import scale

    import fxviz
    from fxviz.widgets.explorer import Explorer

    torch.set_num_threads(1)
    model, inputs, opts = scale.synthetic(nodes)
    explorer = Explorer(fxviz.Session(model, inputs, **opts), profile="off" if stage == "off" else "background")
    explorer.passes.select.value = "replace_op"
    start = time.perf_counter()
    if STAGES[stage]:
        worker = lambda: explorer.profiler._worker  # noqa: E731
        while not (_in(worker(), STAGES[stage]) and not (stage == "compile" and _in(worker(), STAGES["python_code"]))):
            time.sleep(0.002)
    waited = time.perf_counter() - start
    wall, cpu, queued = time.perf_counter(), time.thread_time(), _queued()
    explorer._act(explorer._apply)
    wall, cpu, queued = time.perf_counter() - wall, time.thread_time() - cpu, _queued() - queued
    assert explorer.session.index == 1, explorer.error.value
    explorer.close()
    return {"wall": wall, "cpu": cpu, "queued": queued, "blocked": wall - cpu - queued, "waited": waited}


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
    parser.add_argument("--child", choices=STAGES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.nodes)))
        return
    runs: dict[str, list[dict]] = {stage: [] for stage in STAGES}
    for r in range(args.rounds):
        for stage in STAGES:
            out = subprocess.run([sys.executable, "-P", __file__, "--child", stage, "--nodes", str(args.nodes)],
                                 capture_output=True, text=True, check=True).stdout
            runs[stage].append(json.loads(out.splitlines()[-1]))
            print(f"round {r + 1} {stage:<12} " + " ".join(f"{k} {v:.2f}" for k, v in runs[stage][-1].items()),
                  flush=True)
    keys = ("wall", "cpu", "queued", "blocked")
    base = {key: statistics.median(run[key] for run in runs["off"]) for key in keys}
    print(f"\n{args.nodes} nodes, {args.rounds} rounds: median (min-max) and over the baseline's median")
    for stage, done in runs.items():
        cells = []
        for key in keys:
            values = [run[key] for run in done]
            ratio = f"{statistics.median(values) / base[key]:4.2f}x" if base[key] > 0.05 else "  -  "
            cells.append(f"{key} {statistics.median(values):5.2f} s ({min(values):.2f}-{max(values):.2f}) {ratio}")
        print(f"  {stage:<12} " + "   ".join(cells))


if __name__ == "__main__":
    main()

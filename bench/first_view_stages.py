"""Where the time to the first view goes, stage by stage, beside torchview's whole call.

Per model (those of ``bench/first_view.py``'s traced group), warm, one thread, medians of
``--repeats`` alternating runs: fxviz's first view (``Session`` + SVG) split into its
stages (the model's copy, the symbolic trace, the annotated run with its FLOP counts,
the networkx records, the DOT source, the layout by dot), ``explore()`` as a kernel
shows it (the Code tab filled after the cell: left out), and torchview's ``draw_graph``
+ SVG. Stages are timed by wrapping the functions named, so they add up to a little
less than the whole (what is not wrapped: glue). Read shares and ratios, not seconds:
the machine is shared (the load average is printed).

``--cold`` first prints, from fresh processes, what a kernel pays before fxviz draws anything
(``import networkx``, ``import fxviz``) beside torchview's whole first call: the cold target's floor.

Run: ``PYTHONPATH=. .venv/bin/python bench/first_view_stages.py [--model NAME] [--repeats 7] [--cold]``.
"""
from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402

import fxviz  # noqa: E402
import fxviz.widgets.explorer as explorer_module  # noqa: E402
from fxviz import _cow  # noqa: E402
from fxviz.capture import symbolic  # noqa: E402
from fxviz.annotation import graph as graph_module, shapes  # noqa: E402
from fxviz.draw import render as render_module  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from first_view import MODELS  # noqa: E402

#: (module, function name, stage) in the order a first view reaches them
STAGES = [(_cow, "skeleton", "copy the model's modules"), (torch.fx.Tracer, "trace", "symbolic trace"),
          (shapes, "annotated_run", "annotated run (shapes, FLOPs, bytes)"),
          (graph_module, "_to_networkx", "networkx records"), (render_module, "_render", "plan + DOT source"),
          (render_module, "layout_svg", "layout (dot)")]


def _timed_stages() -> dict[str, list[float]]:
    """Wrap each stage's function to note its time; returns the notes (stage -> seconds per call)."""
    times: dict[str, list[float]] = {}
    for owner, name, stage in STAGES:
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: Any, __original=original, __stage=stage, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return __original(*args, **kwargs)
            finally:
                times.setdefault(__stage, []).append(time.perf_counter() - start)
        setattr(owner, name, timed)
    symbolic.skeleton = _cow.skeleton  # the symbolic front-end holds its own name for it
    return times


#: What a fresh kernel pays before fxviz draws anything, beside torchview's whole first call (its import
#: included), each timed after torch, torchvision and the model are loaded: the cold target's floor.
COLD = {"import networkx": "import gc\ngc.disable()\nimport networkx\ngc.enable()",  # as fxviz does: see fxviz/__init__
        "import fxviz": "import fxviz",
        "torchview, whole first call": "from torchview import draw_graph\n"
                                       "draw_graph(model, input_data=[x]).visual_graph.pipe(format='svg')"}
_COLD_RUN = ("import time, torch, torchvision\ntorch.set_num_threads(1)\n"
             "model = torchvision.models.mobilenet_v3_large(weights=None).eval(); x = torch.randn(1, 3, 64, 64)\n"
             "start = time.perf_counter()\n{code}\nprint(time.perf_counter() - start)")


def cold_floor(repeats: int) -> None:
    """:data:`COLD` in fresh processes, alternating, medians (mobilenet_v3_large at 64x64)."""
    found: dict[str, list[float]] = {label: [] for label in COLD}
    for _ in range(repeats):
        for label, code in COLD.items():
            out = subprocess.run([sys.executable, "-c", _COLD_RUN.format(code=code)], capture_output=True,
                                 text=True, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
            found[label].append(float(out.stdout.split()[-1]))
    print("cold, fresh processes (mobilenet_v3_large):")
    for label, seconds in found.items():
        print(f"  {label:30} {statistics.median(seconds) * 1e3:7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="only these models")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cold", action="store_true", help="also what a fresh kernel pays before drawing")
    args = parser.parse_args()
    if args.cold:
        cold_floor(args.repeats)
    torch.set_num_threads(1)
    from torchview import draw_graph

    explorer_module.after_cell = lambda fn: None  # as in a kernel: the Code tab is filled after the cell
    times = _timed_stages()
    print(f"load average at start: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()}); warm, one thread")
    for name, (build, _) in MODELS["traced"].items():
        if args.model and name not in args.model:
            continue
        model, inputs = build()

        def first_view() -> None:
            render_module.render(fxviz.Session(model, inputs).current.graph).drawn().svg

        calls = {"first view": first_view, "explore": lambda: fxviz.explore(model, *inputs).close(),
                 "torchview": lambda: draw_graph(model, input_data=list(inputs)).visual_graph.pipe(format="svg")}
        totals: dict[str, list[float]] = {k: [] for k in calls}
        for call in calls.values():
            call()
        times.clear()
        for _ in range(args.repeats):
            for label, call in calls.items():
                time.sleep(0.1)  # what a call leaves running (the next dot starting) settles
                start = time.perf_counter()
                call()
                totals[label].append(time.perf_counter() - start)
        whole = statistics.median(totals["first view"])
        peer = statistics.median(totals["torchview"])
        print(f"\n{name}: first view {whole * 1e3:.1f} ms = {whole / peer:.2f}x torchview ({peer * 1e3:.1f} ms); "
              f"explore() {statistics.median(totals['explore']) * 1e3:.1f} ms")
        for _, _, stage in STAGES:  # each stage's time per first view (explore makes one too)
            each = sum(times.get(stage, [])) / (2 * args.repeats)
            print(f"  {stage:38} {each * 1e3:7.1f} ms  {each / whole:5.0%}")
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

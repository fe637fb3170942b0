"""Layout plans of this tree against those of another git revision (default ``main``):
identical field by field over a corpus of graphs and views (first views, reveals of
hidden nodes, boxes opened and collapsed, tight budgets and short long-edge limits that
make stubs), then the time of a plan at 100,000 nodes, both versions interleaved.

    PYTHONPATH=. python bench/plan_same.py [--rev main] [--sizes small,100k,30k] [--rounds 15]

Exits 1 if any plan differs.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torchvision

sys.path.insert(0, str(Path(__file__).parent))
import scale  # noqa: E402

import fxviz  # noqa: E402
from fxviz.draw import layout_plan as new  # noqa: E402

FIELDS = ("children", "labels", "collapsed", "opened", "members", "edges", "stubs", "shared_stubs",
          "drawn", "span", "closed", "box_count", "work")


def old_module(rev: str):
    source = subprocess.run(["git", "show", f"{rev}:fxviz/draw/layout_plan.py"], capture_output=True, text=True,
                            check=True, cwd=Path(__file__).parent.parent).stdout
    path = Path(tempfile.mkdtemp()) / "layout_plan_old.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("layout_plan_old", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


def graphs(sizes: list[str]):
    """(name, networkx graph) of the corpus, built one at a time."""
    if "small" in sizes:
        x = torch.randn(1, 3, 64, 64)
        for name in ("resnet18", "densenet121"):
            yield name, fxviz.Session(getattr(torchvision.models, name)(weights=None), (x,)).current.graph
        model = torchvision.models.densenet121(weights=None)
        yield "densenet121 (make_fx)", fxviz.Session(model, (x,), tracer="make_fx").current.graph
        model, inputs, options = scale.training_step(4)
        yield "make_fx step (4 layers)", fxviz.Session(model, inputs, **options).current.graph
    for size, make in (("100k", lambda: scale.synthetic(100_000)), ("30k", lambda: scale.training_step(192))):
        if size in sizes:
            model, inputs, options = make()
            yield f"{size} ({'synthetic' if size == '100k' else 'make_fx step'})", \
                fxviz.Session(model, inputs, **options).current.graph


def spread(items: list, k: int) -> list:
    """At most ``k`` of ``items``, evenly spread (first and last included)."""
    items = list(items)
    return items if len(items) <= k else [items[round(i * (len(items) - 1) / (k - 1))] for i in range(k)]


def views(graph, first) -> list[dict]:
    """Keyword arguments of ``plan_layout`` beyond the first view."""
    base = {"collapse": set(), "expand": [], "auto": True, "max_nodes": 250, "long_edge": 40}
    out = [{**base, "max_nodes": n, "long_edge": e} for n, e in ((60, 40), (250, 5), (1000, 40), (1000, 3))]
    tight = new.plan_layout(graph, **{**base, "max_nodes": 30})  # small graphs open whole at 250
    boxes = spread(sorted(first.collapsed or tight.collapsed), 6)
    hidden = [node for box in boxes for node in spread((first.members | tight.members)[box], 3)]
    out += [{**base, "expand": [node]} for node in hidden]
    out += [{**base, "expand": hidden[:2]}, {**base, "expand": hidden[-1:], "long_edge": 4}]
    out += [{**base, "expand": [box]} for box in boxes]
    out += [{**base, "expand": boxes[:4]}, {**base, "expand": boxes[::-1], "max_nodes": 60}]
    revealed = new.plan_layout(graph, **{**base, "expand": hidden[-1:]}) if hidden else first
    for box in spread(revealed.opened, 4) + spread(first.opened, 2):
        out += [{**base, "collapse": {box}}, {**base, "collapse": {box}, "expand": hidden[-1:]}]
    out += [{**base, "auto": False, "collapse": set(first.collapsed)}]
    if graph.number_of_nodes() <= 5000:
        out += [{**base, "auto": False}, {**base, "auto": False, "collapse": set(spread(first.opened, 3))}]
    return out


def differences(a, b) -> list[str]:
    out = [f for f in FIELDS if getattr(a, f) != getattr(b, f)]
    if len(a.unit_of) != len(b.unit_of) or dict(a.unit_of) != dict(b.unit_of):
        out.append("unit_of")
    return out


def timings(old, graph, rounds: int) -> None:
    base = {"collapse": set(), "expand": [], "auto": True, "max_nodes": 250, "long_edge": 40}
    first = new.plan_layout(graph, **base)
    box = sorted(first.collapsed)[len(first.collapsed) // 2]
    cases = {"first view": base, "reveal a hidden node": {**base, "expand": [first.members[box][-1]]},
             "expand a box": {**base, "expand": [box]}}
    for name, options in cases.items():
        seconds: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(rounds):  # interleaved: both see the same load on the machine
            for label, module in (("old", old), ("new", new)):
                start = time.perf_counter()
                module.plan_layout(graph, **options)
                seconds[label].append(time.perf_counter() - start)
        o, n = (statistics.median(seconds[k]) for k in ("old", "new"))
        print(f"  {name:22} old {o * 1e3:7.2f} ms ({min(seconds['old']) * 1e3:.2f}-{max(seconds['old']) * 1e3:.2f})"
              f"  new {n * 1e3:7.2f} ms ({min(seconds['new']) * 1e3:.2f}-{max(seconds['new']) * 1e3:.2f})"
              f"  old/new {o / n:5.1f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="main")
    parser.add_argument("--sizes", default="small,100k,30k")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    old, sizes, failed = old_module(args.rev), args.sizes.split(","), 0
    for name, graph in graphs(sizes):
        base = {"collapse": set(), "expand": [], "auto": True, "max_nodes": 250, "long_edge": 40}
        first = new.plan_layout(graph, **base)
        cases = [base, *views(graph, first)]
        bad = [(case, diff) for case in cases
               if (diff := differences(old.plan_layout(graph, **case), new.plan_layout(graph, **case)))]
        failed += len(bad)
        plans = [new.plan_layout(graph, **case) for case in cases]
        stubs, shared = sum(bool(p.stubs) for p in plans), sum(bool(p.shared_stubs) for p in plans)
        print(f"{name}: {graph.number_of_nodes()} nodes, {len(cases)} plans ({stubs} with stubs, {shared} shared): "
              + ("identical" if not bad else f"{len(bad)} DIFFER"))
        for case, diff in bad[:5]:
            print(f"  differs in {diff}: {case}")
        if graph.number_of_nodes() >= 20_000:
            timings(old, graph, args.rounds)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

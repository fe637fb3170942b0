"""What the Explorer's drawing costs at each operation on a big graph: the first view, an
expand (one box clicked), a reveal (a node hidden in a collapsed box selected), expand a
level and expand all, in that order on one drawing, as a user would. Per operation it
prints the boxes, edges and clusters laid out, the seconds of ``dot`` and whether the
drawing fell back to a coarser plan (its status line) or failed.

Baseline, measured in the same run on each graph: "collapse all" (every top-level module
one box) clicked on a drawing of its own, the cheapest drawing of that graph: what any
redraw costs (the plan, DOT, ``dot``'s start, the SVG's parse). Each operation's total
is printed as a ratio to it (``x base``), which compares across machines and loads.

Graphs: bench/scale.py's cases by name (1k, 10k, 30k, 100k), other names are timm models
(weights None, their own input size; ``--save DIR`` pickles each graph), or pickled ``fxviz.to_networkx`` graphs (``.pkl``), so that two checkouts draw
the same graph: PYTHONPATH=<checkout> python -P bench/layout_ops.py 30k.pkl 100k.pkl
"""
from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import pickle
import sys
import time
from types import SimpleNamespace

from fxviz.errors import FxvizError


class View(SimpleNamespace):
    """The parts of a GraphView that the drawing sets."""

    def hold_sync(self):
        return contextlib.nullcontext()


def one_level(collapsed: list[str], graph) -> list[str]:
    """gv_graph.js expandOneLevel: each collapsed module replaced by its direct submodules."""
    out = set()
    for _, attrs in graph.nodes(data=True):
        path = attrs.get("module_path") or ""
        for top in collapsed:
            if path.startswith(top + "."):
                out.add(f"{top}.{path[len(top) + 1:].split('.')[0]}")
    return sorted(out)


def counts(svg_source: str) -> tuple[int, int]:
    """Edges and clusters in a DOT source."""
    return svg_source.count(" -> "), svg_source.count("subgraph cluster_")


def load(name: str, save: pathlib.Path | None):
    """A pickled graph, or the step graph of bench/scale.py's case ``name``."""
    if name.endswith(".pkl"):
        return pickle.loads(pathlib.Path(name).read_bytes())
    import fxviz
    import torch

    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    from scale import CASES

    torch.set_num_threads(1)
    if name in CASES:
        fn, inputs, options = CASES[name]()
    else:
        import timm

        fn = timm.create_model(name, pretrained=False).eval()
        inputs, options = (torch.randn(1, *fn.pretrained_cfg["input_size"]),), {}
    graph = fxviz.Session(fn, inputs, **options).current.graph
    if save is not None:
        (save / f"{name}.pkl").write_bytes(pickle.dumps(graph))
    return graph


def run(path: str, save: pathlib.Path | None = None) -> None:
    from fxviz.widgets.graph_drawing import GraphDrawing

    graph = load(path, save)
    step = SimpleNamespace(graph=graph, index=0)
    view = View(collapsed=[], svg="", elements={}, legend=[], legend_mode="op", status="", selected="")
    said: list[str] = []
    drawing = GraphDrawing(view, said.append)
    layouts: list[float] = []
    import fxviz.draw.render as render_module

    real = render_module.layout_svg

    def timed_layout(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            layouts.append(time.perf_counter() - start)

    render_module.layout_svg = timed_layout

    base_view = View(collapsed=[], svg="", elements={}, legend=[], legend_mode="op", status="", selected="")
    base_drawing = GraphDrawing(base_view, said.append)
    base_drawing.draw(step, {}, "")  # not timed: the baseline is the click below
    base = [0.0]

    def op(name: str, act, on=(view, drawing)) -> None:
        shown, drawn = on
        layouts.clear()
        said.clear()
        start = time.perf_counter()
        try:
            act()
        except FxvizError as exc:
            said.append(str(exc))
        total = time.perf_counter() - start
        base[0] = base[0] or total
        boxes = sum(e["kind"] in ("node", "collapsed", "stub") for e in shown.elements.values())
        edges, clusters = counts(drawn.source)
        dots = "+".join(f"{s:.2f}" for s in layouts) or "-"
        note = (said[-1][:90] if said else shown.status.split(" · ", 2)[-1][:90])
        print(f"{os.path.basename(path):10} {name:12} {boxes:6d} {edges:6d} {clusters:5d} {dots:>16} {total:7.2f} "
              f"{total / base[0]:7.1f}  {note}", flush=True)

    def follow(collapsed, on=(view, drawing)):  # the browser sets `collapsed`, the Explorer observes it
        shown, drawn = on
        shown.collapsed = collapsed
        drawn.follow_click(collapsed, lambda reveal: drawn.draw(step, {}, "", reveal, keep_on_error=True))

    top = sorted({(attrs.get("module_path") or "").split(".")[0] for _, attrs in graph.nodes(data=True)} - {""})
    op("collapse-all", lambda: follow(top, (base_view, base_drawing)), (base_view, base_drawing))  # the baseline
    op("first", lambda: drawing.draw(step, {}, ""))
    collapsed = list(view.collapsed)
    target = max(collapsed, key=lambda p: -len(p)) if collapsed else None
    op("expand", lambda: follow([p for p in collapsed if p != target]))
    hidden = [n for n in graph if f"fx-{n}" not in view.elements]
    op("reveal", lambda: drawing.reveal(hidden[-1], lambda name: drawing.draw(step, {}, "", name)))
    level = one_level(list(view.collapsed), graph)  # the browser's work, not timed
    op("expand-level", lambda: follow(level))
    op("expand-all", lambda: follow([]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graphs", nargs="*", default=["10k"],
                        help="bench/scale.py case names, or pickled fxviz.to_networkx graphs (default: 10k)")
    parser.add_argument("--save", type=pathlib.Path, help="pickle the graphs of named cases into this folder")
    args = parser.parse_args()
    print(f"{'graph':10} {'operation':12} {'boxes':>6} {'edges':>6} {'clus':>5} {'dot s':>16} {'total s':>7} "
          f"{'x base':>7}  note")
    for path in args.graphs:
        run(path, args.save)


if __name__ == "__main__":
    main()

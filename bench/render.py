"""Trace + to_networkx + DOT + SVG time per graph, against torch's FxGraphDrawer.

Both sides start from the same traced GraphModule. FxGraphDrawer's flat layout runs in a
child process under a time limit, since on large graphs it may not finish at all.
Run: .venv/bin/python bench/render.py
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time

import torch
import torchvision

import fxviz
from fxviz.draw.render import render

BASELINE_LIMIT_S = 60.0


def _fxgraphdrawer(gm, queue):
    from torch.fx.passes.graph_drawer import FxGraphDrawer

    os.setsid()  # its own process group, so a kill also reaches the `dot` it starts

    start = time.perf_counter()
    FxGraphDrawer(gm, "g").get_dot_graph().create_svg()
    queue.put(time.perf_counter() - start)


def baseline_seconds(gm) -> float | None:
    """FxGraphDrawer's time, or None if it exceeded the limit."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_fxgraphdrawer, args=(gm, queue))
    proc.start()
    proc.join(BASELINE_LIMIT_S)
    if proc.is_alive():
        os.killpg(proc.pid, signal.SIGKILL)
        proc.join()
        return None
    return queue.get() if not queue.empty() else None


def ours(trace_model) -> tuple[float, float, int, int]:
    start = time.perf_counter()
    gm = trace_model()
    traced = time.perf_counter()
    rendering = render(fxviz.to_networkx(gm))
    rendering.svg
    done = time.perf_counter()
    return traced - start, done - traced, len(gm.graph.nodes), rendering.box_count


def training_step(model):
    """A forward+backward graph at ATen level: thousands of nodes."""
    params = list(model.train().parameters())

    def step(x):
        return torch.autograd.grad(model(x).sum(), params)

    return lambda: fxviz.trace(step, torch.randn(2, 3, 32, 32), tracer="make_fx", module=model)


def main() -> None:
    models = {name: getattr(torchvision.models, name)(weights=None) for name in ("resnet18", "resnet50", "vit_l_16")}
    cases = {name: (lambda m=m: fxviz.trace(m)) for name, m in models.items()}
    cases["resnet152 fwd+bwd (make_fx)"] = training_step(torchvision.models.resnet152(weights=None))
    print(f"{'graph':30} {'nodes':>6} {'boxes':>6} {'trace s':>8} {'draw s':>8} {'FxGraphDrawer s':>16} {'ratio':>7}")
    for name, trace_model in cases.items():
        trace_s, draw_s, nodes, boxes = ours(trace_model)
        base = baseline_seconds(trace_model())
        base_text = f"{base:.2f}" if base is not None else f">{BASELINE_LIMIT_S:.0f}"
        ratio = f"{draw_s / base:.2f}" if base is not None else f"<{draw_s / BASELINE_LIMIT_S:.2f}"
        print(f"{name:30} {nodes:6d} {boxes:6d} {trace_s:8.2f} {draw_s:8.2f} {base_text:>16} {ratio:>7}")
        sys.stdout.flush()
    print("ratio = our to_networkx+DOT+SVG time / FxGraphDrawer's DOT+SVG time on the same graph (lower is better)")


if __name__ == "__main__":
    main()

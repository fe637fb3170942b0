"""Cost per stage on graphs of 1k to 100k nodes, from capture to an interactive Explorer.

Graphs: make_fx training steps of deep stacks of small transformer layers (1k, 10k,
30k nodes), and a synthetic 100k-node model whose graph is built directly with
torch.fx's Graph API inside its capture (so that capture does not dominate: 100k
nodes of symbolic tracing would take 3x as long; ``100k-traced``, not run by default,
captures the same model with fxviz's symbolic tracer). Per graph it prints the seconds of each stage: capture,
Session (which captures again, then runs the annotated forward; it checks nothing
yet), annotate (that run again, alone), to_networkx (the step's networkx graph,
which the Session builds on first use: the first drawing pays for it), plan, DOT, layout, explore ready (the Explorer built, Python side, with
profiling off, after the step's numeric check has run: "check"), expand one cluster,
reveal a node hidden in a collapsed cluster, and search (the view's own searchNodes
over all nodes, run under node); the MB of JSON the Explorer's widgets hold for the
browser when it first shows (their synced state: table rows and node records, both
column by column, and the SVG) and the seconds the view takes to decode its node
records (gv_graph.js nodesOf, under node);
and, in a second run of the same graph under tracemalloc, the Python memory a Session
(with its graph built)
retains and its peak while it is made, over what the GraphModule alone retains.
Ratios (Session/capture, memory) are measured in the same run; the targets are
Session <= 1.3x capture, memory <= 2x, and at 100k nodes a first view in < 2 s after
capture, expand < 1 s and search < 0.1 s.
These times are the kernel's; bench/ui_scale.py times the 100k first view in the browser.
Run from the repository root: .venv/bin/python -P bench/scale.py [--sizes 1k,10k,30k,100k]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import operator
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from typing import Any

import torch
import torch.fx
from torch import nn

import fxviz
from fxviz.background._gc import gc_paused
from fxviz.errors import RenderError
from fxviz.draw.layout_plan import plan_layout
from fxviz.draw.render import render
from fxviz.annotation.shapes import annotated_run

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAYER_NODES = 156  # ATen nodes per layer of a training step (measured: 19,968 for 128 layers)


class Layer(nn.Module):
    """A small pre-norm transformer layer."""

    def __init__(self, d: int = 16):
        super().__init__()
        self.ln1, self.qkv, self.out = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        x = x + self.out(torch.softmax(q @ k.transpose(-1, -2) / 4.0, dim=-1) @ v)
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


class Stack(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.embed, self.layers, self.head = nn.Linear(8, 16), nn.Sequential(*[Layer() for _ in range(n)]), nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.layers(self.embed(x)))


def training_step(n_layers: int):
    """A make_fx training step (forward and backward) of a stack of ``n_layers``."""
    model = Stack(n_layers)
    params = list(model.parameters())

    def step(x):
        with torch.enable_grad():  # the numeric check runs the model under no_grad
            return torch.autograd.grad(model(x).sum(), params)

    return step, (torch.randn(2, 6, 8),), {"tracer": "make_fx", "module": model}


OPS = (torch.tanh, torch.sigmoid, operator.neg)


class Part(nn.Module):
    """24 element-wise ops: half of a synthetic block."""

    def forward(self, h):
        for j in range(24):
            h = OPS[j % 3](h)
        return h


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn, self.mlp = Part(), Part()

    def forward(self, x):
        for part in (self.attn, self.mlp):
            x = part(x) + x
        return x


class Synthetic(nn.Module):
    """50 nodes per block: a graph of any size in which every node is a cheap op on a tiny tensor."""

    def __init__(self, n_blocks: int):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(n_blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class Builder(torch.fx.Tracer):
    """Captures :class:`Synthetic` by building its graph directly with torch.fx's Graph API:
    the nodes symbolic tracing makes (names, module paths), without running the model's
    Python. The capture is then creating 100k nodes and the GraphModule, and the stages
    after it are not lost in a tracer's cost (``100k-traced``: fxviz's symbolic tracer)."""

    def trace(self, root, concrete_args=None):
        self.root = root
        graph = torch.fx.Graph()
        x = graph.placeholder("x")
        x.meta["module_path"] = ""

        def at(node, path):
            node.meta["module_path"] = path
            return node

        for i in range(len(root.blocks)):
            for part in ("attn", "mlp"):
                h = x
                for j in range(24):
                    h = at(graph.call_function(OPS[j % 3], (h,)), f"blocks.{i}.{part}")
                x = at(graph.call_function(operator.add, (h, x)), f"blocks.{i}")
        graph.output(x)
        return graph


def synthetic(n_nodes: int, tracer: Any = None):
    """:class:`Synthetic` with ``n_nodes`` nodes, captured by :class:`Builder` (or ``tracer``)."""
    return Synthetic(n_nodes // 50), (torch.randn(1, 4),), {"tracer": tracer or Builder()}


CASES = {
    "1k": lambda: training_step(max(1, 1000 // LAYER_NODES)),
    "10k": lambda: training_step(10000 // LAYER_NODES),
    "30k": lambda: training_step(30000 // LAYER_NODES),
    "100k": lambda: synthetic(100_000),
    "100k-traced": lambda: synthetic(100_000, tracer="symbolic"),
}


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def browser_seconds(sent: dict, query: str) -> tuple[float, float] | None:
    """Under node, the view's own code on what the kernel sends: ``nodesOf`` decoding the
    node records (after JSON parsing) and ``searchNodes`` over every node (None without node)."""
    exe = shutil.which("node")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        data = pathlib.Path(tmp) / "nodes.json"
        data.write_text(json.dumps(sent))
        script = (f"import {{ nodesOf, searchNodes }} from {json.dumps((ROOT / 'widgets/gv_graph.js').as_uri())};"
                  f"import {{ readFileSync }} from 'node:fs';"
                  f"const sent = JSON.parse(readFileSync({json.dumps(str(data))}));"
                  f"nodesOf(sent); let t = performance.now(); const nodes = nodesOf(sent);"
                  f"const decode = (performance.now() - t) / 1000;"
                  f"searchNodes(nodes, {json.dumps(query)});"
                  f"t = performance.now(); const hits = searchNodes(nodes, {json.dumps(query)});"
                  f"console.log(JSON.stringify([decode, (performance.now() - t) / 1000, hits.length]));")
        out = subprocess.run([exe, "--input-type=module", "-e", script], capture_output=True, text=True, check=True)
    decode, search, _ = json.loads(out.stdout)
    return decode, search


def measure(name: str, save_dot: pathlib.Path | None = None) -> dict[str, float]:
    from fxviz.widgets.explorer import Explorer

    fn, inputs, options = CASES[name]()
    tracer = options.pop("tracer")
    # The Session's own capture, timed inside it: make_fx alone varies 2-3x between runs
    # on a loaded machine, so the ratio compares the Session with the capture it made.
    captures: list[float] = []
    capture_module = sys.modules["fxviz.capture"]  # Session imports `capture` from it at each call
    real_capture = capture_module.capture

    def timed_capture(*args, **kwargs):
        captured, seconds = timed(real_capture, *args, **kwargs)
        captures.append(seconds)
        return captured

    capture_module.capture = timed_capture
    try:
        session, session_s = timed(fxviz.Session, fn, inputs, tracer=tracer, **options)
    finally:
        capture_module.capture = real_capture
    capture = captures[0]
    # The step's networkx graph is built on first use (the first drawing pays it): timed apart.
    _, nx_s = timed(lambda: session.current.graph)
    graph = session.current.graph
    with gc_paused():  # as the Session runs it
        _, annotate_s = timed(annotated_run, session.current.gm, session.example_inputs)
    _, plan_s = timed(plan_layout, graph, collapse=set(), expand=set(), auto=True, max_nodes=250, long_edge=40)
    rendering, render_s = timed(render, graph)  # the plan again (the box tree is cached), then the DOT
    try:
        _, layout_s = timed(lambda: rendering.svg)
    except RenderError as exc:  # a failure to report in the row, not a crash that loses the others
        print(f"{name}: {exc}", file=sys.stderr)
        layout_s = float("nan")
    if save_dot is not None:  # to look at: dot -Tpng DIR/10k.dot -o 10k.png
        (save_dot / f"{name}.dot").write_text(rendering.dot.source)
    _, check_s = timed(lambda: session.current.check)  # else the Explorer runs it inline (profile="off")
    explorer, explore_s = timed(Explorer, session, profile="off")
    collapsed = explorer.graph.collapsed
    target = max(collapsed, key=lambda p: -len(p)) if collapsed else None  # a deep one: a real expand
    _, expand_s = timed(setattr, explorer.graph, "collapsed", [p for p in collapsed if p != target]) \
        if target else (None, float("nan"))
    hidden = [n for n in graph if f"fx-{n}" not in explorer.graph.elements]
    last_hidden = hidden[-1] if hidden else None
    _, reveal_s = timed(explorer.select, last_hidden) if last_hidden else (None, float("nan"))
    revealed = last_hidden is not None and f"fx-{last_hidden}" in explorer.graph.elements
    decode_s, search_s = browser_seconds(explorer.graph.get_state(["nodes"])["nodes"], last_hidden or "output") \
        or (float("nan"), float("nan"))
    payload = sum(len(json.dumps(w.get_state(), default=str)) for w in (explorer.graph, explorer.table)) \
        - sum(len(json.dumps(w.get_state(["_esm", "_css"]))) for w in (explorer.graph, explorer.table))
    boxes = rendering.box_count
    explorer.close()
    return {"nodes": len(graph), "boxes": boxes, "capture": capture, "session": session_s, "annotate": annotate_s,
            "to_networkx": nx_s, "plan": plan_s, "render": render_s, "layout": layout_s,
            "check": check_s, "explore": explore_s, "expand": expand_s, "reveal": reveal_s, "revealed": revealed,
            "search": search_s, "decode": decode_s, "MB sent": payload / 1e6}


def memory(name: str) -> dict[str, float]:
    """Python memory (tracemalloc) a Session retains and its peak while made, over what
    the capture alone (``fxviz.trace``) retains and peaks at, each with the model and
    inputs built inside the measurement (so they count on both sides)."""
    def traced(make) -> tuple[int, int]:
        gc.collect()
        tracemalloc.start()
        try:
            fn, inputs, options = CASES[name]()
            kept = make(fn, inputs, options)
            gc.collect()
            current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        del kept
        return current, peak

    gm, gm_peak = traced(lambda fn, inputs, options: fxviz.trace(fn, inputs, **options))
    session, peak = traced(lambda fn, inputs, options: _with_graph(fxviz.Session(fn, inputs, **options)))
    return {"memory": session / gm, "peak": peak / gm_peak, "gm MB": gm / 1e6}


def _with_graph(session: fxviz.Session) -> fxviz.Session:
    """The session with its step's graph built, as the Explorer holds it."""
    assert session.current.graph is not None
    return session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1k,10k,30k,100k", help="comma-separated: " + ",".join(CASES))
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: on a loaded machine, idle OpenMP threads make each tiny op wait)")
    parser.add_argument("--save-dot", type=pathlib.Path, help="write each first view's DOT into this folder")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sizes = args.sizes.split(",")
    cols = ["nodes", "boxes", "capture", "session", "annotate", "to_networkx", "plan", "render", "layout", "check", "explore", "expand",
            "reveal", "search", "decode", "MB sent", "gm MB", "memory", "peak"]
    print(f"{'graph':11} " + " ".join(f"{c:>11}" for c in cols) + f" {'session/capture':>16} {'+graph/capture':>15}"
          f" {'µs/node':>8} {'first view':>11} {'to explorer':>12} {'load':>5}")
    for case in (training_step(1), synthetic(200)):  # one-off imports and warm-up, outside any stage
        fxviz.Session(*case[:2], **case[2])
    for name in sizes:
        gc.collect()  # each row from a heap without the rows before it (a 30k session's cycles)
        r = measure(name, args.save_dot) | memory(name)
        first_view = r["to_networkx"] + r["plan"] + r["render"] + r["layout"]
        cells = [f"{r[c]:11d}" if isinstance(r[c], int) else f"{r[c]:11.3f}" for c in cols]
        after = r["session"] - r["capture"] + r["to_networkx"]
        print(f"{name:11} " + " ".join(cells) + f" {r['session'] / r['capture']:16.2f}"
              + f" {(r['session'] + r['to_networkx']) / r['capture']:15.2f} {after / r['nodes'] * 1e6:8.1f} {first_view:11.3f}"
              + f" {r['session'] - r['capture'] + r['to_networkx'] + r['explore']:12.3f}"
              + f" {os.getloadavg()[0]:5.1f}" + ("" if r["revealed"] else "  (reveal FAILED)") + ("  (layout TIMED OUT)" if r["layout"] != r["layout"] else ""))
        sys.stdout.flush()
    print("seconds per stage; session includes its own capture; capture = the Session's own; "
          "+graph/capture = (session + to_networkx) / capture; µs/node = (session - capture + to_networkx) per node: "
          "flat across sizes when the cost after capture grows linearly; plan = the first "
          "plan (builds the box tree); render = plan again (tree cached) + DOT; first view = to_networkx + plan + "
          "render + layout (what drawing a captured graph costs); to explorer = session - capture + to_networkx + explore (from the end of capture to the Explorer drawn, Python side); explore = the whole Explorer built on the session; "
          "MB sent = the widgets' synced state as JSON; decode = the view's nodesOf on its node records (node); memory, peak = Session's retained and peak Python memory over "
          "the capture's alone (gm MB: what the GraphModule retains); load = 1-minute load average after the row")


if __name__ == "__main__":
    main()

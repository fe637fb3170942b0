"""Per-node profiling of a GraphModule: time per FX node, and the ATen ops each node ran.

:func:`profile` gives the numbers to rank nodes by (median and spread over repeats,
measured by :mod:`fxviz._clock`); :func:`profile_aten` opens a node into the operators
(and, on GPU, kernels) that ``torch.profiler`` saw it issue.
"""
from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.fx
from torch.utils._pytree import tree_leaves

from fxviz._clock import Clock, instrument
from fxviz._runtime import preserved_buffers
from fxviz.errors import FxvizError
from fxviz.graph import readable_target
from fxviz.capture import as_inputs

__all__ = ["profile", "profile_aten", "plot_profile", "attribute_events", "node_kind", "device_of"]

MIN_REPEATS = 3
NODE_LABEL = "fxviz::node::"  # record_function label that marks a node's region in a trace


def profile(
    gm: torch.fx.GraphModule,
    example_inputs: Any,
    *,
    warmup: int = 2,
    repeats: int = 20,
    budget_s: float | None = None,
    progress: bool = False,
    flops: Mapping[str, int | None] | None = None,
) -> pd.DataFrame:
    """Time every node of ``gm`` on ``example_inputs``; one row per node, in graph order.

    Each repeat runs a timed forward; every other repeat also runs a plain one, so the
    profiler's own overhead is measured under the same conditions. ``budget_s`` bounds
    the wall time: warm-up stops after a quarter of it (but runs once), and repeats
    stop when the next would not fit (but run 3 times: a forward slower than a third
    of the budget overruns it). Runs under ``torch.no_grad()``; buffers (e.g.
    BatchNorm running stats in training mode) are restored afterwards, also after
    Ctrl-C. ``flops`` maps node names to FLOPs where ``node.meta`` has none.

    Columns: ``node``, ``op``, ``target`` (readable), ``kind`` (module class, function
    or method: what the node computes), ``module_path`` (None unless traced by
    :func:`fxviz.trace`), ``median_us``, ``p25_us``, ``p75_us`` (µs over repeats),
    ``share`` (percent of the sum of medians), ``flops`` (from :func:`fxviz.annotate`,
    else NaN) and ``gflops`` (achieved GFLOP/s at the median time).

    ``df.attrs``: ``plain_forward_us`` and ``profiled_forward_us`` (medians of whole
    forwards, µs), ``overhead_per_node_us`` (median over repeats of timed minus the
    plain forward run just before it, over the node count: pairing cancels slow drift
    of a shared machine), ``device``, ``repeats`` and ``warmup`` (runs done).
    """
    _require_graph_module(gm)
    if repeats < 1 or warmup < 0:
        raise FxvizError(f"profile needs repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}.")
    inputs = as_inputs(example_inputs)
    nodes = list(gm.graph.nodes)
    device = device_of(gm, inputs)
    clock = Clock(len(nodes), device)
    measured = _measure(gm, instrument(gm, clock.tick), clock, inputs, warmup, repeats, budget_s, progress)
    counts = [(flops or {}).get(n.name, n.meta.get("flops")) for n in nodes]
    return _table(gm, nodes, counts, device, *measured)


def _measure(gm, timed, clock: Clock, inputs, warmup, repeats, budget_s, progress):
    """Warm up, then time repeats: (warm-up runs done, plain walls, timed walls, per-node times)."""
    from tqdm.auto import tqdm  # here: in a kernel it imports ipywidgets, which `import fxviz` must not

    budget = float("inf") if budget_s is None else budget_s
    started = time.perf_counter()
    plain, profiled, per_node = [], [], []
    with _quiet_run(gm), tqdm(total=warmup + repeats, desc="profile", disable=not progress, leave=False) as bar:
        warmed = 0
        while warmed < warmup and not (warmed and time.perf_counter() - started > budget / 4):
            gm(*inputs)
            timed(*inputs)
            warmed += 1
            bar.update()
        loop_start = time.perf_counter()
        for r in range(repeats):
            now = time.perf_counter()
            if r >= MIN_REPEATS and now - started + (now - loop_start) / r > budget:
                break
            if r % 2 == 0:
                plain.append(clock.wall_us(gm, inputs))
            profiled.append(clock.wall_us(timed, inputs, timed=True))
            per_node.append(clock.intervals_us())
            bar.update()
    return warmed, plain, profiled, np.array(per_node)


def _table(gm, nodes, counts, device, warmup, plain, profiled, times: np.ndarray) -> pd.DataFrame:
    p25, median, p75 = np.percentile(times, [25, 50, 75], axis=0)
    flops = np.array([np.nan if c is None else c for c in counts], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        gflops = np.where(median > 0, flops / (median * 1e3), np.nan)
    df = pd.DataFrame({
        "node": [n.name for n in nodes],
        "op": [n.op for n in nodes],
        "target": [readable_target(n, gm) for n in nodes],
        "kind": [node_kind(n, gm) for n in nodes],
        "module_path": [n.meta.get("module_path") for n in nodes],
        "median_us": median,
        "p25_us": p25,
        "p75_us": p75,
        "share": 100 * median / median.sum(),
        "flops": flops,
        "gflops": gflops,
    })
    paired = np.subtract(profiled[::2], plain)  # plain forwards ran before every other timed one
    df.attrs.update(
        plain_forward_us=float(np.median(plain)),
        profiled_forward_us=float(np.median(profiled)),
        overhead_per_node_us=float(np.median(paired)) / len(nodes),
        device=str(device),
        repeats=len(times),
        warmup=warmup,
    )
    return df


def profile_aten(
    gm: torch.fx.GraphModule, example_inputs: Any, *, warmup: int = 1, repeats: int = 1
) -> pd.DataFrame:
    """The operators each node issued, as ``torch.profiler`` recorded them: every node
    runs inside a ``record_function`` region, and each recorded event is attributed to
    the region it falls in. Numbers are per forward (averaged over ``repeats``).

    Columns as in :func:`attribute_events`; on CUDA also device time and kernel rows.
    """
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    _require_graph_module(gm)
    inputs = as_inputs(example_inputs)
    device = device_of(gm, inputs)
    on_cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if on_cuda else [])]
    runner = _LabelledInterpreter(gm)
    with torch.no_grad(), preserved_buffers(gm):
        for _ in range(warmup):
            runner.run(*inputs)
        with torch_profile(activities=activities) as prof:
            for _ in range(repeats):
                runner.run(*inputs)
            if on_cuda:
                torch.cuda.synchronize(device)
    df = attribute_events(prof.events(), [n.name for n in gm.graph.nodes], repeats=repeats, device_time=on_cuda)
    df.attrs["device"] = str(device)
    return df


class _LabelledInterpreter(torch.fx.Interpreter):
    """Runs each node inside ``record_function(NODE_LABEL + name)``."""

    def run_node(self, n: torch.fx.Node) -> Any:
        with torch.profiler.record_function(NODE_LABEL + n.name):
            return super().run_node(n)


def attribute_events(
    events: Iterable[Any], node_order: list[str], *, repeats: int = 1, device_time: bool = False
) -> pd.DataFrame:
    """Group profiler events (``FunctionEvent``-like: ``name``, ``cpu_parent``, CPU and
    device times, ``kernels``) by the FX node whose labelled region encloses them.

    Columns: ``node``, ``aten_op`` (operator, or kernel name), ``kind`` (``"op"`` or
    ``"kernel"``), ``depth`` (0 = called by the node itself, 1 = by one of those ops,
    ...), ``count``, ``self_us``, ``total_us`` (host µs; NaN for kernels); with
    ``device_time`` also ``device_self_us``, ``device_total_us``. Rows are in graph
    order, operators before kernels, then by time (``total_us``, for kernels
    ``device_total_us``) descending; events outside any node are left out.
    """
    sums: dict[tuple[str, str, str], list[float]] = {}

    def add(key, depth, host_self, host_total, dev_self, dev_total) -> None:
        row = sums.setdefault(key, [depth, 0, 0.0, 0.0, 0.0, 0.0])
        row[0] = min(row[0], depth)
        for i, value in enumerate((1, host_self, host_total, dev_self, dev_total), start=1):
            row[i] += value

    for evt in events:
        node, depth = _owner(evt)
        if node is None:
            continue
        add((node, evt.name, "op"), depth, evt.self_cpu_time_total, evt.cpu_time_total,
            evt.self_device_time_total, evt.device_time_total)
        for kernel in getattr(evt, "kernels", ()):
            add((node, kernel.name, "kernel"), depth + 1, np.nan, np.nan, kernel.duration, kernel.duration)
    columns = ["node", "aten_op", "kind", "depth", "count", "self_us", "total_us", "device_self_us", "device_total_us"]
    df = pd.DataFrame([[*key, *row] for key, row in sums.items()], columns=columns)
    df["count"] = (df["count"] // repeats).astype(int)
    df[columns[5:]] = df[columns[5:]] / repeats
    order = {name: i for i, name in enumerate(node_order)}
    df["_order"], df["_time"] = df["node"].map(order), df["total_us"].fillna(df["device_total_us"])
    df = df.sort_values(["_order", "kind", "_time"], ascending=[True, False, False], kind="stable")
    df = df.drop(columns=["_order", "_time"] + ([] if device_time else columns[7:]))
    return df.reset_index(drop=True)


def _owner(evt: Any) -> tuple[str | None, int]:
    """The node whose labelled region encloses ``evt``, and how deep inside it is."""
    if evt.name.startswith(NODE_LABEL):
        return None, 0
    depth, parent = 0, evt.cpu_parent
    while parent is not None:
        if parent.name.startswith(NODE_LABEL):
            return parent.name[len(NODE_LABEL):], depth
        depth, parent = depth + 1, parent.cpu_parent
    return None, 0


def node_kind(node: torch.fx.Node, gm: torch.fx.GraphModule) -> str:
    """What a node computes, shared by nodes of the same sort: the module class for
    call_module (``BatchNorm2d``), the function or method otherwise, else the op."""
    if node.op == "call_module":
        try:
            return type(gm.get_submodule(node.target)).__name__
        except AttributeError:
            return str(node.target)
    if node.op in ("call_function", "call_method"):
        return readable_target(node, gm)
    return node.op


def device_of(gm: torch.nn.Module, inputs: tuple) -> torch.device:
    """The device work runs on: the first tensor input's, else the first parameter's."""
    for value in tree_leaves(inputs):
        if isinstance(value, torch.Tensor):
            return value.device
    for tensor in (*gm.parameters(), *gm.buffers()):
        return tensor.device
    return torch.device("cpu")


def plot_profile(df: pd.DataFrame, top: int = 20, ax=None):
    """Horizontal bars of the ``top`` slowest nodes' median time, whiskers p25 to p75.
    Returns the matplotlib Axes."""
    import matplotlib.pyplot as plt

    rows = df.nlargest(top, "median_us").iloc[::-1]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.3 * len(rows) + 1))
    whiskers = [rows["median_us"] - rows["p25_us"], rows["p75_us"] - rows["median_us"]]
    ax.barh(rows["node"], rows["median_us"], xerr=whiskers, color="#4c78a8", ecolor="#888888")
    ax.set_xlabel("median time (µs)")
    ax.set_title(f"Slowest {len(rows)} nodes ({df.attrs.get('device', '?')}, {df.attrs.get('repeats', '?')} repeats)")
    return ax


@contextlib.contextmanager
def _quiet_run(gm: torch.nn.Module) -> Iterator[None]:
    """no_grad, buffers restored, and the garbage collector paused (a collection in the
    middle of a node would be charged to it); all undone on any exit, Ctrl-C included."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        with torch.no_grad(), preserved_buffers(gm):
            yield
    finally:
        if collecting:
            gc.enable()


def _require_graph_module(gm: Any) -> None:
    if not isinstance(gm, torch.fx.GraphModule):
        raise FxvizError(
            f"Profiling needs a torch.fx.GraphModule, got {type(gm).__name__}. "
            "Trace the model first: gm = fxviz.trace(model)."
        )

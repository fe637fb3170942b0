"""The ATen operators each FX node ran, as ``torch.profiler`` recorded them: opens a
slow node of :func:`fxviz.timing.profiling.profile` into the operators (and, on GPU, the
kernels) behind it."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.fx

from fxviz.background.jobs import runs_no_model, stop_if_cancelled
from fxviz.background._gc import gc_paused
from fxviz.capture.info import require_graph_module
from fxviz.timing._clock import device_of, instrument
from fxviz._runtime import kineto_notes_dropped, preserved_buffers
from fxviz.capture import as_inputs

__all__ = ["profile_aten", "attribute_events", "forward_device_us"]

NODE_LABEL = "fxviz::node::"  # record_function label that marks a node's region in a trace


def profile_aten(
    gm: torch.fx.GraphModule, example_inputs: Any, *, warmup: int = 1, repeats: int | None = None
) -> pd.DataFrame:
    """The operators each node issued, as ``torch.profiler`` recorded them: every node
    runs inside a ``record_function`` region, and each recorded event is attributed to
    the region it falls in. Numbers are per forward: medians over ``repeats`` forwards
    (None: :func:`auto_repeats`), as :func:`fxviz.profile`'s node times are.

    Columns as in :func:`attribute_events`; on CUDA also device time and kernel rows.
    ``df.attrs``: ``device``, ``repeats``.
    """
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    require_graph_module(gm)
    repeats = auto_repeats(len(gm.graph.nodes)) if repeats is None else repeats
    inputs = as_inputs(example_inputs)
    device = device_of(gm, inputs)
    on_cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if on_cuda else [])]
    runner = _labelled(gm)
    with torch.no_grad(), preserved_buffers(gm):
        for _ in range(warmup):
            runner(*inputs)
        with kineto_notes_dropped(), torch_profile(activities=activities) as prof:
            for _ in range(repeats):
                runner(*inputs)
            if on_cuda:
                torch.cuda.synchronize(device)
    # Parsing the trace: seconds at 100k nodes, no model run. The millions of objects it
    # makes would set off full collections of the kernel's whole heap, each freezing the
    # kernel for up to a second (6 of them at 100k nodes; the parse ran 2x longer).
    with runs_no_model(restart=False), gc_paused():
        events = prof.events()
        try:
            df = attribute_events(events, [n.name for n in gm.graph.nodes], repeats=repeats, device_time=on_cuda)
        finally:
            _free(events)
    df.attrs.update(device=str(device), repeats=repeats)
    return df


def forward_device_us(run: Any, inputs: tuple, *, repeats: int = 5) -> float:
    """Device time (µs) of the kernels one call of ``run`` launches, a mean over
    ``repeats`` calls after one warm-up: what per-node kernel times must add up to."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch.no_grad():
        run(*inputs)
        with kineto_notes_dropped(), torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(repeats):
                run(*inputs)
            torch.cuda.synchronize()
    with gc_paused():
        events = prof.events()
        total = sum(kernel.duration for evt in events for kernel in getattr(evt, "kernels", ()))
        _free(events)
    return total / repeats


#: Node runs :func:`profile_aten` parses by default: 5 forwards (enough for a median) up to
#: 20k nodes, fewer above, 1 at 100k nodes (where parsing one forward takes 8 s).
AUTO_NODE_RUNS = 100_000


def auto_repeats(nodes: int) -> int:
    """How many forwards :func:`profile_aten` profiles by default on a graph of ``nodes``."""
    return max(1, min(5, AUTO_NODE_RUNS // max(nodes, 1)))


FREE_EVERY = 10_000  # events: a few ms


def _free(events: list) -> None:
    """Free parsed events now, emptying ``events`` (the profiler's own list: it is done
    with). Parents and children refer to each other: left alone they are cycles for the
    next full collection to find (2.2 million objects, 1 s, at 100k nodes). Freed a
    slice at a time: all at once holds the interpreter for 0.2 s."""
    for evt in events:
        evt.cpu_parent, evt.cpu_children = None, []
    while events:
        del events[-FREE_EVERY:]


def _labelled(gm: torch.fx.GraphModule) -> Any:
    """``gm``'s own forward with each node inside ``record_function(NODE_LABEL + name)``
    (:func:`fxviz.timing._clock.instrument`): the code :func:`fxviz.profile` times, not an
    Interpreter's 24 µs of Python between ops. A cancelled scheduler job stops between nodes."""
    regions = [torch.profiler.record_function(NODE_LABEL + n.name) for n in gm.graph.nodes]
    last = len(regions)

    def tick(i: int) -> None:
        stop_if_cancelled()
        if i:
            regions[i - 1].__exit__(None, None, None)
        if i < last:
            regions[i].__enter__()
    return instrument(gm, tick)


def attribute_events(
    events: Iterable[Any], node_order: list[str], *, repeats: int = 1, device_time: bool = False
) -> pd.DataFrame:
    """Group profiler events (``FunctionEvent``-like: ``name``, ``cpu_parent``, CPU and
    device times, ``kernels``) by the FX node whose labelled region encloses them.

    Columns: ``node``, ``aten_op`` (operator, or kernel name), ``kind`` (``"op"`` or
    ``"kernel"``), ``depth`` (0 = called by the node itself, 1 = by one of those ops,
    ...), ``count`` (per forward), ``self_us``, ``total_us`` (host µs; NaN for kernels);
    with ``device_time`` also ``device_self_us``, ``device_total_us``. Times are medians
    over the ``repeats`` forwards (each region of a node is one forward; a forward where
    the operator did not run counts 0), as node times are: on a busy machine an op that
    splits over torch's thread pool (attention on CPU) waits, in some forwards, for a
    descheduled thread of the pool: 20 ms for an op of 20 µs, which one forward's numbers
    (the breakdown's before) showed as the op's time. Rows are in graph order, operators before
    kernels, then by time (``total_us``, for kernels ``device_total_us``) descending;
    events outside any node are left out.
    """
    rows: dict[tuple[str, str, str], list] = {}  # key -> [depth, count, 4 times per forward...]
    runs: dict[int, int] = {}  # id of a node's region event -> which forward of that node it is
    seen: dict[str, int] = {}

    def add(key, depth, run, times) -> None:
        row = rows.get(key)
        if row is None:  # host times of kernels: NaN, in every forward
            host = [np.nan, np.nan] if key[2] == "kernel" else [0.0, 0.0]
            row = rows[key] = [depth, 0] + (host + [0.0, 0.0]) * repeats
        row[0], row[1] = min(row[0], depth), row[1] + 1
        at = 2 + 4 * run
        for i, value in enumerate(times):
            row[at + i] += value

    for evt in events:
        node, depth, region = _owner(evt)
        if node is None:
            continue
        run = runs.get(id(region))
        if run is None:
            run = runs[id(region)] = seen[node] = seen.get(node, -1) + 1
        run %= repeats
        add((node, evt.name, "op"), depth, run, (evt.self_cpu_time_total, evt.cpu_time_total,
                                                  evt.self_device_time_total, evt.device_time_total))
        for kernel in getattr(evt, "kernels", ()):
            add((node, kernel.name, "kernel"), depth + 1, run, (0.0, 0.0, kernel.duration, kernel.duration))
    columns = ["node", "aten_op", "kind", "depth", "count", "self_us", "total_us", "device_self_us", "device_total_us"]
    table = np.array([row[2:] for row in rows.values()], dtype=float).reshape(len(rows), repeats, 4)
    df = pd.DataFrame([[*key, row[0], row[1] // repeats] for key, row in rows.items()], columns=columns[:5])
    df[columns[5:]] = np.median(table, axis=1) if len(rows) else np.empty((0, 4))
    order = {name: i for i, name in enumerate(node_order)}
    df["_order"], df["_time"] = df["node"].map(order), df["total_us"].fillna(df["device_total_us"])
    df = df.sort_values(["_order", "kind", "_time"], ascending=[True, False, False], kind="stable")
    df = df.drop(columns=["_order", "_time"] + ([] if device_time else columns[7:]))
    return df.reset_index(drop=True)


def _owner(evt: Any) -> tuple[str | None, int, Any]:
    """The node whose labelled region encloses ``evt``, how deep inside it is, and the
    region's event (one per forward of the node)."""
    if evt.name.startswith(NODE_LABEL):
        return None, 0, None
    depth, parent = 0, evt.cpu_parent
    while parent is not None:
        if parent.name.startswith(NODE_LABEL):
            return parent.name[len(NODE_LABEL):], depth, parent
        depth, parent = depth + 1, parent.cpu_parent
    return None, 0, None

"""The ATen operators each FX node ran, as ``torch.profiler`` recorded them: opens a
slow node of :func:`fxviz.profiling.profile` into the operators (and, on GPU, the
kernels) behind it."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.fx

from fxviz._cancel import runs_no_model, stop_if_cancelled
from fxviz._gc import gc_paused
from fxviz._runtime import fresh_containers, kineto_notes_dropped, preserved_buffers
from fxviz.profiling import device_of, require_graph_module
from fxviz.capture import as_inputs

__all__ = ["profile_aten", "attribute_events"]

NODE_LABEL = "fxviz::node::"  # record_function label that marks a node's region in a trace


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

    require_graph_module(gm)
    inputs = as_inputs(example_inputs)
    device = device_of(gm, inputs)
    on_cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if on_cuda else [])]
    runner = _LabelledInterpreter(gm)
    with torch.no_grad(), preserved_buffers(gm):
        for _ in range(warmup):
            runner.run(*inputs)
        with kineto_notes_dropped(), torch_profile(activities=activities) as prof:
            for _ in range(repeats):
                runner.run(*inputs)
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
    df.attrs["device"] = str(device)
    return df


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


class _LabelledInterpreter(torch.fx.Interpreter):
    """Runs each node inside ``record_function(NODE_LABEL + name)``; a cancelled
    scheduler job stops between nodes (a forward of 100,000 nodes here takes seconds)."""

    def run_node(self, n: torch.fx.Node) -> Any:
        stop_if_cancelled()
        with torch.profiler.record_function(NODE_LABEL + n.name):
            return super().run_node(n)

    def fetch_args_kwargs_from_env(self, n: torch.fx.Node) -> tuple[tuple, dict]:
        """As the GraphModule's code passes them: lists and dicts anew (:func:`fresh_containers`)."""
        return fresh_containers(super().fetch_args_kwargs_from_env(n))


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

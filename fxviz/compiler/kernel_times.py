"""How long each of inductor's kernels takes (fxviz.compiler.kernels maps them to nodes): the
compiled graph run under the profiler on copies of the inputs it was first called with,
each operator it runs given to its kernel; and per module, eager beside compiled.

On the CPU a kernel's time is the median of its runs (another process's work can stall
one run of a parallel kernel by milliseconds on a busy machine); on a GPU Triton kernels
are timed from the device's kernel records and the graph's own time between CUDA events.
"""
from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from typing import Any

import pandas as pd
import torch
import torch.fx

from fxviz.capture.info import graph_info
from fxviz.compiler.kernels import COLUMNS, rows

#: profiled runs per compiled graph (after one unprofiled warm-up run)
RUNS = 10


def time_rows(found: list[dict[str, Any]], lowered: Any, inputs: tuple, runs: int = RUNS) -> float:
    """Time each kernel (``time_us``: µs per run of the graph; on the CPU the median of the
    runs, one of which other work may stall) and its ``share`` of the graph's own time,
    which is returned: the median of the profiler's records of the compiled call on the
    CPU; on a GPU, its median time between CUDA events (kernels are timed from the device's
    kernel records, extern calls by the kernels they launched)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = any(isinstance(t, torch.Tensor) and t.is_cuda for t in inputs)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch.no_grad():  # as AOT runs it (no autograd graph of its own)
        lowered.compiled(_fresh(inputs))  # warm-up: the first run's one-time work is no kernel's time
        with profile(activities=activities) as prof:
            for _ in range(runs):
                lowered.compiled(_fresh(inputs))
            if cuda:
                torch.cuda.synchronize()
    events = list(prof.events())
    regions = [e for e in events if e.name.startswith("## Call CompiledFxGraph")]
    per_run = [_credit(region.cpu_children, found, cuda) for region in regions]
    spent = {key: statistics.median([run.get(key, 0.0) for run in per_run] or [0.0])
             for row in found for key in row["keys"]}
    if cuda:  # Triton kernels are launched from Python: their records are the device's own
        by_name = {row["kernel"]: row for row in found if row["kind"] != "extern"}
        for event in events:
            if event.device_type == torch.autograd.DeviceType.CUDA and event.name in by_name:
                spent[by_name[event.name]["keys"][0]] += event.device_time_total / runs
    if cuda:
        total = _event_time(lowered, inputs, runs)
    else:
        total = statistics.median([r.cpu_time_total for r in regions] or [float("nan")])
    for row in found:
        row["time_us"] = sum(spent[key] for key in row["keys"])
        row["share"] = row["time_us"] / total if total else float("nan")
    return total


def _event_time(lowered: Any, inputs: tuple, runs: int) -> float:
    """The compiled call's median time (µs) between two CUDA events: its kernels and the
    gaps between them where the device waits for the host's launches."""
    times = []
    with torch.no_grad():
        for _ in range(runs):
            fresh = _fresh(inputs)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            lowered.compiled(fresh)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000)
    return sorted(times)[len(times) // 2]


def _credit(children: Iterable[Any], found: list[dict[str, Any]], cuda: bool) -> dict[str, float]:
    """The time of each kernel call in one run of the compiled call (``children``: the
    operators it ran): a generated kernel by its name (C++ kernels are recorded as
    ``graph_<id>_<name>``; on a GPU its device records count instead), an extern call by
    its operator, in order."""
    generated = {row["kernel"]: row["keys"][0] for row in found if row["kind"] != "extern"}
    pending = sorted((key for row in found if row["kind"] == "extern" for key in row["keys"]),
                     key=lambda key: int(key.rpartition(":")[2]))
    spent: dict[str, float] = {}
    for event in children:
        name = re.sub(r"^graph_\d+_", "", event.name)
        if name in generated:
            if not cuda:
                spent[generated[name]] = spent.get(generated[name], 0.0) + event.cpu_time_total
            continue
        op = event.name.rpartition("::")[2]
        key = next((k for k in pending if op in k.rpartition(":")[0].split(".")), None)
        if key is not None:
            pending.remove(key)
            spent[key] = event.device_time_total if cuda else event.cpu_time_total
    return spent


def by_module(kernels: pd.DataFrame, eager: pd.DataFrame, eager_graph: Any, gm: torch.fx.GraphModule) -> pd.DataFrame:
    """``module, eager_us, compiled_us, ratio`` (compiled over eager): eager from ``eager``
    (a profile of ``eager_graph``'s nodes: ``node, median_us``), compiled from ``kernels``
    (rows of ``gm``'s), each kernel's time shared among the modules of the nodes it
    computes by their count (a fused kernel spans modules: its split is an estimate).
    The model's own code outside any submodule is "(model)"."""
    def named(path: Any) -> str:
        return path or "(model)"

    eager_us: dict[str, float] = {}
    for node, us in zip(eager["node"], eager["median_us"]):
        if node in eager_graph and eager_graph.nodes[node]["op"] == "call_function":
            key = named(eager_graph.nodes[node].get("module_path"))
            eager_us[key] = eager_us.get(key, 0.0) + float(us)
    modules = {n.name: named(n.meta.get("module_path")) for n in gm.graph.nodes}
    compiled_us: dict[str, float] = {}
    for row in kernels.itertuples():
        for node in row.nodes:
            compiled_us[modules[node]] = compiled_us.get(modules[node], 0.0) + row.time_us / len(row.nodes)
    names = sorted(set(eager_us) | set(compiled_us), key=lambda m: -compiled_us.get(m, 0.0))
    table = pd.DataFrame({"module": names, "eager_us": [eager_us.get(m, 0.0) for m in names],
                          "compiled_us": [compiled_us.get(m, 0.0) for m in names]})
    table["ratio"] = table["compiled_us"] / table["eager_us"].where(table["eager_us"] > 0)
    return table


def timed(gm: torch.fx.GraphModule) -> tuple[list[dict[str, Any]], float] | None:
    """The kernels of ``gm`` (an AOT graph inductor compiled, or a Session's step of it)
    timed, with the graph's own time (µs per run); measured once, then kept with what
    inductor made of it. None for a graph inductor did not compile."""
    from fxviz._torch_internals.inductor import KEY

    lowered = gm.meta.get(KEY)
    if lowered is None:
        return None
    if lowered.timed is None:
        made = rows(graph_info(gm).graph_index, lowered.part, gm, lowered)
        lowered.timed = (made, time_rows(made, lowered, gm.meta["fxviz_inputs"]))
    return lowered.timed


def table(graphs: Iterable[Any]) -> tuple[pd.DataFrame, dict[tuple[int, str], float]]:
    """The kernels of every AOT graph inductor compiled among ``graphs`` (CompiledGraph),
    timed, and each graph's own time (µs per run) by ``(index, part)``."""
    found, totals = [], {}
    for graph in graphs:
        for part in ("forward", "backward"):
            gm = graph.part(part)
            made = timed(gm) if gm is not None else None
            if made is not None:
                found += made[0]
                totals[(graph.index, part)] = made[1]
    return pd.DataFrame([{c: row[c] for c in COLUMNS} for row in found], columns=COLUMNS), totals


def _fresh(inputs: tuple) -> list:
    """The inputs for one run: a compiled graph may write into its buffers (a BatchNorm's
    running statistics), never into the ones the capture recorded. Copies keep their
    strides (the compiled code asserts them: a backward's saved views are not contiguous)."""
    return [t if isinstance(t, torch.nn.Parameter) or not isinstance(t, torch.Tensor)
            else torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t) for t in inputs]

"""Per-node profiling of a GraphModule: time per FX node, with the conditions it was
measured under.

:func:`profile` gives the numbers to rank nodes by (median and spread over repeats,
measured by :mod:`fxviz.timing._clock`); :mod:`fxviz.timing.aten_breakdown` opens a node into the
operators (and, on GPU, kernels) that ``torch.profiler`` saw it issue.
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.fx

from fxviz.background.jobs import stop_if_cancelled
from fxviz.capture.info import require_graph_module
from fxviz.timing._clock import Clock, device_of, instrument, plain
from fxviz.timing.aten_breakdown import forward_device_us, profile_aten
from fxviz.background._gc import gc_paused
from fxviz._runtime import inputs_kept, preserved_buffers
from fxviz.errors import InputError
from fxviz.annotation.graph import readable_target
from fxviz.capture import as_inputs

__all__ = ["profile", "plot_profile", "node_kind", "device_of", "conditions"]

MIN_REPEATS = 3
# A profile whose whole forwards scatter by more than this (IQR over median) was
# disturbed by other work: its per-node numbers are not to be trusted as precise.
NOISY_SPREAD = 0.10
# A GPU running kernels for less than half of the forward waits on the host: its
# per-node times are launch (Python) times more than kernel times.
LAUNCH_BOUND = 0.5


def profile(
    gm: torch.fx.GraphModule,
    example_inputs: Any,
    *,
    warmup: int = 2,
    repeats: int = 20,
    budget_s: float | None = None,
    progress: bool = False,
    flops: Mapping[str, int | None] | None = None,
    moved: Mapping[str, int | None] | None = None,
) -> pd.DataFrame:
    """Time every node of ``gm`` on ``example_inputs``; one row per node, in graph order.

    Each repeat runs a timed forward; every other repeat also runs a plain one, so the
    profiler's own overhead is measured under the same conditions. ``budget_s`` bounds
    the wall time: warm-up stops after a quarter of it (but runs once), and repeats
    stop when the next would not fit (but run 3 times: a forward slower than a third
    of the budget overruns it). Runs under ``torch.no_grad()``; buffers (e.g.
    BatchNorm running stats in training mode) are restored afterwards, also after
    Ctrl-C, and when a scheduler's job is cancelled (:class:`~fxviz.errors.Cancelled`
    between forwards, see :mod:`fxviz.background.jobs`). ``flops`` and ``moved`` map node
    names to FLOPs and bytes moved where ``node.meta`` has none.

    Columns: ``node``, ``op``, ``target`` (readable), ``kind`` (module class, function
    or method: what the node computes), ``module_path`` (None unless traced by
    :func:`fxviz.trace`), ``median_us``, ``p25_us``, ``p75_us`` (µs over repeats),
    ``share`` (percent of the sum of medians), ``flops`` (from :func:`fxviz.annotate`;
    NaN where not counted), ``gflops`` (achieved GFLOP/s at the median time),
    ``bytes`` (read and written, from :func:`fxviz.annotate`, else NaN) and ``gbps``
    (achieved GB/s: the number for memory-bound nodes). On CUDA, ``median_us`` is the
    time between CUDA events at node boundaries, and ``kernel_us`` the device time of
    the kernels the node launched (torch.profiler, 5 forwards), ``host_us`` the host time
    of its operators (launching them).

    ``df.attrs``: ``plain_forward_us`` and ``profiled_forward_us`` (medians of whole
    forwards, µs; both without ``gm``'s module hooks), ``overhead_per_node_us`` (median over repeats of timed minus the
    plain forward run just before it, over the node count: pairing cancels slow drift
    of a shared machine; never negative), ``overhead_below_resolution`` (True when a
    quarter of those pairs or more show no overhead at all: then the number says
    nothing), ``spread`` (IQR over median of the timed forwards: the profile's own
    noise), ``noisy`` (spread above 10 %, or the machine busier than its CPUs
    before or after); on CUDA ``device_busy`` (kernel time over the plain forward)
    and ``launch_bound`` (busy under half of it: node times are mostly host time),
    ``device_forward_us`` (kernel time of an uninstrumented forward) and
    ``kernel_sum_ratio`` (the nodes' ``kernel_us`` summed, over it),
    ``conditions`` (see :func:`conditions`, taken before, with
    ``load_after``), ``device``, ``repeats`` and ``warmup`` (runs done).
    """
    require_graph_module(gm)
    if repeats < 1 or warmup < 0 or (budget_s is not None and not budget_s >= 0):
        raise InputError(f"profile needs repeats >= 1, warmup >= 0 and budget_s >= 0 (or None: no bound), got "
                         f"repeats={repeats}, warmup={warmup}, budget_s={budget_s}.")
    inputs = as_inputs(example_inputs)
    nodes = list(gm.graph.nodes)
    device = device_of(gm, inputs)
    clock = Clock(len(nodes), device)
    before = conditions(device)
    measured = _measure(gm, plain(gm), instrument(gm, clock.tick), clock, inputs, warmup, repeats, budget_s, progress)
    counts = {key: [(given or {}).get(n.name, n.meta.get(key)) for n in nodes]
              for key, given in (("flops", flops), ("bytes", moved))}
    df = _table(gm, nodes, counts, device, *measured)
    if device.type == "cuda":
        _add_kernel_time(df, gm, inputs, budget_s)
    taken = {**before, "load_after": conditions(device)["load"]}
    busy = max(taken["load"], taken["load_after"]) > taken["cpu_count"]
    df.attrs.update(conditions=taken, noisy=bool(busy or df.attrs["spread"] > NOISY_SPREAD))
    return df


def _add_kernel_time(df: pd.DataFrame, gm: torch.fx.GraphModule, inputs: tuple, budget_s: float | None) -> None:
    """On CUDA, a node's time between events is its kernels' time only while the GPU
    is kept busy; a small model leaves it waiting for Python to launch the next node,
    and then the events time the host. So add what the kernels themselves took
    (``kernel_us``), what the host spent in the node's operators (``host_us``: launch
    time, shown apart), the device time of an uninstrumented forward
    (``device_forward_us``, which the kernel times add up to: ``kernel_sum_ratio``) and
    how busy the device was. Eight profiled forwards (kernels run slower in the first
    ones), two where ``budget_s`` would not fit eight."""
    fits = budget_s is None or 8 * df.attrs["profiled_forward_us"] / 1e6 < budget_s / 2
    warmup, repeats = (3, 5) if fits else (1, 1)
    ops = profile_aten(gm, inputs, warmup=warmup, repeats=repeats)
    kernels = ops[ops["kind"] == "kernel"].groupby("node")["device_total_us"].sum()
    host = ops[(ops["kind"] == "op") & (ops["depth"] == 0)].groupby("node")["total_us"].sum()
    df["kernel_us"] = df["node"].map(kernels).fillna(0.0)
    df["host_us"] = df["node"].map(host).fillna(0.0)
    whole = forward_device_us(plain(gm), inputs, repeats=repeats)
    busy = df["kernel_us"].sum() / df.attrs["plain_forward_us"] if df.attrs["plain_forward_us"] > 0 else 1.0
    df.attrs.update(device_busy=float(min(busy, 1.0)), launch_bound=bool(busy < LAUNCH_BOUND),
                    device_forward_us=whole,
                    kernel_sum_ratio=float(df["kernel_us"].sum() / whole) if whole > 0 else float("nan"))


def conditions(device: torch.device | str) -> dict[str, Any]:
    """What a measurement ran under: ``load`` (1-minute load average), ``cpu_count``,
    torch's intra-op ``threads`` and the ``device``."""
    return {"load": os.getloadavg()[0], "cpu_count": os.cpu_count() or 1,
            "threads": torch.get_num_threads(), "device": str(device)}


def _measure(gm, untimed, timed, clock: Clock, inputs, warmup, repeats, budget_s, progress):
    """Warm up, then time repeats: (warm-up runs done, plain walls, timed walls, per-node times)."""
    from tqdm.auto import tqdm  # here: in a kernel it imports ipywidgets, which `import fxviz` must not

    budget = float("inf") if budget_s is None else budget_s
    started = time.perf_counter()
    plain, profiled, per_node = [], [], []
    with quiet_run(gm, inputs), tqdm(total=warmup + repeats, desc="profile", disable=not progress, leave=False) as bar:
        warmed = 0
        while warmed < warmup and not (warmed and time.perf_counter() - started > budget / 4):
            stop_if_cancelled()
            untimed(*inputs)
            timed(*inputs)
            warmed += 1
            bar.update()
        loop_start = time.perf_counter()
        for r in range(repeats):
            now = time.perf_counter()
            if r >= MIN_REPEATS and now - started + (now - loop_start) / r > budget:
                break
            stop_if_cancelled()
            if r % 2 == 0:
                plain.append(clock.wall_us(untimed, inputs))
            profiled.append(clock.wall_us(timed, inputs, timed=True))
            per_node.append(clock.intervals_us())
            bar.update()
    return warmed, plain, profiled, np.array(per_node)


def _table(gm, nodes, counts, device, warmup, plain, profiled, times: np.ndarray) -> pd.DataFrame:
    """``counts``: per-node ``flops`` and ``bytes`` lists (None: not counted)."""
    p25, median, p75 = np.percentile(times, [25, 50, 75], axis=0)
    flops, moved = (np.array([np.nan if c is None else c for c in counts.get(key, [None] * len(nodes))], dtype=float)
                    for key in ("flops", "bytes"))
    with np.errstate(divide="ignore", invalid="ignore"):
        gflops = np.where(median > 0, flops / (median * 1e3), np.nan)
        gbps = np.where(median > 0, moved / (median * 1e3), np.nan)
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
        "bytes": moved,
        "gbps": gbps,
    })
    paired = np.subtract(profiled[::2], plain)  # plain forwards ran before every other timed one
    q25, q50 = np.percentile(paired, [25, 50])
    w25, w50, w75 = np.percentile(profiled, [25, 50, 75])
    df.attrs.update(
        plain_forward_us=float(np.median(plain)),
        profiled_forward_us=float(np.median(profiled)),
        overhead_per_node_us=max(float(q50), 0.0) / len(nodes),
        overhead_below_resolution=bool(q25 <= 0),
        spread=float((w75 - w25) / w50) if w50 > 0 else 0.0,
        device=str(device),
        repeats=len(times),
        warmup=warmup,
    )
    return df


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
def quiet_run(gm: torch.nn.Module, inputs: Any = ()) -> Iterator[None]:
    """no_grad, buffers and ``inputs`` restored (a graph may write into them), and the garbage
    collector paused (a collection in the middle of a node would be charged to it); all
    undone on any exit, Ctrl-C included."""
    with gc_paused(), torch.no_grad(), preserved_buffers(gm), inputs_kept(inputs):
        yield

"""Memory per node, from shapes alone: what each node's output takes and what is alive
after it runs, in execution order; where the peak is.

Needs only the annotated graph's shapes and dtypes (no values), so it answers for a
model on ``meta`` or under FakeTensorMode too. A value dies after its last user; a view
or an in-place op (``view``, ``transpose``, ``getitem``, ``relu_``, an in-place ReLU
module) makes no new value: it keeps its input's alive as long as it is used. Graph
inputs and weights are counted apart from the activations, as they live throughout.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np
import torch

from fxviz._runtime import fresh_inputs, preserved_buffers
from fxviz._torch_internals import tree_leaves
from fxviz.annotation.graph_memo import derived

if TYPE_CHECKING:  # imported by memory(): the drawing's colour modes read live_bytes, and pandas is slow to import
    import pandas as pd

__all__ = ["memory", "live_bytes", "step_memory", "measured_peak_bytes", "memory_change", "plot_memory", "binned",
           "COLUMNS", "VIEWS", "MAX_POINTS"]

COLUMNS = ["node", "op", "output_bytes", "live_bytes"]
#: ops whose output shares its first input's memory (torch, Tensor method and ATen names)
VIEWS = frozenset({
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose",
    "permute", "t", "expand", "expand_as", "narrow", "select", "slice", "getitem", "unbind", "split", "chunk",
    "detach", "alias", "as_strided", "movedim", "swapaxes", "swapdims", "unfold", "diagonal", "split_with_sizes",
    "_unsafe_view", "iadd", "isub", "imul", "itruediv",
})
_DTYPE_BYTES: dict[str, int] = {}
_UNITS = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1, "B"))
#: points drawn at most: past it, each point is the largest of a run of nodes (the peak stays)
MAX_POINTS = 2000


def memory(graph: nx.DiGraph, gm: torch.fx.GraphModule | None = None, inputs: tuple | None = None) -> pd.DataFrame:
    """One row per node in execution order: ``node``, ``op``, ``output_bytes`` (0 for a
    view or in-place op, and for inputs and weights) and ``live_bytes`` (activations
    alive while it runs and just after: its output and every earlier value still to be
    used, its own inputs included). ``attrs``: ``peak_bytes``, ``peak_node``,
    ``input_bytes``, ``weight_bytes`` (each weight once) and ``unknown`` (nodes whose
    output size is not known: counted as 0). ``graph``: :func:`fxviz.to_networkx` of an
    annotated graph; ``gm``: its GraphModule, which tells whether a module call works in
    place (without it, an in-place ReLU module counts as a new value). ``inputs``: its
    example inputs; on CUDA, ``attrs["measured_peak_bytes"]`` beside the estimate
    (:func:`measured_peak_bytes`; None elsewhere)."""
    names = list(graph)
    position = {name: i for i, name in enumerate(names)}
    root: dict[str, str] = {}  # node -> the node whose memory its output is
    end: dict[str, int] = {}  # memory's owner -> the last position it is used at
    own: list[int] = []
    kinds: dict[str, str] = {}  # owner -> "input", "weight" or "activation"
    weights: dict[str, int] = {}
    unknown = []
    for i, name in enumerate(names):
        record = graph.nodes[name]
        producers = sorted(graph.pred[name].items(), key=lambda item: item[1]["uses"])
        for producer, _ in producers:
            end[root[producer]] = i
        size = _bytes(record.get("shape"), record.get("dtype"))
        if size is None:
            unknown.append(name)
        for weight in record.get("weights", ()):
            weights[weight[0]] = weight[3] or 0
        if producers and record["op"] != "output" and _aliases(record, name, gm):
            root[name] = root[producers[0][0]]
            own.append(0)
            continue
        root[name], end[name] = name, i
        kinds[name] = ("weight" if record.get("weight") else "input" if record["op"] == "placeholder"
                       else "activation")
        if kinds[name] == "weight":
            weights.setdefault(str(record.get("target")), size or 0)
        own.append(0 if kinds[name] != "activation" or record["op"] == "output" else size or 0)
    change = [0] * (len(names) + 1)
    for owner, kind in kinds.items():
        if kind == "activation":
            change[position[owner]] += own[position[owner]]
            change[end[owner] + 1] -= own[position[owner]]
    live, total = [], 0
    for step in change[:-1]:
        total += step
        live.append(total)
    import pandas as pd

    frame = pd.DataFrame({"node": names, "op": [graph.nodes[n]["op"] for n in names], "output_bytes": own,
                          "live_bytes": live}, columns=COLUMNS)
    peak = max(range(len(live)), key=live.__getitem__, default=None)
    frame.attrs.update(peak_bytes=live[peak] if live else 0, peak_node=names[peak] if live else None,
                       input_bytes=sum(_own_size(graph, n) for n, k in kinds.items() if k == "input"),
                       weight_bytes=sum(weights.values()), unknown=unknown)
    if inputs is not None and gm is not None:
        frame.attrs["measured_peak_bytes"] = measured_peak_bytes(gm, inputs)
    return frame


def live_bytes(graph: nx.DiGraph) -> dict[str, int]:
    """Node -> :func:`memory`'s ``live_bytes`` (from the graph alone), once per graph
    (:mod:`fxviz.annotation.graph_memo`): the colour mode "memory"."""
    def compute(g: nx.DiGraph) -> dict[str, int]:
        frame = memory(g)
        return dict(zip(frame["node"], frame["live_bytes"]))

    return derived(graph, "live_bytes", compute)


def _own_size(graph: nx.DiGraph, name: str) -> int:
    record = graph.nodes[name]
    return _bytes(record.get("shape"), record.get("dtype")) or 0


def _aliases(record: dict[str, Any], name: str, gm: torch.fx.GraphModule | None) -> bool:
    """Whether a node's output is (part of) its first input's memory: a view, an in-place op."""
    op, target = record["op"], str(record.get("target"))
    if op == "call_module":
        return gm is not None and bool(getattr(gm.get_submodule(target.split(" ")[0]), "inplace", False))
    if op == "call_method":
        kind = target.removesuffix(" (method)")
    elif op == "call_function":
        parts = target.split(".")
        kind = parts[1] if parts[0] == "aten" and len(parts) > 2 else parts[-1]
    else:
        return False
    in_place = "'inplace': True" in str(record.get("kwargs") or "")  # F.relu(x, inplace=True); kwargs as text
    return kind in VIEWS or kind.endswith("_") and not kind.endswith("__") or in_place


def _bytes(shape: Any, dtype: Any) -> int | None:
    """Bytes of an output of ``shape`` and ``dtype`` (tuples of them for several tensors);
    None where a size is unknown or symbolic."""
    if shape is None or dtype is None:
        return None
    if isinstance(dtype, tuple):
        sizes = [_bytes(s, d) for s, d in zip(shape, dtype)]
        return None if None in sizes else sum(sizes)
    itemsize = _DTYPE_BYTES.get(dtype)
    if itemsize is None:
        kind = getattr(torch, dtype, None)
        if not isinstance(kind, torch.dtype):
            return None
        itemsize = _DTYPE_BYTES[dtype] = kind.itemsize
    try:
        return int(torch.Size(shape).numel()) * itemsize
    except (TypeError, ValueError):  # a symbolic size
        return None


def step_memory(step: Any) -> pd.DataFrame:
    """A step's :func:`memory` (``step.memory`` where it has one; else from one annotated run
    of ``step.gm`` on ``step.example_inputs``, the graph left as it was)."""
    known = getattr(step, "memory", None)
    if known is not None:
        return known
    from fxviz.capture import as_inputs  # fxviz.draw.render imports this module: these import it back
    from fxviz.annotation.graph import to_networkx
    from fxviz.annotation.shapes import annotated_run

    inputs = as_inputs(step.example_inputs)
    _, notes = annotated_run(step.gm, fresh_inputs(inputs))  # a copy: the graph may write into its inputs
    return memory(to_networkx(step.gm, notes), step.gm, inputs)


def measured_peak_bytes(gm: torch.fx.GraphModule, inputs: tuple) -> int | None:
    """On CUDA, the most bytes the caching allocator held during one forward beyond what it
    held before (``torch.cuda.max_memory_allocated``, its peak reset first; after a warm-up
    forward, so that lazy initialisation is not counted); None for a graph that does not
    run on one CUDA device. What :func:`memory`'s estimate is checked against: the same
    activations, plus kernels' workspaces and the allocator's rounding."""
    tensors = [t for t in [*tree_leaves(inputs), *gm.parameters(), *gm.buffers()] if isinstance(t, torch.Tensor)]
    devices = {t.device for t in tensors if t.device.type == "cuda"}
    if len(devices) != 1:
        return None
    device = devices.pop()
    with torch.no_grad(), preserved_buffers(gm):
        gm(*inputs)
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        output = gm(*inputs)
        torch.cuda.synchronize(device)
        del output
        return torch.cuda.max_memory_allocated(device) - before


def memory_change(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """How the peak moved between two steps' :func:`memory`: rows ``a`` and ``b`` with
    ``peak_bytes``, ``peak_node``, ``input_bytes``, ``weight_bytes`` and
    ``measured_peak_bytes`` (None off CUDA); ``attrs["ratio"]``: b's peak over a's (NaN
    when a's is 0), ``attrs["moved"]``: whether the peak is at another node."""
    import pandas as pd

    fields = ["peak_bytes", "peak_node", "input_bytes", "weight_bytes", "measured_peak_bytes"]
    frame = pd.DataFrame([[rows.attrs.get(f) for f in fields] for rows in (before, after)], index=["a", "b"],
                         columns=fields)
    peak_a, peak_b = before.attrs["peak_bytes"], after.attrs["peak_bytes"]
    frame.attrs.update(ratio=peak_b / peak_a if peak_a else math.nan,
                       moved=before.attrs["peak_node"] != after.attrs["peak_node"])
    return frame


def plot_memory(rows: Any, ax: Any = None) -> Any:
    """Bytes alive over execution order (of a step, or of its :func:`memory`), in one unit
    (B, kB, MB or GB): activations, and with the inputs and weights, which live throughout
    (dashed); the peak marked at its node (position from 1) and labelled in the text colour,
    so :func:`fxviz.present.chart.chart_svg` shows it in dark themes too. Past :data:`MAX_POINTS`
    nodes each point is the largest of a run (:func:`binned`), so the peak survives. Returns
    the matplotlib Axes (of a new Figure, without pyplot's global state, when ``ax`` is None)."""
    from fxviz.present.node_table import human_bytes

    rows = rows if hasattr(rows, "attrs") and "peak_bytes" in rows.attrs else step_memory(rows)
    if ax is None:
        from matplotlib.figure import Figure

        ax = Figure(figsize=(7, 3)).subplots()
    live = rows["live_bytes"].to_numpy(dtype=float)
    resident = rows.attrs["input_bytes"] + rows.attrs["weight_bytes"]
    top = live.max(initial=0) + resident
    scale, unit = next(((s, u) for s, u in _UNITS if top >= s), (1, "B"))
    x, y = binned(live)
    ax.fill_between(x, y / scale, step="mid", color="#60a5fa", alpha=0.4, linewidth=0)
    ax.step(x, y / scale, where="mid", color="#2563eb", linewidth=1, label="activations")
    ax.step(x, (y + resident) / scale, where="mid", color="#9ca3af", linestyle="--", linewidth=1,
            label=f"with inputs and weights ({human_bytes(resident)})")
    node = rows.attrs["peak_node"]
    if node is not None:
        at = rows["node"].tolist().index(node)
        peak = live[at] / scale
        ax.plot([at + 1], [peak], marker="o", color="#dc2626", linestyle="none")
        right = at > len(live) / 2  # the words on the side with room, above the curve
        ax.annotate(f"peak {human_bytes(live[at])} at {node}", (at + 1, peak), textcoords="offset points",
                    xytext=(0, 6), ha="right" if right else "left", va="bottom")
    ax.set_xlabel("nodes in execution order")
    ax.set_ylabel(f"bytes alive ({unit})")
    ax.set_ylim(0, top / scale * 1.25 or 1)  # room for the peak's words
    ax.margins(x=0)
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1), ncols=2, frameon=False, fontsize=8)  # above: no box to theme
    return ax


def binned(live: Any) -> tuple[Any, Any]:
    """Positions (from 1) and values to draw: each node's, or past :data:`MAX_POINTS`
    the largest of each run of nodes at the run's middle (a 30k-node chart stays small)."""
    per = -(-len(live) // MAX_POINTS)
    if per <= 1:
        return np.arange(1, len(live) + 1), live
    runs = np.pad(live, (0, -len(live) % per)).reshape(-1, per).max(axis=1)
    return np.arange(len(runs)) * per + (per + 1) / 2, runs

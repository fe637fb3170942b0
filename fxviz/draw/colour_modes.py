"""The colour modes of a drawn graph, in one table that everything reads.

One :class:`ColourMode` per entry of :data:`MODES`: its name, the words the view shows
(``label``, and ``unit`` of a heat scale's numbers), what it needs to know about the
step (``needs``: the graph alone, the step's profile, or the A/B comparison with the
previous step), how that becomes a value per node (``data``) and how the values colour
the drawn boxes (``fill``). :func:`fxviz.draw.render.render` colours with it, the Explorer
asks for the measurements it needs and the graph view's menu and legend show its
words (sent from Python with ``GraphView.color_modes``). A new mode is one entry here.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx

from fxviz.errors import InputError
from fxviz.annotation.graph_memo import derived
from fxviz.draw.layout_plan import Unit
from fxviz.checks.memory import live_bytes
from fxviz.present.node_table import human_bytes

#: node name -> value (an op kind, a number, a mark), for every node a mode knows about
NodeData = Mapping[str, Any]
#: every drawn box (a node or a collapsed module) -> the FX node names it stands for
Boxes = Mapping[Unit, list[str]]
#: fill colour per box, and the legend: [{"label", "color"}]
Fills = tuple[dict[Unit, str], list[dict[str, str]]]
#: what a mode needs: the step's graph (always known), its profile (a DataFrame of
#: fxviz.profile) or the comparison with the previous step (fxviz.compare's Comparison)
NEEDS = ("graph", "profile", "pair")

OP_COLORS = {
    "placeholder": "#c7f0d8",
    "output": "#c7f0d8",
    "get_attr": "#e5e7eb",
    "call_module": "#cfe2ff",
    "call_function": "#fde8b6",
    "call_method": "#e4d9fb",
}
MARK_COLORS = {
    "added": "#86efac",
    "removed": "#fdba74",
    "changed": "#fde68a",
    "unchanged": "#e5e7eb",
    "faster": "#93c5fd",
    "slower": "#fca5a5",
}
#: what each diff colour means, as its legend says it (marks: fxviz.diff.structure, refined by A/B timing)
MARK_MEANINGS = {
    "added": "added (not in the other step)",
    "removed": "removed (only in the other step)",
    "changed": "changed (op, weights or inputs)",
    "unchanged": "unchanged",
    "faster": "faster (timed, beyond noise)",
    "slower": "slower (timed, beyond noise)",
}
COLLAPSED_COLOR = "#f3f4f6"
NOT_COMPARED = "#9ca3af"
HEAT_STOPS = 5


@dataclass(frozen=True)
class ColourMode:
    """One way to colour a graph. ``data(source)`` turns what the mode ``needs`` (the
    graph, the profile's table or the Comparison) into a value per node;
    ``fill(boxes, data, name)`` colours the boxes and writes the legend. ``given_as``
    says what ``render``'s caller passes instead (its error message when missing);
    ``note`` is the status line while drawn (``{previous}``: the step compared with);
    ``offered(graph)``: whether a graph has anything to colour this way (None: any)."""

    name: str
    label: str
    fill: Callable[[Boxes, NodeData, str], Fills]
    data: Callable[[Any], NodeData] | None = None
    needs: str = "graph"
    unit: str = ""
    given_as: str = "values={node name: number}"
    note: str = ""
    offered: Callable[[nx.DiGraph], bool] | None = None

    def __post_init__(self) -> None:
        if self.needs not in NEEDS:
            raise InputError(f"ColourMode {self.name!r}: needs must be one of {NEEDS}, not {self.needs!r}")

    def view(self) -> dict[str, str]:
        """What the graph view shows of the mode (``GraphView.color_modes`` items)."""
        return {"name": self.name, "label": self.label, "unit": self.unit}


def by_op(boxes: Boxes, data: NodeData, name: str) -> Fills:
    """Node kinds in fixed colours; a collapsed module in its own grey. The legend names the
    kinds drawn (not get_attr while weights are listed on their ops, not drawn)."""
    fill = {u: OP_COLORS.get(data.get(ms[0], ""), "#ffffff") if u[0] == "node" else COLLAPSED_COLOR
            for u, ms in boxes.items()}
    used = {data.get(ms[0]) for u, ms in boxes.items() if u[0] == "node"}
    return fill, [{"label": op, "color": c} for op, c in OP_COLORS.items() if op in used]


def by_mark(boxes: Boxes, data: NodeData, name: str) -> Fills:
    """Diff marks (structure first, timing refining it); a collapsed module takes its
    nodes' mark when they all agree. The legend names every mark with its meaning."""
    fill = {}
    for unit, members in boxes.items():
        kinds = {data.get(m, "unchanged") for m in members}
        fill[unit] = MARK_COLORS.get(kinds.pop(), MARK_COLORS["unchanged"]) if len(kinds) == 1 else COLLAPSED_COLOR
    return fill, [{"label": MARK_MEANINGS[k], "color": c} for k, c in MARK_COLORS.items()]


def heat(boxes: Boxes, data: NodeData, name: str, number: Callable[[float], str] = "{:.3g}".format) -> Fills:
    """A heat scale of each box's total; legend labels ``"<name> <number>"`` (the view
    shows the number under a heading with the mode's unit), written by ``number``."""
    from matplotlib import colormaps

    totals = {u: sum(float(data.get(m) or 0.0) for m in ms) for u, ms in boxes.items()}
    cmap = colormaps["YlOrRd"]
    top = max((v for v in totals.values() if v == v), default=0.0) or 1.0

    def hex_at(frac: float) -> str:
        r, g, b, _ = cmap(0.05 + 0.85 * frac)
        return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"

    fill = {u: hex_at(min(1.0, max(0.0, v / top))) if v == v else hex_at(0.0) for u, v in totals.items()}
    legend = [{"label": f"{name} {number(top * i / (HEAT_STOPS - 1))}", "color": hex_at(i / (HEAT_STOPS - 1))}
              for i in range(HEAT_STOPS)]
    return fill, legend


def peak(boxes: Boxes, data: NodeData, name: str, number: Callable[[float], str] = "{:.3g}".format) -> Fills:
    """:func:`heat` of each box's largest value, not its total: bytes alive or an error
    of a collapsed module are its worst node's."""
    return heat({u: [max(ms, key=lambda m: float(data.get(m) or 0.0))] if ms else [] for u, ms in boxes.items()},
                data, name, number)


def peak_error(boxes: Boxes, data: NodeData, name: str) -> Fills:
    """:func:`peak` of errors; a box with no node compared (one the pass added) in grey,
    listed first in the legend: the scale's lightest colour would read as exact."""
    fill, legend = peak(boxes, data, name)
    for unit, members in boxes.items():
        if members and not any(m in data for m in members):
            fill[unit] = NOT_COMPARED
    return fill, [{"label": "not compared (no counterpart)", "color": NOT_COMPARED}, *legend]


def peak_bytes(boxes: Boxes, data: NodeData, name: str) -> Fills:
    """:func:`peak` of sizes in bytes, its legend in kB, MB, GB (``human_bytes``)."""
    return peak(boxes, data, name, human_bytes)


#: a colour per kernel computing several nodes (inductor fused them), in the order they run
KERNEL_COLORS = ("#60a5fa", "#f87171", "#34d399", "#fbbf24", "#a78bfa", "#f472b6", "#2dd4bf", "#fb923c",
                 "#a3e635", "#818cf8", "#e879f9", "#facc15")
ONE_NODE_KERNEL = "#dbeafe"
NO_KERNEL = "#f9fafb"


def by_kernel(boxes: Boxes, data: NodeData, name: str) -> Fills:
    """Nodes in the colour of the inductor kernel that computes them (``data``: node ->
    kernel): each fused kernel its own (cycling after a dozen), one-node kernels (an extern
    call) in one pale colour, nodes in no kernel (views, inputs) near white. A collapsed
    module takes its kernel's colour when all of its nodes run in one."""
    sizes: dict[str, int] = {}
    for kernel in data.values():
        sizes[kernel] = sizes.get(kernel, 0) + 1
    fused = [k for k in dict.fromkeys(data.values()) if sizes[k] > 1]
    colors = {k: KERNEL_COLORS[i % len(KERNEL_COLORS)] for i, k in enumerate(fused)}
    fill = {}
    for unit, members in boxes.items():
        kernels = {data.get(m) for m in members}
        kernel = kernels.pop() if len(kernels) == 1 else ""
        fill[unit] = (colors.get(kernel, ONE_NODE_KERNEL) if kernel else
                      NO_KERNEL if kernel is None or unit[0] == "node" else COLLAPSED_COLOR)
    legend = [{"label": k, "color": colors[k]} for k in fused[:len(KERNEL_COLORS)]]
    return fill, [*legend, {"label": "one-node kernel (an extern call)", "color": ONE_NODE_KERNEL},
                  {"label": "no kernel (a view or an input)", "color": NO_KERNEL}]


def relative_errors(comparison: Any) -> NodeData:
    """Node -> its relative error against the earlier step (``Comparison.numerics``' max_rel),
    nodes with nothing to compare left out."""
    rows = comparison.numerics.dropna(subset=["max_rel"])
    return dict(zip(rows["node"], rows["max_rel"]))


def node_attr(graph: nx.DiGraph, key: str) -> NodeData:
    """Node name -> attribute ``key`` of ``fxviz.to_networkx``'s graph (None left out);
    once per graph (:mod:`fxviz.annotation.graph_memo`)."""
    return derived(graph, ("attr", key), lambda g: {n: a[key] for n, a in g.nodes(data=True) if a.get(key) is not None})


def graph_attr(key: str) -> Callable[[nx.DiGraph], NodeData]:
    """Per-node data from an attribute of the graph (:func:`node_attr`)."""
    return lambda graph: node_attr(graph, key)


def profile_column(column: str) -> Callable[[Any], NodeData]:
    """Per-node data from a column of the step's profile (``fxviz.profile``'s table)."""
    return lambda table: dict(zip(table["node"], table[column]))


MODES: dict[str, ColourMode] = {m.name: m for m in (
    ColourMode("op", "op kind", by_op, graph_attr("op")),
    ColourMode("time", "time share", heat, profile_column("share"), needs="profile",
               unit="% of the step's node time", given_as="values={node name: number} (e.g. a profile's share)",
               note="time share (%)"),
    ColourMode("flops", "FLOPs", heat, graph_attr("flops"), unit="floating-point operations per forward"),
    ColourMode("diff", "diff vs previous", by_mark, lambda comparison: comparison.node_marks(), needs="pair",
               given_as="marks={node name: 'added'|'removed'|'changed'|'unchanged'|'faster'|'slower'}",
               note="diff against step {previous} (structure; timing: A/B, beyond noise)"),
    ColourMode("error", "numeric error", peak_error, relative_errors, needs="pair",
               unit="relative error, max |b − a| / max |a|",
               given_as="values={node name: relative error} (e.g. a Comparison's numerics max_rel)",
               note="relative error against step {previous}, node by node (a collapsed module: its worst)"),
    ColourMode("memory", "memory alive", peak_bytes, live_bytes, unit="bytes of activations alive as the node runs",
               note="bytes alive as each node runs (inputs and weights apart; a collapsed module: its peak)"),
    ColourMode("kernel", "inductor kernel", by_kernel, graph_attr("kernel"),
               given_as="values={node name: kernel} (a graph of fxviz.compiled(..., backend='inductor'))",
               note="the inductor kernel computing each node (fused kernels in their own colours)",
               offered=lambda graph: any("kernel" in record for _, record in graph.nodes(data=True))),
)}


def mode(name: str | None, *, ad_hoc: bool = False) -> ColourMode:
    """The mode called ``name`` (None: "op"). ``ad_hoc``: an unknown name is a heat
    scale of values the caller gives (``render(color_by="memory", values=...)``)."""
    found = MODES.get(name or "op")
    if found is not None:
        return found
    if ad_hoc:
        return ColourMode(str(name), str(name), heat)
    raise InputError(f"No colour mode {name!r}; the modes are: {', '.join(MODES)}.")


def views(graph: nx.DiGraph | None = None) -> list[dict[str, str]]:
    """The modes as the graph view lists them, in table order: those ``graph`` has
    something to colour by (every mode when None)."""
    return [m.view() for m in MODES.values() if graph is None or m.offered is None or m.offered(graph)]


def fills(graph: nx.DiGraph, boxes: Boxes, color_by: str | None, given: NodeData | None) -> Fills:
    """Colour ``boxes`` in mode ``color_by`` with the caller's per-node data ``given``, or
    (for a mode that needs only the graph) the graph's own."""
    chosen = mode(color_by, ad_hoc=given is not None)
    if given is None and chosen.needs == "graph" and chosen.data is not None:
        given = chosen.data(graph)
    if given is None:
        raise InputError(f"color_by={chosen.name!r} needs {chosen.given_as}")
    return chosen.fill(boxes, given, chosen.name)

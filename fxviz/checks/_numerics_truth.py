"""Per-node numerics judged as the check judges outputs: a node that differs from its
counterpart beyond float32's tolerance only by float32's own rounding is not a divergence.

A step that sums in another order (``run_decompositions``) can differ from the step before
at a cancelling node as much as that step differs from the truth; the check then matches
through a float64 run (:mod:`fxviz.checks.truth`), and the first-divergence search must not
point at that node. So the nodes float32 calls diverged (only those: the float64 run is paid
only where float32 says "differ") are run again: step a's, in float32 and in float64
(:func:`~fxviz.checks.truth.float64_outputs`), step b's in float32, and each is judged by
:func:`~fxviz.checks.truth.within_own_error`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch.fx

from fxviz._torch_internals import tree_map_only
from fxviz.capture import as_inputs
from fxviz.checks._numerics_match import gradient_items
from fxviz.checks.check import run_outputs
from fxviz.checks.truth import float64_outputs, within_own_error

#: Nodes judged per run: 16, then four times as many each run (values kept until it ends),
#: in graph order until one holds a node that is no rounding (the first divergence: near the
#: inputs it costs a few nodes' runs), :data:`MOST` in all (each run goes up to its last
#: node, three times: a's in float32 and float64, b's): past them, float32's verdict stands.
FIRST, MOST = 16, 1024
#: Elements a run keeps at most (by the nodes' recorded shapes; at least one node a run):
#: a's in float32 and float64 and b's, 0.5 GB.
ELEMENTS = 1 << 25


class _Probe(torch.nn.Module):
    """``gm`` run up to the last node in ``wanted`` (nodes, or an output node's argument
    structure), returning their values, each cloned as its node gives it (a later in-place
    write left out): a divergence near the inputs costs a few nodes' runs, not the graph's."""

    def __init__(self, gm: torch.fx.GraphModule, wanted: Sequence[Any]):
        super().__init__()
        nodes = {n for w in wanted for n in _nodes(w)}
        self.gm, self.prefix, copied = gm, torch.fx.Graph(), {}
        for node in gm.graph.nodes:
            if not nodes:
                break
            copied[node] = self.prefix.node_copy(node, copied.__getitem__)
            nodes.discard(node)
        self.prefix.output(None)
        self.wanted = [torch.fx.map_arg(w, copied.__getitem__) for w in wanted]

    def forward(self, *inputs: Any) -> list[Any]:
        seen: dict[torch.fx.Node, Any] = {}
        nodes = {n for w in self.wanted for n in _nodes(w)}

        class Recorder(torch.fx.Interpreter):
            def run_node(self, node: torch.fx.Node) -> Any:
                value = super().run_node(node)
                if node in nodes:
                    seen[node] = tree_map_only(torch.Tensor, torch.Tensor.clone, value)
                return value

        flat = self.gm.graph.process_inputs(*inputs)
        Recorder(self.gm, garbage_collect_values=True, graph=self.prefix).run(*flat, enable_io_processing=False)
        return [torch.fx.map_arg(w, seen.__getitem__) if not isinstance(w, torch.fx.Node) else seen[w]
                for w in self.wanted]


def _nodes(value: Any) -> list[torch.fx.Node]:
    found: list[torch.fx.Node] = []
    torch.fx.map_arg(value, found.append)
    return found


def _value(node: torch.fx.Node) -> Any:
    """What a node's numerics row compares: an output node's argument, else the node."""
    return node.graph.process_outputs(node.args[0]) if node.op == "output" else node


def judge_rounding(step_a: Any, step_b: Any, rows: pd.DataFrame) -> None:
    """``rows`` (:func:`fxviz.checks.numerics.numerics`), in place, with ``rounding`` True and
    ``diverged`` False where a node (and, in ``attrs["gradients"]``, a gradient) beyond
    float32's tolerance is within float32's own error against float64. A pair of steps that
    cannot be run again so (no float64 kernel, another discrete decision in float64) keeps
    float32's verdict."""
    gradients = rows.attrs.get("gradients")
    nodes_a = {n.name: n for n in step_a.gm.graph.nodes}
    nodes_b = {n.name: n for n in step_b.gm.graph.nodes}
    pairs = [(row, nodes_a[cp], nodes_b[name]) for row, name, cp in
             zip(rows.index[rows["diverged"]], rows.loc[rows["diverged"], "node"], rows.loc[rows["diverged"], "counterpart"])
             if cp in nodes_a and name in nodes_b]
    start, size = 0, FIRST
    while start < min(len(pairs), MOST):
        batch = _batch(pairs[start:min(start + size, MOST)])
        rounding = _judged(step_a, step_b, [(a, b) for _, a, b in batch])
        if rounding is None:
            break
        _mark(rows, [row for row, _, _ in batch], rounding)
        if not all(rounding):
            break
        start, size = start + len(batch), size * 4
    if gradients is not None and gradients["diverged"].any():
        _judge_gradients(step_a, step_b, gradients)


def _batch(pairs: list[tuple]) -> list[tuple]:
    """The first of ``pairs`` whose values come to :data:`ELEMENTS` at most (one at least)."""
    total = 0
    for k, (_, node, _) in enumerate(pairs):
        total += _elements(node)
        if total > ELEMENTS and k:
            return pairs[:k]
    return pairs


def _elements(node: torch.fx.Node) -> int:
    """How many elements ``node`` gives, by its recorded shapes (1 where none is known)."""
    meta = node.meta.get("val", node.meta.get("tensor_meta"))
    leaves = [meta] if hasattr(meta, "shape") else meta if isinstance(meta, (list, tuple)) else []
    sizes = [math.prod(leaf.shape) for leaf in leaves if hasattr(leaf, "shape")]
    return max(1, sum(size for size in sizes if isinstance(size, int)))


def _judge_gradients(step_a: Any, step_b: Any, gradients: pd.DataFrame) -> None:
    """:func:`judge_rounding` of a training step's diverged gradients (in place)."""
    at_a = {(path, key): node for path, key, node in gradient_items(step_a.gm)}
    at_b = {node.name: ((path, key), node) for path, key, node in gradient_items(step_b.gm)}
    picked = [(row, at_a[at_b[name][0]], at_b[name][1]) for row, name in gradients.loc[gradients["diverged"], "node"].items()
              if name in at_b and at_b[name][0] in at_a]
    rounding = _judged(step_a, step_b, [(a, b) for _, a, b in picked]) if picked else None
    if rounding is not None:
        _mark(gradients, [row for row, _, _ in picked], rounding)


def _mark(rows: pd.DataFrame, index: list[Any], rounding: list[bool]) -> None:
    """Rows ``index`` of ``rows`` (all diverged in float32) marked: rounding, or diverged."""
    rows.loc[index, "rounding"] = rounding
    rows.loc[index, "diverged"] = [not own for own in rounding]


def _judged(step_a: Any, step_b: Any, pairs: list[tuple[torch.fx.Node, torch.fx.Node]]) -> list[bool] | None:
    """For each (a's node, b's node): whether b's value is float32's rounding of a's; None
    when a's graph gives other values run again, or cannot run in float64."""
    inputs_a, inputs_b = [as_inputs(step_a.example_inputs)], [as_inputs(step_b.example_inputs)]
    probe_a = _Probe(step_a.gm, [_value(a) for a, _ in pairs])
    try:
        runs = float64_outputs(probe_a, inputs_a)
        actual = run_outputs(_Probe(step_b.gm, [_value(b) for _, b in pairs]), inputs_b)[0]
    except Exception:  # a graph that cannot run in float64 (a float32-only kernel): float32's verdict stands
        return None
    if runs is None:
        return None
    expected, wide = runs[0][0], runs[1][0]
    return [within_own_error(e, b, t) for e, b, t in zip(expected, actual, wide)]

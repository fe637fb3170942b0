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

from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch.fx
from fxviz._torch_internals import tree_map_only

from fxviz.capture import as_inputs
from fxviz.checks._numerics_match import gradient_items
from fxviz.checks.check import run_outputs
from fxviz.checks.truth import float64_outputs, within_own_error

#: Nodes judged per run: their values are kept until the run ends (memory bounded); batches
#: run in graph order until one holds a node that is no rounding (the first divergence).
BATCH = 256


class _Probe(torch.nn.Module):
    """``gm`` run as it is, returning the values of ``wanted`` (nodes, or an output node's
    argument structure), each cloned as its node gives it (a later in-place write left out)."""

    def __init__(self, gm: torch.fx.GraphModule, wanted: Sequence[Any]):
        super().__init__()
        self.gm, self.wanted = gm, list(wanted)

    def forward(self, *inputs: Any) -> list[Any]:
        seen: dict[torch.fx.Node, Any] = {}
        nodes = {n for w in self.wanted for n in _nodes(w)}

        class Recorder(torch.fx.Interpreter):
            def run_node(self, node: torch.fx.Node) -> Any:
                value = super().run_node(node)
                if node in nodes:
                    seen[node] = tree_map_only(torch.Tensor, torch.Tensor.clone, value)
                return value

        Recorder(self.gm, garbage_collect_values=True).run(*inputs)
        return [torch.fx.map_arg(w, seen.__getitem__) if not isinstance(w, torch.fx.Node) else seen[w]
                for w in self.wanted]


def _nodes(value: Any) -> list[torch.fx.Node]:
    found: list[torch.fx.Node] = []
    torch.fx.map_arg(value, found.append)
    return found


def _value(node: torch.fx.Node) -> Any:
    """What a node's numerics row compares: an output node's argument, else the node."""
    return node.args[0] if node.op == "output" else node


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
    for start in range(0, len(pairs), BATCH):
        rounding = _judged(step_a, step_b, [(a, b) for _, a, b in pairs[start:start + BATCH]])
        if rounding is None:
            break
        for (row, _, _), own in zip(pairs[start:start + BATCH], rounding):
            rows.loc[row, ["rounding", "diverged"]] = [own, not own]
        if not all(rounding):
            break
    if gradients is not None and gradients["diverged"].any():
        _judge_gradients(step_a, step_b, gradients)


def _judge_gradients(step_a: Any, step_b: Any, gradients: pd.DataFrame) -> None:
    """:func:`judge_rounding` of a training step's diverged gradients (in place)."""
    at_a = {(path, key): node for path, key, node in gradient_items(step_a.gm)}
    at_b = {node.name: ((path, key), node) for path, key, node in gradient_items(step_b.gm)}
    picked = [(row, at_a[at_b[name][0]], at_b[name][1]) for row, name in gradients.loc[gradients["diverged"], "node"].items()
              if name in at_b and at_b[name][0] in at_a]
    rounding = _judged(step_a, step_b, [(a, b) for _, a, b in picked]) if picked else None
    for (row, _, _), own in zip(picked, rounding or ()):
        gradients.loc[row, ["rounding", "diverged"]] = [own, not own]


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

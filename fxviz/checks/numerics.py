"""Where a step's numbers start to move: each node of the later step against the value it
stands for in the earlier step (:func:`stands_for`), compared as the values are produced.

Both graphs run node by node in lockstep on their example inputs: step a only as far as
the next node of step b needs, each of a's values kept until neither a's own later nodes
nor b's comparisons need it, so the two runs hold about two forwards' live values, never
every activation. A node's error is *propagated* (``max_rel``: its value against its
counterpart's, error carried in included) and *introduced* (a shadow run, as torch's
numeric suite's: the node fed step a's values of its inputs, against the same
counterpart), where a pass's error starts. A node that is a's own op on a's own inputs
(unchanged, its inputs standing for a's) adds none: it is not run twice. Small values
are compared in batches (:mod:`fxviz.checks._numerics_stats`), within a budget.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.fx

from fxviz.background._gc import gc_paused
from fxviz.annotation._node_runner import NodeRunner
from fxviz.checks._numerics_match import follow, gradient_items, parameter_of, stands_for
from fxviz.checks._numerics_truth import judge_rounding
from fxviz.checks._numerics_stats import BATCH, PENDING, SMALL, Stats, results
from fxviz._runtime import fresh_inputs, preserved_buffers
from fxviz.capture import as_inputs
from fxviz.checks.check import tf32_enabled
from fxviz.diff.structure import structure as structure_of

__all__ = ["numerics", "first_divergence", "first_gradient_divergence", "stands_for", "COLUMNS", "GRADIENT_COLUMNS"]

COLUMNS = ["node", "counterpart", "max_abs", "max_rel", "sqnr_db", "cosine", "introduced", "diverged", "rounding"]
GRADIENT_COLUMNS = ["parameter", "node", "max_abs", "max_rel", "sqnr_db", "cosine", "diverged", "rounding"]


def numerics(step_a: Any, step_b: Any, structure: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per node of ``step_b`` (graph order): ``node``, ``counterpart`` (the node
    of ``step_a`` it stands for, "" for none), ``max_abs`` (max |b - a|), ``max_rel``
    (``max_abs`` over max |a|), ``sqnr_db`` (10 log10 of a's energy over the error's),
    ``cosine``, ``introduced`` (``max_rel`` of the node run on a's inputs: the error it
    adds itself; 0 for a node that is a's own op on a's own inputs) and ``diverged``
    (``max_rel`` beyond the step check's tolerance for the dtype,
    :func:`fxviz.checks.check.tolerance`, and not ``rounding``: within float32's own error
    against a float64 run of step a, as the check judges outputs,
    :mod:`fxviz.checks._numerics_truth`). NaN where there is nothing to compare (no
    counterpart, no tensor, other shapes). ``structure``: :func:`fxviz.diff.structure.structure`
    of the two graphs, when known. Neither model is changed (buffers restored).
    A training step's gradients (outputs :func:`fxviz.capture.backward.gradient_outputs`
    finds): ``attrs["gradients"]``, one row per gradient (:data:`GRADIENT_COLUMNS`), named
    by its parameter, in the order b computes them; empty for a forward."""
    gm_a, gm_b = step_a.gm, step_b.gm
    structure = structure_of(gm_a, gm_b) if structure is None else structure
    same = structure["mark"] == "unchanged"
    unchanged = dict(zip(structure.loc[same, "node"], structure.loc[same, "node_a"]))  # b's node -> a's, the same op
    with gc_paused():  # a plan entry per node: collections meanwhile would rescan them all
        runners = (NodeRunner(gm_a, fresh_inputs(as_inputs(step_a.example_inputs))),  # each its own copy: a node
                   NodeRunner(gm_b, fresh_inputs(as_inputs(step_b.example_inputs))))  # may write into an input
        lockstep = _Lockstep(*runners, stands_for(structure, gm_a, gm_b), unchanged)
        with torch.no_grad(), preserved_buffers(gm_a), preserved_buffers(gm_b):
            lockstep.run()
        rows = lockstep.rows()
    if rows["diverged"].any() or rows.attrs["gradients"]["diverged"].any():
        judge_rounding(step_a, step_b, rows)
    return rows


def first_divergence(rows: pd.DataFrame) -> str | None:
    """The first node (graph order) of :func:`numerics`' rows that diverged, or None."""
    diverged = rows.loc[rows["diverged"], "node"]
    return None if diverged.empty else str(diverged.iloc[0])


def first_gradient_divergence(rows: pd.DataFrame) -> str | None:
    """The parameter whose gradient diverged first (in the order b computes them), or None."""
    gradients = rows.attrs.get("gradients")
    if gradients is None or gradients.empty:
        return None
    diverged = gradients.loc[gradients["diverged"], "parameter"]
    return None if diverged.empty else str(diverged.iloc[0])


_PROPAGATED, _SHADOWED, _ZERO, _FAILED = range(4)  # where a node's introduced error comes from


class _Lockstep:
    """Step b run node by node, step a run just far enough ahead, and a shadow run of b's
    nodes on a's values where b's node is not a's own computation on a's own inputs."""

    def __init__(self, a: NodeRunner, b: NodeRunner, matched: dict[str, str], unchanged: dict[str, str]):
        self.a, self.b = a, b
        names_a, names_b = [n.name for n in a.nodes], [n.name for n in b.nodes]
        by_name = {name: i for i, name in enumerate(names_a)}
        cp = self.cp = [by_name.get(matched.get(name), -1) for name in names_b]  # b -> a position, -1: none
        last_need = [-1] * len(a.nodes)  # a's position -> the last b position that reads it
        ahead: list[int] = []  # b position -> how far a must have run
        kind: list[int] = []  # b position -> where its introduced error comes from
        for j, (name, ins, i) in enumerate(zip(names_b, b.inputs, cp)):
            far = i
            if i >= 0:
                last_need[i] = j
            mapped = [cp[k] for k in ins]
            for k in mapped:
                if k >= 0:
                    last_need[k] = j
                    if k > far:
                        far = k
            ahead.append(far)
            if not ins:
                kind.append(_PROPAGATED)
            elif i >= 0 and unchanged.get(name) == names_a[i] and mapped == a.inputs[i]:
                kind.append(_ZERO)  # a's own node (not one it absorbed) on what stands for its inputs
            else:
                kind.append(_SHADOWED)
        self.ahead, self.kind = ahead, kind
        # When each of a's values is freed: as a runs the last node that reads it, or once b has read it last
        self.a_free: list[list[int]] = [[] for _ in a.nodes]  # a position -> values to free after it ran
        self.b_free: list[list[int]] = [[] for _ in b.nodes]  # b position -> a's values to free after it ran
        runs_at, position = [len(b.nodes)] * len(a.nodes), 0  # a position -> the b position it runs before
        for j, far in enumerate(self.ahead):
            while position <= far:
                runs_at[position], position = j, position + 1
        for p, dead in enumerate(a.dies):
            for i in dead:
                (self.a_free[p] if last_need[i] < runs_at[p] else self.b_free[last_need[i]]).append(i)
        self.last_need = last_need
        self.kept: dict[int, Any] = {}  # a's values b still needs, saved before a wrote them
        self.shadow: dict[int, Any] = {}  # b's nodes with no counterpart: their value on a's inputs
        self.fits = [False] * len(b.nodes)  # b's node -> a's counterpart value can stand in for it as it is
        self.gradients = gradient_items(b.gm)  # (path in the output, key there, b's node giving it)
        self.gradient_shapes: dict[int, torch.Size] = {}
        self.output = len(b.nodes) - 1 if self.gradients and b.nodes[-1].op == "output" else -1
        self.stats = Stats(2 * len(b.nodes) + len(self.gradients), tf32_enabled())

    def run(self) -> None:
        """The lockstep, one loop: at 30k small nodes, every call and lookup per node shows."""
        a, b, stats, cp, fits, kind, kept, shadow = self.a, self.b, self.stats, self.cp, self.fits, self.kind, \
            self.kept, self.shadow
        a_values, a_plan, a_writes, a_free = a.values, a.plan, a.writes, self.a_free
        values, plan, dies, writes, inputs, b_free = b.values, b.plan, b.dies, b.writes, b.inputs, self.b_free
        ahead, add, pending, tensor = self.ahead, stats.add, stats.pending, torch.Tensor
        position = 0
        for j in range(len(plan)):
            while position <= ahead[j]:
                if a_writes[position]:
                    self._before_a_writes(position, j)
                fn, x, y = a_plan[position]
                a_values[position] = fn() if x < 0 else fn(a_values[x]) if y < 0 else fn(a_values[x], a_values[y])
                for done in a_free[position]:
                    a_values[done] = None
                    if kept:
                        kept.pop(done, None)
                position += 1
            if writes[j]:
                stats.flush()  # values waiting to be compared are the ones it could change
            how, shadowed = kind[j], None
            if how == _ZERO:
                for k in inputs[j]:
                    if not fits[k]:
                        how = kind[j] = _SHADOWED
                        break
            if how == _SHADOWED:
                shadowed = self._shadow(j)
            fn, x, y = plan[j]
            value = values[j] = fn() if x < 0 else fn(values[x]) if y < 0 else fn(values[x], values[y])
            i = cp[j]
            if i >= 0:
                reference = kept[i] if kept and i in kept else a_values[i]
                if type(reference) is tensor and type(value) is tensor and reference.shape == value.shape:
                    fits[j] = reference.dtype is value.dtype and reference.device == value.device
                    size = reference.numel()
                    if size <= SMALL:  # Stats.add's common case, inline
                        pending.append((2 * j, reference, value))
                        stats.waiting += size
                        if stats.waiting >= PENDING or len(pending) >= BATCH:
                            stats.flush()
                    else:
                        add(2 * j, reference, value)
                else:
                    add(2 * j, reference, value)
                    fits[j] = _fits(reference, value)
                    if j == self.output:
                        self._compare_gradients(reference, value)
                if shadowed is not None:
                    add(2 * j + 1, reference, shadowed)
            else:
                shadow[j] = value if shadowed is None else shadowed
            for done in dies[j]:
                values[done] = None
            if shadow:
                for done in dies[j]:
                    shadow.pop(done, None)
            for done in b_free[j]:
                a_values[done] = None
                if kept:
                    kept.pop(done, None)
        stats.flush()

    def rows(self) -> pd.DataFrame:
        table = self.stats.table()
        count = len(self.b.nodes)
        error, relative, sqnr, cosine, worst, shadow_rel = results(table, np.arange(0, 2 * count, 2),
                                                                   np.arange(1, 2 * count, 2))
        kind = np.array(self.kind)
        introduced = np.where(kind == _SHADOWED, shadow_rel, np.where(kind == _PROPAGATED, relative, math.nan))
        introduced[(kind == _ZERO) & ~np.isnan(relative)] = 0.0
        names = [node.name for node in self.b.nodes]
        counterparts = [self.a.nodes[i].name if i >= 0 else "" for i in self.cp]
        frame = pd.DataFrame(dict(zip(COLUMNS, (names, counterparts, error, relative, sqnr, cosine, introduced,
                                                 worst > 1, np.zeros(count, bool)))), columns=COLUMNS)
        frame.attrs["gradients"] = self._gradient_rows(table)
        return frame

    def _compare_gradients(self, reference: Any, value: Any) -> None:
        """Each gradient b returns against a's at the same place of the output (as forward returns it)."""
        first = 2 * len(self.b.nodes)
        reference, value = self.a.gm.graph.process_outputs(reference), self.b.gm.graph.process_outputs(value)
        for k, (path, key, _) in enumerate(self.gradients):
            try:
                ref, out = follow(reference, path)[key], follow(value, path)[key]
            except (IndexError, KeyError, TypeError):  # a returns its outputs otherwise: nothing to compare
                continue
            self.stats.add(first + k, ref, out)
            if isinstance(out, torch.Tensor):
                self.gradient_shapes[k] = out.shape

    def _gradient_rows(self, table: np.ndarray) -> pd.DataFrame:
        first, count = 2 * len(self.b.nodes), len(self.gradients)
        keys = np.arange(first, first + count)
        error, relative, sqnr, cosine, worst, _ = results(table, keys, keys)
        used: set[str] = set()
        names = [key if isinstance(key, str) else parameter_of(self.b.gm, node, self.gradient_shapes.get(k), used)
                 for k, (_, key, node) in enumerate(self.gradients)]
        frame = pd.DataFrame(dict(zip(GRADIENT_COLUMNS, (names, [node.name for _, _, node in self.gradients], error,
                                                         relative, sqnr, cosine, worst > 1, np.zeros(count, bool)))),
                            columns=GRADIENT_COLUMNS)
        order = {node: i for i, node in enumerate(self.b.nodes)}
        return frame.iloc[sorted(range(count), key=lambda k: order[self.gradients[k][2]])].reset_index(drop=True)

    def _before_a_writes(self, position: int, j: int) -> None:
        """a's node may write its inputs: compare what waits, and save what b reads later."""
        self.stats.flush()
        for i in self.a.inputs[position]:
            if self.last_need[i] >= j and i not in self.kept:
                self.kept[i] = _copy(self.a.values[i])

    def _shadow(self, j: int) -> Any:
        """b's node j run on a's values of its inputs (their own shadow values for nodes with none)."""
        feed = self._feed if not self.b.writes[j] else lambda n: _copy(self._feed(n))
        try:
            return self.b.call(self.b.nodes[j], feed)
        except Exception:  # b's op cannot take a's values (a dtype it refuses): nothing introduced known
            self.kind[j] = _FAILED
            return None

    def _feed(self, node: torch.fx.Node) -> Any:
        """What the shadow run gives a node for input ``node``: a's value of its counterpart
        (in b's dtype), else its own shadow value; b's own where a's has another shape."""
        k = self.b.slot[node]
        i = self.cp[k]
        if i < 0:
            return self.shadow[k]
        return _like(self.kept[i] if i in self.kept else self.a.values[i], self.b.values[k])


def _copy(value: Any) -> Any:
    """``value`` with every tensor in it cloned (containers rebuilt)."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    return type(value)(_copy(v) for v in value) if type(value) in (tuple, list) else value


def _like(reference: Any, own: Any) -> Any:
    """``reference`` made to stand in for ``own``: its tensors in ``own``'s dtypes and on its
    devices; ``own`` wherever the two differ in shape or structure (a's value cannot be fed there)."""
    if isinstance(reference, torch.Tensor) and isinstance(own, torch.Tensor):
        if reference.shape != own.shape:
            return own
        same = reference.dtype == own.dtype and reference.device == own.device
        return reference if same else reference.to(own.device, own.dtype)
    if type(reference) in (tuple, list) and type(own) is type(reference) and len(own) == len(reference):
        return type(own)(_like(r, o) for r, o in zip(reference, own))
    return own


def _fits(reference: Any, own: Any) -> bool:
    """Whether :func:`_like` gives ``reference`` itself: the same dtypes, devices, shapes and other values."""
    if isinstance(reference, torch.Tensor):
        return (isinstance(own, torch.Tensor) and reference.dtype == own.dtype and reference.device == own.device
                and reference.shape == own.shape)
    if type(reference) in (tuple, list):
        return type(own) is type(reference) and len(own) == len(reference) and all(map(_fits, reference, own))
    try:
        return type(reference) is type(own) and bool(reference == own)
    except Exception:  # a value without a plain equality: cannot tell, so it does not fit
        return False

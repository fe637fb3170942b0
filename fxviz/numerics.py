"""Where a step's numbers start to move: each node of the later step against the value it
stands for in the earlier step (:func:`stands_for`), compared as the values are produced.

Both graphs run node by node in lockstep on their example inputs: step a only as far as
the next node of step b needs, each of a's values kept until neither a's own later nodes
nor b's comparisons need it, so the two runs hold about two forwards' live values, never
every activation. A node's error is *propagated* (``max_rel``: its value against its
counterpart's, error carried in included) and *introduced* (a shadow run, as torch's
numeric suite's: the node fed step a's values of its inputs, against the same
counterpart), where a pass's error starts. Small values are compared in batches.
"""
from __future__ import annotations

import math
from typing import Any

import pandas as pd
import torch
import torch.fx
from torch.fx.node import map_arg

from fxviz._runtime import fresh_containers, preserved_buffers
from fxviz._torch_internals import tree_leaves
from fxviz.capture import as_inputs
from fxviz.check import tf32_enabled, tolerance
from fxviz.shapes import _last_uses, _may_write_inputs
from fxviz.structure import structure as structure_of

__all__ = ["numerics", "first_divergence", "stands_for", "COLUMNS"]

COLUMNS = ["node", "counterpart", "max_abs", "max_rel", "sqnr_db", "cosine", "introduced", "diverged"]
SMALL = 1 << 14  # elements: a value this small waits to be compared with others in one batch
BATCH = 512  # values per batch


def numerics(step_a: Any, step_b: Any, structure: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per node of ``step_b`` (graph order): ``node``, ``counterpart`` (the node
    of ``step_a`` it stands for, "" for none), ``max_abs`` (max |b - a|), ``max_rel``
    (``max_abs`` over max |a|), ``sqnr_db`` (10 log10 of a's energy over the error's),
    ``cosine``, ``introduced`` (``max_rel`` of the node run on a's inputs: the error it
    adds itself) and ``diverged`` (``max_rel`` beyond the step check's tolerance for the
    dtype, :func:`fxviz.check.tolerance`). NaN where there is nothing to compare (no
    counterpart, no tensor, other shapes). ``structure``: :func:`fxviz.structure.structure`
    of the two graphs, when known. Neither model is changed (buffers restored)."""
    gm_a, gm_b = step_a.gm, step_b.gm
    matched = stands_for(structure_of(gm_a, gm_b) if structure is None else structure, gm_a)
    lockstep = _Lockstep(gm_a, as_inputs(step_a.example_inputs), gm_b, as_inputs(step_b.example_inputs), matched)
    with torch.no_grad(), preserved_buffers(gm_a), preserved_buffers(gm_b):
        lockstep.run()
    return lockstep.rows()


def first_divergence(rows: pd.DataFrame) -> str | None:
    """The first node (graph order) of :func:`numerics`' rows that diverged, or None."""
    diverged = rows.loc[rows["diverged"], "node"]
    return None if diverged.empty else str(diverged.iloc[0])


def stands_for(structure: pd.DataFrame, gm_a: torch.fx.GraphModule) -> dict[str, str]:
    """Node of b -> the node of a whose value it stands for, from the structural match:
    what it took over (a fused conv: the BatchNorm it absorbed; of several, the last in
    a's order, whose value it now gives), else the node of the same name; a node the
    pass added that took nothing over has none."""
    order = {n.name: i for i, n in enumerate(gm_a.graph.nodes)}
    found = {}
    for node, mark, took in zip(structure["node"], structure["mark"], structure["counterpart"]):
        absorbed = [name for name in took.split(", ") if name in order]
        if mark != "removed" and absorbed:
            found[node] = max(absorbed, key=order.__getitem__)
        elif mark in ("changed", "unchanged"):
            found[node] = node
    return found


class _Graph:
    """One graph run node by node: its values by node, and how a node is run."""

    def __init__(self, gm: torch.fx.GraphModule, inputs: tuple):
        self.gm, self.nodes, self.pos, self.env = gm, list(gm.graph.nodes), 0, {}
        self.interpreter = torch.fx.Interpreter(gm, garbage_collect_values=False)
        self.interpreter.args_iter = iter(gm.graph.process_inputs(*inputs))
        self.dies_after = _last_uses(gm.graph)

    def call(self, node: torch.fx.Node, value_of: Any) -> Any:
        """``node`` run on its inputs' values as ``value_of(input node)`` gives them."""
        if node.op == "placeholder":
            return self.interpreter.placeholder(node.target, node.args, {})
        args = map_arg(node.args, value_of)
        if node.op == "output":
            return args[0]
        kwargs = map_arg(node.kwargs, value_of) if node.kwargs else {}
        return getattr(self.interpreter, node.op)(node.target, fresh_containers(args), fresh_containers(kwargs))

    def writes(self, node: torch.fx.Node) -> bool:
        """Whether running ``node`` may change its inputs in place (``add_``, an in-place ReLU,
        a module of the user's own, whose forward could do anything)."""
        if node.op != "call_module":
            return _may_write_inputs(node)
        module = self.gm.get_submodule(str(node.target))
        return bool(getattr(module, "inplace", False)) or not type(module).__module__.startswith("torch.nn")


class _Lockstep:
    """Step b run node by node, step a run just far enough ahead, and a shadow run of b's
    nodes on a's values where those differ from b's own."""

    def __init__(self, gm_a, inputs_a, gm_b, inputs_b, matched: dict[str, str]):
        self.a, self.b = _Graph(gm_a, inputs_a), _Graph(gm_b, inputs_b)
        by_name = {n.name: n for n in self.a.nodes}
        self.cp = {n: by_name[matched[n.name]] for n in self.b.nodes if n.name in matched}
        position = {n: i for i, n in enumerate(self.a.nodes)}
        self.last_need: dict[torch.fx.Node, int] = {}  # a's node -> the last b position that reads it
        self.ahead: list[int] = []  # b position -> how far a must have run
        self.inputs = [node.all_input_nodes for node in self.b.nodes]
        for j, node in enumerate(self.b.nodes):
            needed = [self.cp[n] for n in (node, *self.inputs[j]) if n in self.cp]
            self.last_need.update(dict.fromkeys(needed, j))
            self.ahead.append(max((position[n] for n in needed), default=-1))
        self.released: list[list[torch.fx.Node]] = [[] for _ in self.b.nodes]  # b position -> a's nodes read last
        for node, j in self.last_need.items():
            self.released[j].append(node)
        self.kept: dict[torch.fx.Node, Any] = {}  # a's values b still needs, saved before a wrote them
        self.a_done: set[torch.fx.Node] = set()  # a's nodes a itself no longer needs
        self.shadow: dict[torch.fx.Node, Any] = {}  # b's nodes with no counterpart: their value on a's inputs
        self.exact: dict[torch.fx.Node, bool] = {}  # b's node -> its shadow input equals its own value
        self.j, self.stats = 0, _Stats(tf32_enabled())

    def run(self) -> None:
        b = self.b
        for self.j, node in enumerate(b.nodes):
            while self.a.pos <= self.ahead[self.j]:
                self._step_a()
            writes = b.writes(node)
            if writes:
                self.stats.flush()  # values waiting to be compared are the ones it could change
            shadowed = None
            if not all(self.exact.get(n, False) for n in self.inputs[self.j]):
                feed = self._feed if not writes else lambda n: _copy(self._feed(n))
                try:
                    shadowed = b.call(node, feed)
                except Exception:  # b's op cannot take a's values (a dtype it refuses): nothing introduced known
                    shadowed = _FAILED
            value = b.env[node] = b.call(node, b.env.__getitem__)
            counterpart = self.cp.get(node)
            if counterpart is not None:
                reference = self._a_value(counterpart)
                self.stats.add((self.j, "propagated"), reference, value)
                if shadowed is not None:
                    self.stats.add((self.j, "introduced"), reference, shadowed)
                self.exact[node] = shadowed is None and _same(value, reference)
            else:
                self.shadow[node] = value if shadowed is None else shadowed
                self.exact[node] = shadowed is None
            for done in (*b.dies_after.get(node, ()), *(() if node.users else (node,))):
                for held in (b.env, self.shadow, self.exact):
                    held.pop(done, None)
            for done in self.released[self.j]:
                if done in self.a_done:
                    self._drop_a(done)
        self.stats.flush()

    def rows(self) -> pd.DataFrame:
        rows, found = [], self.stats.found
        for j, node in enumerate(self.b.nodes):
            counterpart = self.cp.get(node)
            propagated = self.stats.result((j, "propagated"))
            shadowed = (j, "introduced") in found
            introduced = self.stats.result((j, "introduced"), propagated[1]) if shadowed else propagated
            rows.append((node.name, "" if counterpart is None else counterpart.name, propagated[0],
                         propagated[2], propagated[3], propagated[4], introduced[2], propagated[5] > 1))
        return pd.DataFrame(rows, columns=COLUMNS)

    def _step_a(self) -> None:
        a, node = self.a, self.a.nodes[self.a.pos]
        if a.writes(node):
            self.stats.flush()
            for producer in node.all_input_nodes:  # b reads it later as a had it: save it first
                if self.last_need.get(producer, -1) >= self.j and producer not in self.kept:
                    self.kept[producer] = _copy(a.env[producer])
        a.env[node] = a.call(node, a.env.__getitem__)
        a.pos += 1
        for done in (*a.dies_after.get(node, ()), *(() if node.users else (node,))):
            self.a_done.add(done)
            if self.last_need.get(done, -1) < self.j:
                self._drop_a(done)

    def _drop_a(self, node: torch.fx.Node) -> None:
        self.a.env.pop(node, None), self.kept.pop(node, None)

    def _a_value(self, node: torch.fx.Node) -> Any:
        return self.kept[node] if node in self.kept else self.a.env[node]

    def _feed(self, node: torch.fx.Node) -> Any:
        """What the shadow run gives a node for input ``node``: a's value of its counterpart
        (in b's dtype), else its own shadow value; b's own where a's has another shape."""
        counterpart = self.cp.get(node)
        return self.shadow[node] if counterpart is None else _like(self._a_value(counterpart), self.b.env[node])



_FAILED = object()


def _copy(value: Any) -> Any:
    """``value`` with every tensor in it cloned (containers rebuilt)."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    return type(value)(_copy(v) for v in value) if type(value) in (tuple, list) else value


def _like(reference: Any, own: Any) -> Any:
    """``reference`` made to stand in for ``own``: its tensors in ``own``'s dtypes; ``own``
    wherever the two differ in shape or structure (a's value cannot be fed there)."""
    if isinstance(reference, torch.Tensor) and isinstance(own, torch.Tensor):
        if reference.shape != own.shape:
            return own
        return reference if reference.dtype == own.dtype else reference.to(own.dtype)
    if type(reference) in (tuple, list) and type(own) is type(reference) and len(own) == len(reference):
        return type(own)(_like(r, o) for r, o in zip(reference, own))
    return own


def _same(x: Any, y: Any) -> bool:
    """Whether two values are equal, tensors bit for bit (shape and dtype too)."""
    xs, ys = (tree_leaves(v) if not isinstance(v, torch.Tensor) else [v] for v in (x, y))
    if len(xs) != len(ys):
        return False
    for p, q in zip(xs, ys):
        if isinstance(p, torch.Tensor) or isinstance(q, torch.Tensor):
            if not (isinstance(p, torch.Tensor) and isinstance(q, torch.Tensor) and p.shape == q.shape
                    and p.dtype == q.dtype and torch.equal(p, q)):
                return False
        elif type(p) is not type(q) or p is not q and p != q:
            return False
    return True


class _Stats:
    """Error statistics per key, summed over a value's tensors: max |d|, max |ref|, |d|²,
    |ref|², |out|² and the worst error over its tolerance (the check's rule)."""

    def __init__(self, tf32: bool):
        self.tf32, self.found, self.pending, self.segments = tf32, {}, [], {}

    def add(self, key: Any, reference: Any, output: Any) -> None:
        refs, outs = (tree_leaves(v) if not isinstance(v, torch.Tensor) else [v] for v in (reference, output))
        pairs = [(r, o) for r, o in zip(refs, outs) if isinstance(r, torch.Tensor)]
        if len(refs) != len(outs) or not pairs or any(not isinstance(o, torch.Tensor) or o.shape != r.shape
                                                      for r, o in pairs):
            self.found[key] = None  # nothing to compare
            return
        self.found[key] = [0.0] * 6
        for r, o in pairs:
            rtol = tolerance(r.dtype, tf32=self.tf32 and r.is_cuda)
            r = _wide(r)
            o = _wide(o).to(r.dtype)
            if r.numel() > SMALL:
                self._note(key, rtol, _errors(r, o))
            else:
                self.pending.append((key, rtol, r.reshape(-1), o.reshape(-1)))
        if len(self.pending) >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Compare what waits, one batch per dtype."""
        groups: dict[tuple, list] = {}
        for item in self.pending:
            groups.setdefault((item[2].dtype, item[2].device), []).append(item)
        self.pending = []
        for items in groups.values():
            sizes = tuple(item[2].numel() for item in items)
            segment = self.segments.get((sizes, device := items[0][2].device))
            if segment is None:  # a graph repeats its few batch layouts: each made once
                segment = self.segments[sizes, device] = torch.repeat_interleave(
                    torch.arange(len(items)), torch.tensor(sizes)).to(device)
            ref, out = torch.cat([item[2] for item in items]), torch.cat([item[3] for item in items])
            diff = out - ref
            zeros = torch.zeros(len(items), dtype=ref.dtype, device=ref.device)
            columns = [zeros.clone().scatter_reduce_(0, segment, diff.abs(), "amax"),
                       zeros.clone().scatter_reduce_(0, segment, ref.abs(), "amax"),
                       *(zeros.clone().index_add_(0, segment, x * x) for x in (diff, ref, out))]
            for item, numbers in zip(items, torch.stack(columns, 1).tolist()):
                self._note(item[0], item[1], numbers)

    def _note(self, key: Any, rtol: float, numbers: list[float]) -> None:
        error, scale, error_sq, ref_sq, out_sq = numbers
        total = self.found[key]
        total[0], total[1] = max(total[0], error), max(total[1], scale)
        total[2:5] = [total[2] + error_sq, total[3] + ref_sq, total[4] + out_sq]
        allowed = rtol * scale
        worst = error / allowed if allowed else math.inf if error else 0.0
        total[5] = max(total[5], worst) if error == error else math.inf  # NaN: never within tolerance

    def result(self, key: Any, scale: float | None = None) -> tuple[float, ...]:
        """(max_abs, scale, max_rel, sqnr_db, cosine, worst error over tolerance); NaN for none."""
        total = self.found.get(key)
        if total is None:
            return (math.nan,) * 5 + (0.0,)
        error, own_scale, error_sq, ref_sq, out_sq, worst = total
        scale = own_scale if scale is None else scale
        relative = error / scale if scale else math.inf if error else 0.0
        sqnr = math.inf if error_sq == 0 else 10 * math.log10(ref_sq / error_sq) if ref_sq else -math.inf
        norms = math.sqrt(ref_sq * out_sq)
        cosine = max(-1.0, min(1.0, (ref_sq + out_sq - error_sq) / (2 * norms))) if norms else math.nan
        return error, scale, relative, sqnr, cosine, worst


def _wide(t: torch.Tensor) -> torch.Tensor:
    """The dtype errors are computed in: float64 for double, float32 for the rest (complex as pairs)."""
    if t.is_complex():
        t = torch.view_as_real(t)
    return t if t.dtype in (torch.float64, torch.float32) else t.to(torch.float32)


def _errors(ref: torch.Tensor, out: torch.Tensor) -> list[float]:
    """:class:`_Stats`' numbers of one large tensor pair, without copying either."""
    diff = out - ref
    norm = torch.linalg.vector_norm
    numbers = torch.stack([norm(diff, math.inf), norm(ref, math.inf), norm(diff), norm(ref), norm(out)]).tolist()
    return [*numbers[:2], *(x * x for x in numbers[2:])]

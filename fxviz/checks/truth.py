"""The check's float64 reference: what a step is judged against when float32 cannot tell.

An output made of terms that cancel is rounding noise in float32, whatever the order of
its sums: ViT-MAE's training step returns a cls-token gradient of 3e-4 that float32 eager
gets 1e-3 wrong, 1 % of the largest gradient and beyond the check's gradient floor, so a
step that sums in another order (``run_decompositions``) "differs" from eager as much as
eager differs from the truth. When a step fails against float32 eager, the model runs
again with every floating-point op in float64, and the step passes if it is no further from
that run than float32 eager itself is (times :data:`FACTOR`, plus the usual tolerance).
Random ops draw as in float32 (the same numbers); a call that checks its dtypes above the
dispatch mode (``conv2d``) is made again widened; a cast to float32 the model makes
(``x.float()`` in an RMSNorm) widens too, autograd's casts of gradients do not.
The float64 run counts only if it took every discrete decision (masks, comparisons) as
float32 did: another mask would be another computation, not the truth. An op that picks
elements (max pooling, argmax, topk, sort, max over a dim) picks as float32 did, its values
read there: a tie float32 rounds into, which float64 breaks (resnet34's stem at 224x224
picks one other element), is rounding, and the rest of the run follows float32's routing.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

from fxviz._torch_internals import TorchDispatchMode, current_autograd_node, op_schema
from fxviz.checks.check import CheckResult, _leaf_error, _pairs, compare_outputs, run_outputs

#: A step's error against float64 may be this many times float32 eager's own: two float32
#: orderings of one sum are about equally far from it (ViT-MAE's decomposed step 0.2-1.8x
#: eager's on its cls-token gradient, over 4 initialisations), and a decomposition rounds
#: more often than the fused op it replaces. A real error (1 % of a gradient above the floor)
#: is 1e3-1e4 times the float32 noise of a gradient float32 resolves.
FACTOR = 4.0
#: The op every cast reaches (see :func:`_wide_cast`).
_CAST = "_to_copy"
_aten = torch.ops.aten
#: Ops that pick elements, whose float64 run takes float32's picks and reads its values there
#: (:meth:`_Run._pick`): how ("pool N": indices into the flattened last N dims; "index": the
#: output is the indices; "reduce": indices of a reduced ``dim``; "along": indices along ``dim``).
_PICKS = {_aten.max_pool2d_with_indices.default: "pool 2", _aten.max_pool3d_with_indices.default: "pool 3",
          **dict.fromkeys((_aten.argmax.default, _aten.argmin.default), "index"),
          **dict.fromkeys((_aten.max.dim, _aten.min.dim, _aten.kthvalue.default, _aten.mode.default,
                           _aten.median.dim, _aten.nanmedian.dim), "reduce"),
          **dict.fromkeys((_aten.topk.default, _aten.sort.default, _aten.sort.stable, _aten.cummax.default,
                           _aten.cummin.default), "along")}
_WIDE = {torch.complex64: torch.complex128, torch.complex32: torch.complex128,
         **dict.fromkeys((torch.float32, torch.float16, torch.bfloat16), torch.float64)}


class _Run(TorchDispatchMode):
    """Runs every ATen op, noting a digest of each integer or bool tensor it gives (the run's
    discrete decisions). ``widen``: floating-point ops compute in float64 (their inputs and
    dtype arguments widened); views and in-place writes run as they are (a write into a
    float32 buffer is rounded into it), and random ops get back the dtypes they had, so they
    draw the numbers they draw in float32."""

    def __init__(self, widen: bool, picks: list | None = None):
        super().__init__()
        self.widen, self.decisions, self.picks = widen, [], [] if picks is None else picks  # float32's, in order
        self.picked = iter(self.picks)
        self.was: WeakIdKeyDictionary = WeakIdKeyDictionary()  # tensor widened here -> its dtype before

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.widen:
            out = func(*args, **kwargs)
            self.picks.extend([out if _PICKS[func] == "index" else out[1]] if func in _PICKS else [])
            return self._noted(out)
        kind = _kind(func)
        if kind == "random":
            return self._noted(self._drawn(func, args, kwargs))
        given = _tensors((args, tuple(kwargs.values())))
        before = [self.was.get(t, t.dtype) for t in given if t.dtype in _WIDE or t in self.was]
        if kind != "as is":
            wide = _wide_cast if kind == "cast" else _wide
            args, kwargs = _mapped(wide, args), {k: _mapped(wide, v) for k, v in kwargs.items()}
        out = func(*args, **kwargs)
        out = self._pick(func, args, kwargs, out) if func in _PICKS else out
        for t in _tensors(out) if before else ():
            if t.dtype in _WIDE.values() and t not in self.was:  # float64 here, narrower in float32
                self.was[t] = before[0]
        return self._noted(out)

    def _drawn(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """A random op run on the dtypes it has in float32; what it fills in place (``bernoulli_``
        on a widened tensor) written back into the tensor given."""
        narrowed = {}

        def narrow(t: Any) -> Any:
            if not isinstance(t, torch.Tensor) or t not in self.was:
                return t
            narrowed[id(t)] = t, t.to(self.was[t])
            return narrowed[id(t)][1]

        out = func(*_mapped(narrow, args), **{k: _mapped(narrow, v) for k, v in kwargs.items()})
        names = [a.name for a in op_schema(func).arguments]
        given = dict(zip(names, args)) | kwargs
        for name in _written(func):
            if id(given.get(name)) in narrowed:
                original, copy = narrowed[id(given[name])]
                original.copy_(copy)
                out = original if out is copy else out
        return out

    def _pick(self, func: Any, args: tuple, kwargs: dict, out: Any) -> Any:
        """``out`` with float32's picks, its values read there (see :data:`_PICKS`)."""
        picked, how = next(self.picked, None), _PICKS[func]
        indices = out if how == "index" else out[1]
        if picked is None or picked.shape != indices.shape or torch.equal(picked, indices):
            return out
        if how == "index":
            return picked.clone()
        given = dict(zip((a.name for a in op_schema(func).arguments), args)) | kwargs
        x = given["self"]
        if how.startswith("pool"):
            dims = int(how.split()[1])
            flat = x.reshape(*x.shape[:-dims], -1)
            values = flat.gather(-1, picked.reshape(*picked.shape[:-dims], -1)).reshape(out[0].shape)
        else:
            dim = given.get("dim", -1) % max(x.dim(), 1)
            squeezed = how == "reduce" and not given.get("keepdim", False) and x.dim() > 0
            values = x.gather(dim, picked.unsqueeze(dim) if squeezed else picked)
            values = values.squeeze(dim) if squeezed else values
        return values, picked.clone()

    def _noted(self, out: Any) -> Any:
        for t in _tensors(out):
            if not (t.is_floating_point() or t.is_complex()) and t.numel():
                flat = t.detach().reshape(-1).to(torch.int64)
                weights = torch.arange(flat.numel(), device=flat.device) % 65521 + 1
                self.decisions.append((str(t.dtype), tuple(t.shape), int(flat.sum()), int((flat * weights).sum())))
        return out


class _Mixed(TorchFunctionMode):
    """A call that fails on float64 tensors beside narrower ones (a widened activation and a
    float32 weight: ``conv2d`` checks "Input type (double) and bias type (float) should be the
    same" above the dispatch mode) is made again with the narrower ones widened."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            return func(*args, **kwargs)
        except RuntimeError:
            floats = {t.dtype for t in _tensors((args, tuple(kwargs.values()))) if t.is_floating_point()}
            if torch.float64 not in floats or len(floats) < 2:
                raise
        return func(*_mapped(_wide_tensor, args), **{k: _mapped(_wide_tensor, v) for k, v in kwargs.items()})


@functools.cache
def _kind(func: Any) -> str:
    """How a widening run runs ``func``: "random" (seeded), "as is" (a view or an in-place
    write), "cast" (``_to_copy``: :func:`_wide_cast`) or "widen"."""
    schema = op_schema(func)
    if torch.Tag.nondeterministic_seeded in func.tags:
        return "random"
    if any(a.alias_info is not None for a in (*schema.arguments, *schema.returns)):
        return "as is"
    return "cast" if func.overloadpacket.__name__ == _CAST else "widen"


@functools.cache
def _written(func: Any) -> tuple[str, ...]:
    return tuple(a.name for a in op_schema(func).arguments if a.alias_info is not None and a.alias_info.is_write)


def _mapped(fn: Callable[[Any], Any], value: Any) -> Any:
    """``fn`` of each item of an ATen op's argument (lists of tensors included)."""
    return type(value)(_mapped(fn, v) for v in value) if isinstance(value, (list, tuple)) else fn(value)


def _wide(x: Any) -> Any:
    return _WIDE.get(x, x) if isinstance(x, torch.dtype) else _wide_tensor(x)


def _wide_cast(x: Any) -> Any:
    """A cast's argument widened: its tensors, and the dtype asked for where it is float32's
    (``x.float()``, the model asking for at least float32) outside backward (where autograd
    casts each gradient to its weight's dtype); a narrower one (``x.half()``) rounds as in float32."""
    if isinstance(x, torch.dtype):
        return _WIDE[x] if x in (torch.float32, torch.complex64) and current_autograd_node() is None else x
    return _wide_tensor(x)


def _wide_tensor(x: Any) -> Any:
    return x.to(_WIDE[x.dtype]) if isinstance(x, torch.Tensor) and x.dtype in _WIDE else x


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in an op's arguments or results (in lists and tuples)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def float64_outputs(model: Callable[..., Any], inputs_list: Sequence[tuple]) -> tuple[list, list] | None:
    """``model``'s outputs on each input tuple (:func:`~fxviz.checks.check.run_outputs`:
    same seed, state restored) run again in float32, and with every floating-point op
    computed in float64; None when the float64 run took a discrete decision otherwise than
    float32 did (then it is another computation). Neither the model nor the inputs are
    copied or changed."""
    runs, picks = [], []
    for widen in (False, True):
        with _Run(widen, picks) as run, _Mixed() if widen else contextlib.nullcontext():
            outputs = run_outputs(model, inputs_list)
        runs.append((sorted(run.decisions), outputs))
    return (runs[0][1], runs[1][1]) if runs[0][0] == runs[1][0] else None


@dataclasses.dataclass
class _Leaf:
    index: int  # among its input's tensor leaves
    path: str
    expected: torch.Tensor
    actual: torch.Tensor
    error: float  # against float32 eager
    allowed: float


def against_float64(result: CheckResult, expected: Sequence[Any], actual: Sequence[Any],
                    truth: Callable[[], tuple[list, ...] | None], reference: str = "eager",
                    source: str = "the model") -> CheckResult:
    """``result``, a mismatch of ``actual`` against float32 ``expected``, judged again against
    ``truth()`` (the model's :func:`float64_outputs`), asked for only where every difference
    is a floating-point leaf's: a match when each leaf beyond tolerance is no further from
    float64 than :data:`FACTOR` times float32 eager's own error there (the largest over the
    inputs), plus the tolerance; ``truth()`` may add float32 eager's outputs on the step's own
    inputs (a pass converted them: other strides, other rounding), whose error counts as its own
    too. Else ``result``, saying so when float64 confirms it; as it
    is when there is no float64 run (ops without float64 kernels, other decisions) or the
    model, run again, gives other outputs (a Python counter: each run another computation).
    ``reference`` names what gave ``expected`` ("float32 eager"), ``source`` what ran in float64."""
    leaves = _leaves(expected, actual)
    if not leaves or not any(leaf.error > leaf.allowed and leaf.expected.dtype in _WIDE for leaf in leaves):
        return result  # nothing narrower than float64 fails: a float64 run would tell nothing new
    try:
        runs = truth()
        again = runs is not None and compare_outputs(expected, runs[0]).status == "match"
        found = _against(leaves, expected, runs[1], runs[2:]) if again else None
    except Exception:  # a model that cannot run in float64 (quantised ops, a float32-only kernel)
        return result
    if found is None:
        return result
    noise: dict[int, float] = {}
    for leaf, _, own in found:
        noise[leaf.index] = max(noise.get(leaf.index, 0.0), own)
    beyond = [(leaf, off, leaf.allowed + FACTOR * noise[leaf.index]) for leaf, off, _ in found if leaf.error > leaf.allowed]
    leaf, off, limit = max(beyond, key=lambda b: b[1] / b[2] if b[2] else float("inf"))
    dtype = str(leaf.expected.dtype).removeprefix("torch.")
    said = (f"{leaf.path} is {leaf.error:.3g} from {dtype} {reference} (tolerance {leaf.allowed:.3g}) and {off:.3g} from "
            f"a float64 run of {source}, where {dtype} {reference}'s own error is up to {noise[leaf.index]:.3g}")
    if all(b[1] <= b[2] for b in beyond):
        return dataclasses.replace(result, status="match", atol=limit, message=(
            f"outputs match within {dtype}'s own error against float64 (inputs tried: {result.n_inputs}): where "
            f"they differ from {dtype} {reference} beyond tolerance, they are no further from a float64 run of {source} "
            f"than {FACTOR:g}x {dtype} {reference}'s own error, which {dtype} cannot resolve; e.g. {said}"))
    return dataclasses.replace(result, message=f"{result.message}. Not {dtype}'s rounding: {said}")


def within_own_error(expected: Any, actual: Any, wide: Any) -> bool:
    """Whether ``actual``, which differs from float32 ``expected``, is float32's rounding: at
    each floating-point leaf beyond tolerance no further from ``wide`` (a float64 run of what
    gave ``expected``) than :data:`FACTOR` times ``expected``'s own error, plus the tolerance;
    every other leaf equal (:func:`against_float64`'s rule, for one value: a node's)."""
    leaves = _leaves([expected], [actual])
    found = _against(leaves, [expected], [wide]) if leaves else None
    return found is not None and all(leaf.error <= leaf.allowed or off <= leaf.allowed + FACTOR * own
                                     for leaf, off, own in found)


def _leaves(expected: Sequence[Any], actual: Sequence[Any]) -> list[_Leaf] | None:
    """Every tensor leaf, when all that fail the float32 check are floating point; else None."""
    leaves = []
    for i, (exp, act) in enumerate(zip(expected, actual, strict=True)):
        for index, (path, e, a, problem, floor) in enumerate(_pairs(exp, act, f"input {i}: output")):
            if problem:
                return None
            error, scale, rtol = _leaf_error(e, a)
            allowed = rtol * max(scale, floor)
            if error > allowed and not (e.is_floating_point() or e.is_complex()):
                return None
            leaves.append(_Leaf(index, path, e, a, error, allowed))
    return leaves


def _against(leaves: list[_Leaf], expected: Sequence[Any], wide: Sequence[Any],
             also: Sequence[Sequence[Any]] = ()) -> list[tuple] | None:
    """(leaf, the step's error against float64, float32 eager's) for each floating-point leaf,
    float32 eager's the largest of ``expected``'s and ``also``'s (float32 eager's outputs on
    converted inputs); None when float64's (or those) do not line up with float32's."""
    columns = [[t for exp, w in zip(expected, run, strict=True) for _, _, t, problem, _ in _pairs(exp, w, "")
                if not problem] for run in (wide, *also)]
    if any(len(column) != len(leaves) for column in columns):
        return None
    found = []
    for leaf, (t, *others) in zip(leaves, zip(*columns)):
        if leaf.expected.is_floating_point() or leaf.expected.is_complex():
            t = t.to(torch.complex128 if t.is_complex() else torch.float64)
            own = max(_leaf_error(t, e)[0] for e in (leaf.expected, *others))
            found.append((leaf, _leaf_error(t, leaf.actual)[0], own))
    return found

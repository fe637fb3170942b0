"""Numeric check of a step: does it still compute what the original model computed?

The one comparison of outputs in fxviz: the check and :class:`fxviz.diff.comparison.Comparison`
both use :func:`compare_outputs`. Outputs are compared leaf by leaf through nested
tuples, lists, dicts and named tuples (``torch.topk``'s result included).
Floating-point leaves pass when ``max|a - b| <= rtol * max|b|``: the error is
measured against the scale of the output, not element by element (a rewrite such as
conv-BN fusion changes rounding in proportion to the size of the activations, and
elementwise relative error explodes on outputs near zero), and with no absolute
floor, so an output that peaks at 1e-4 is judged as strictly as one that peaks at 1.
A leaf that is zero everywhere in both, or empty, has no scale: it is reported as not compared.
NaN and inf must sit at the same places. Integer and bool leaves must be equal.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from fxviz._runtime import fresh_inputs, untouched
from fxviz.capture.info import graph_info
from fxviz._torch_internals import register_pytree_node, tree_map_only
from fxviz.checks._peaks import finite_error, peak
from fxviz.checks.inputs import EXAMPLE_ONLY, EXAMPLE_ONLY_WHY, nothing_compared, random_like  # random_like: this interface's
from fxviz.checks.seeds import seeded  # seeded: this interface's too

# rtol per dtype, relative to the output's largest magnitude. float32: fusing conv+BN
# in a ResNet50 moves outputs by about 1e-6 of their scale; 1e-4 leaves two decades
# of headroom for deeper models while a wrong rewrite (a weight 1 % off moves outputs
# by about 1e-2 of their scale) still fails. Half types have 10 (float16) and 7
# (bfloat16) mantissa bits.
TOLERANCES: dict[torch.dtype, float] = {
    torch.float64: 1e-7,
    torch.float32: 1e-4,
    torch.float16: 1e-2,
    torch.bfloat16: 5e-2,
    torch.complex64: 1e-4,
    torch.complex128: 1e-7,
}
#: Gradients are judged against at least this fraction of the step's largest gradient.
#: A gradient that is zero in exact arithmetic (a conv bias before a training-mode
#: BatchNorm) comes out as rounding noise whose size follows the gradients flowing
#: through the step, not its own: against its own scale any reordering "fails". With
#: rtol 1e-4 this allows 1e-5 of the largest gradient: bench/frontends.py's "qwen3
#: (export joint)" puts its embedding's gradient 2-4e-6 of the largest off the eager
#: step's (eager float32 is 1-3e-6 off float64 there; at 1e-2 half its checks failed).
#: It still catches a 1 % error in any gradient above 10 % of the largest; what float32 cannot resolve even so is judged against float64 (truth.py).
GRADIENT_FLOOR = 1e-1
#: "nothing compared": every floating-point output was zero in both (no scale to
#: measure an error against); "error": the check itself could not run; "not checked":
#: the model has no real tensors to run (meta or fake), so there is nothing to run;
#: "example only": on random inputs the graph fails or gives other sizes, the model not.
STATUSES = ("match", "expected to differ", "mismatch", "nothing compared", "error", "not checked", "example only")


class Gradients(dict):
    """``{parameter name: gradient}`` of a training step: compared leaf by leaf, each
    against at least :data:`GRADIENT_FLOOR` of the largest of them. A pytree node like
    ``dict``, so graph capture traces through it (a graph returns a plain dict)."""


class GradientTuple(tuple):
    """The gradients a step returns as a tuple (``torch.autograd.grad``), judged as
    :class:`Gradients`; made from a reference's outputs only, never traced."""


register_pytree_node(Gradients, lambda g: (list(g.values()), list(g)),
                     lambda values, keys: Gradients(zip(keys, values)), serialized_type_name="fxviz.Gradients")


def _marked(output: Any, paths: Sequence[tuple[int, ...]]) -> Any:
    """``output`` with the tuples or lists at ``paths`` (index paths) as GradientTuples
    and the dicts there as Gradients (a graph returns them plain)."""
    for path in paths:
        output = _replace(output, path)
    return output


def _replace(value: Any, path: tuple[int, ...]) -> Any:
    if not path:
        if isinstance(value, dict):
            return Gradients(value)
        return GradientTuple(value) if isinstance(value, (tuple, list)) else value
    if not isinstance(value, (tuple, list)) or path[0] >= len(value):
        return value
    items = list(value)
    items[path[0]] = _replace(items[path[0]], path[1:])
    return tuple(items) if isinstance(value, tuple) else items


@dataclass(frozen=True)
class CheckResult:
    """How far a step's outputs are from the reference outputs.

    ``max_abs``: largest absolute difference over all inputs and output leaves.
    ``max_rel``: largest ``max|a - b| / max|b|`` of a leaf (error relative to the
    output's scale). ``atol``: the absolute error allowed for the leaf closest to
    failing (``rtol`` times its scale); ``rtol``: that leaf's relative tolerance.
    ``status``: one of :data:`STATUSES` ("expected to differ" for a step after a
    semantics-changing pass, whatever the numbers say); ``message`` says what was
    found and, for "nothing compared", "example only" and "error", what to do.
    ``scope``: what the check covered when that is less than the status suggests
    ("graph 1 of 3 checked" on one of dynamo's graphs), else "".
    """

    status: str
    max_abs: float
    max_rel: float
    atol: float
    rtol: float
    n_inputs: int
    message: str
    scope: str = ""

    @property
    def ok(self) -> bool:
        """True unless the outputs differ where they should not or the check failed."""
        return self.status not in ("mismatch", "error", "example only")

    @property
    def summary(self) -> str:
        """The status with what it covered, for a badge: "match · graph 1 of 3 checked"."""
        status = EXAMPLE_ONLY if self.status == "example only" else self.status
        return f"{status} · {self.scope}" if self.scope else status

    @classmethod
    def failed(cls, what: str, exc: BaseException, n_inputs: int, advice: str) -> CheckResult:
        """The result of a check that could not run: the error and what to do."""
        return cls("error", math.nan, math.nan, math.nan, math.nan, n_inputs,
                   f"{what} failed: {type(exc).__name__}: {exc}. {advice}")


# float32 on a GPU with TF32 on (cuDNN's default for convolutions) keeps 10 mantissa
# bits inside matmuls and convolutions: a fused ResNet18 moves by 1e-4 of scale there.
TF32_TOLERANCE = 1e-3


def tolerance(dtype: torch.dtype, *, tf32: bool = False) -> float:
    """The relative tolerance for outputs of ``dtype``; integers and bools are exact (0).
    ``tf32``: float32 that was computed with TensorFloat-32 gets TF32's tolerance."""
    rtol = TOLERANCES.get(dtype, 0.0)
    return max(rtol, TF32_TOLERANCE) if tf32 and dtype in (torch.float32, torch.complex64) else rtol


def tf32_enabled() -> bool:
    """Whether CUDA may compute float32 matmuls or convolutions in TF32."""
    import warnings

    with warnings.catch_warnings():  # newer torch steers towards fp32_precision; the flags still answer
        warnings.simplefilter("ignore")
        return bool(torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32)


def run_outputs(module: Callable[..., Any], inputs_list: Sequence[tuple], grad: bool | None = None,
                drew: list | None = None) -> list[Any]:
    """``module(*inputs)`` for each input tuple, with the same random seed each time, so dropout in a
    training-mode model draws the same masks at every step (``drew``: True appended for each run that drew).
    Modules run without autograd (unless ``grad``); a plain function runs with it (a training step calls
    ``torch.autograd.grad``); outputs come back detached. What a run changes (buffers; weights and optimizer
    state a step updates) is restored after each, from one copy."""
    # A GraphModule's __call__ prints its code to stderr and imports torch._dynamo (seconds) when the forward raises
    call = module.forward if isinstance(module, torch.fx.GraphModule) else module
    grad = not isinstance(module, torch.nn.Module) if grad is None else grad
    gradients = _gradient_paths(module)
    outputs = []
    with torch.set_grad_enabled(grad), untouched(module) as restore:  # pnasnet5large's weights: 0.3-0.8 s a copy
        for i, inputs in enumerate(inputs_list):  # each from the same state: a step may update weights
            if i:
                restore()
            with seeded(inputs, drew):
                outputs.append(_marked(tree_map_only(torch.Tensor, torch.Tensor.detach, call(*fresh_inputs(inputs))),
                                       gradients))  # on a copy: a run that writes into its inputs (x.add_(1)) leaves them
    return outputs


def _gradient_paths(module: Any) -> Sequence[tuple[int, ...]]:
    """Where outputs hold gradients: in a training graph's meta (every step keeps it), on a step's reference."""
    return graph_info(module).gradient_outputs or getattr(module, "fxviz_gradient_outputs", ())


def check_outputs(
    reference: Callable[..., Any],
    candidate: Callable[..., Any],
    inputs_list: Sequence[tuple],
    *,
    expected_to_differ: bool = False,
) -> CheckResult:
    """Run both callables on every input tuple and compare their outputs."""
    return compare_outputs(
        run_outputs(reference, inputs_list),
        run_outputs(candidate, inputs_list),
        expected_to_differ=expected_to_differ,
    )


def compare_outputs(
    expected: Sequence[Any], actual: Sequence[Any], *, expected_to_differ: bool = False, example_only: bool = False
) -> CheckResult:
    """Compare two lists of outputs (one per input) leaf by leaf; see the module doc.
    ``example_only``: outputs of other sizes (or structure) on inputs after the first (a
    capture's example) alone, all else matching, are "example only", not a mismatch."""
    worst_abs = worst_rel = worst_ratio = 0.0
    allowed_abs, rtol = 0.0, 0.0
    problems: list[str] = []
    compared = unscaled = empty = 0
    sizes_beyond_example = True  # every problem is a size or structure on an input after the first
    for i, (exp, act) in enumerate(zip(expected, actual, strict=True)):
        for path, e, a, problem, floor in _pairs(exp, act, f"input {i}: output"):
            if problem:
                problems.append(problem)
                sizes_beyond_example &= i > 0
                worst_abs = worst_rel = math.inf
                continue
            abs_err, scale, leaf_rtol = _leaf_error(e, a)
            scale = max(scale, floor)
            if scale == 0 and abs_err == 0 and (e.is_floating_point() or e.is_complex()):
                unscaled, empty = unscaled + 1, empty + (e.numel() == 0)  # all zero or empty in both: no scale
                continue
            compared += 1
            allowed = leaf_rtol * scale
            ratio = abs_err / allowed if allowed else (math.inf if abs_err else 0.0)
            worst_abs = max(worst_abs, abs_err)
            worst_rel = max(worst_rel, abs_err / scale if scale else (math.inf if abs_err else 0.0))
            if ratio >= worst_ratio:
                worst_ratio, allowed_abs, rtol = ratio, allowed, leaf_rtol
            if ratio > 1:
                problems.append(f"{path}: max abs error {abs_err:.3g} (scale {scale:.3g})")
                sizes_beyond_example = False
    if problems and sizes_beyond_example and example_only:
        status = "example only"
        message = f"{EXAMPLE_ONLY}: on random inputs of the example's shapes, " + "; ".join(problems[:3]) + f". {EXAMPLE_ONLY_WHY}"
    elif not (problems or compared):
        status = "nothing compared"
        message = nothing_compared(len(expected), empty=empty == unscaled, tensors=unscaled)
    elif expected_to_differ:
        status = "expected to differ"
        message = "a semantics-changing pass was applied; " + (
            f"outputs differ (max abs {worst_abs:.3g})" if problems else "outputs still match within tolerance")
    elif problems:
        status, message = "mismatch", "outputs differ beyond tolerance: " + "; ".join(problems[:3])
    else:
        skipped = f"; {unscaled} all-zero or empty output(s) not compared" if unscaled else ""
        status, message = "match", f"outputs match (inputs tried: {len(expected)}, max abs {worst_abs:.3g}, max rel {worst_rel:.3g}){skipped}"
    return CheckResult(status, worst_abs, worst_rel, allowed_abs, rtol, len(expected), message)


def _pairs(expected: Any, actual: Any, path: str, floor: float = 0.0) -> Iterator[tuple[str, Any, Any, str | None, float]]:
    """``(path, expected, actual, problem, floor)`` for each tensor leaf (``floor``: the
    smallest scale to judge it by), and one entry with a ``problem`` message for each
    place where the structures or plain values differ."""
    if isinstance(expected, (Gradients, GradientTuple)):
        values = expected.values() if isinstance(expected, Gradients) else expected
        floor = GRADIENT_FLOOR * max((peak(g) for g in values
                                      if isinstance(g, torch.Tensor) and g.is_floating_point() and g.numel()),
                                     default=0.0)
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            yield path, None, None, f"{path}: expected a sequence of {len(expected)}, got {_describe(actual)}", 0.0
            return
        for i, (e, a) in enumerate(zip(expected, actual)):
            yield from _pairs(e, a, f"{path}[{i}]", floor)
    elif isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            yield path, None, None, f"{path}: expected keys {sorted(map(str, expected))}, got {_describe(actual)}", 0.0
            return
        for key in expected:
            yield from _pairs(expected[key], actual[key], f"{path}[{key!r}]", floor)
    elif isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape:
            problem = f"{path}: expected a tensor of shape {tuple(expected.shape)}, got {_describe(actual)}"
            yield path, None, None, problem, 0.0
        else:
            yield path, expected, actual, None, floor
    elif expected != actual:
        yield path, None, None, f"{path}: expected {expected!r}, got {actual!r}", 0.0


def _leaf_error(expected: torch.Tensor, actual: torch.Tensor) -> tuple[float, float, float]:
    """``(max abs error, max |expected|, rtol)``; NaN and inf must sit at the same
    places with the same values, or the error is infinite."""
    tol = tolerance(expected.dtype, tf32=expected.is_cuda and tf32_enabled())
    e, a = expected.detach().cpu(), actual.detach().cpu().to(expected.dtype)
    if e.numel() == 0:
        return 0.0, 0.0, tol
    if not (e.is_floating_point() or e.is_complex()):  # exact; bool has no abs()
        return (0.0 if torch.equal(e, a) else math.inf), float(e.to(torch.int64).abs().max()), tol
    if e.is_floating_point() and (error := finite_error(e, a)) is not None:  # all finite: no masks, no float64 copies
        return error, peak(e), tol
    finite = torch.isfinite(e)
    if not bool(finite.all()):  # masks copy: only where expected has NaN or inf (a judgement's 1000 gradients)
        if not (torch.equal(e[~finite].nan_to_num(), a[~finite].nan_to_num()) and bool((e.isnan() == a.isnan()).all())):
            return math.inf, 0.0, tol
        e, a = e[finite], a[finite]
    if not bool(torch.isfinite(a).all()):
        return math.inf, 0.0, tol
    if e.numel() == 0:
        return 0.0, 0.0, tol
    wide = torch.complex128 if e.is_complex() else torch.float64
    return float((e.to(wide) - a.to(wide)).abs().max()), float(e.abs().max()), tol


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__


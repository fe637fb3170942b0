"""Capture: a model, function or exported program in, GraphModule(s) with module paths out.

One module per method (:mod:`.symbolic`, :mod:`.export`, :mod:`.make_fx`, :mod:`.dynamo`);
:func:`capture` picks one, or with ``tracer="auto"`` tries them in order of fidelity
and records why each earlier one failed. Every node gets ``node.meta["module_path"]``
(``''`` top level, ``None`` for the output) and, where the front-end knows it,
``node.meta["source"]`` (``file:line`` of the model's code).
"""
from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.fx
from torch import nn

from fxviz.capture import dynamo, export, export_joint, make_fx, symbolic
from fxviz.capture._common import Capture, as_inputs, called_as, caller, cell_name, first_line, torch_errors_quiet, where
from fxviz.capture.gradients import with_gradients
from fxviz.capture.outputs import with_plain_outputs
from fxviz.errors import TraceError, UsageError

#: The order ``tracer="auto"`` tries: module-level graph first, dynamo's split graphs last.
AUTO_ORDER = ("symbolic", "export", "export (strict)", "make_fx", "dynamo")
#: Chosen by name only: torch.export's joint forward+backward graph of a model whose output is a loss.
METHODS = ("auto", *AUTO_ORDER, "export (joint)")

__all__ = ["AUTO_ORDER", "Capture", "as_inputs", "called_as", "capture", "cell_name", "trace"]


@torch_errors_quiet()
def capture(
    model: nn.Module | Callable[..., Any] | torch.export.ExportedProgram | str,
    example_inputs: Any = None,
    *,
    tracer: str | type[torch.fx.Tracer] | torch.fx.Tracer = "auto",
    leaf_modules: Iterable[str | type[nn.Module]] = (),
    lower: Iterable[str | type[nn.Module]] = (),
    concrete_args: dict[str, Any] | None = None,
    fallback: bool = False,
    module: nn.Module | None = None,
) -> Capture:
    """Capture ``model`` with ``tracer`` (see :func:`trace`); the record says how."""
    inputs = _distinct(as_inputs(example_inputs))
    if export.is_exported(model):
        return Capture([export.from_program(export.load(model))], "exported program")
    symbolic_options = {"leaf_modules": leaf_modules, "lower": lower, "concrete_args": concrete_args,
                        "fallback": fallback}
    if tracer != "auto":
        if tracer not in METHODS and not _is_tracer(tracer):
            raise TraceError(f"Unknown tracer {tracer!r}: use one of {', '.join(map(repr, METHODS))} "
                             "or a torch.fx.Tracer subclass.")
        if tracer != "symbolic" and not _is_tracer(tracer) and (leaf_modules or lower or concrete_args):
            raise TraceError("leaf_modules, lower and concrete_args apply to the symbolic tracer only; "
                             f"{tracer} always traces down to ATen operators.")
        try:
            return _one(tracer, model, inputs, module, symbolic_options)
        except TraceError as exc:  # name the call the user wrote, as the messages below do
            if not str(exc).startswith(f"{caller()}("):
                exc.args = (f"{caller()}(...): {exc}",)
            raise
    attempts: list[tuple[str, str]] = []
    errors: list[TraceError] = []
    for method in AUTO_ORDER:
        reason = _skip_reason(method, model, inputs)
        if reason:
            attempts.append((method, f"skipped: {reason}"))
            continue
        start = time.perf_counter()
        try:
            result = _one(method, model, inputs, module, symbolic_options)
            if inputs:
                _runs(result, inputs)
        except TraceError as exc:
            spent = f" [{time.perf_counter() - start:.1f} s]"
            attempts.append((method, str(exc).splitlines()[0] + _detail(exc) + spent))
            errors.append(exc)
            continue
        result.attempts = attempts
        for gm in result.graphs:
            gm.meta["fxviz"]["attempts"] = attempts
        return result
    raise _own_failure(model, inputs) or _all_failed(model, attempts, errors)


def trace(
    model: nn.Module | Callable[..., Any] | torch.export.ExportedProgram | str,
    example_inputs: Any = None,
    **options: Any,
) -> torch.fx.GraphModule:
    """Capture ``model`` into a GraphModule whose nodes know their module path.

    ``model``: an ``nn.Module``, a plain function (make_fx), an ``ExportedProgram`` or
    a ``.pt2`` path. ``tracer``: ``"auto"`` (default: symbolic, then torch.export
    non-strict and strict, make_fx, dynamo; ``gm.meta["fxviz"]["attempts"]`` says why
    earlier ones failed), one of those by name, ``"export (joint)"`` (a model whose
    output is a scalar loss, as torch.export's forward+backward graph), or a
    ``torch.fx.Tracer`` subclass or instance. With dynamo the first graph is returned; ``gm.meta["fxviz"]`` lists the
    graph breaks (use :func:`capture` for all graphs).

    Symbolic only: ``leaf_modules`` (paths or types kept as one node), ``lower`` (types
    traced *through*), ``concrete_args``, ``fallback=True`` (retry with the failing
    submodule as a leaf; ``gm.meta["fxviz"]["leaves_added"]``). ``module``: with make_fx
    and a plain function, the model it calls (found in its closure when not given).

    The GraphModule shares parameters and buffers with ``model``; the model is never changed.
    """
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise UsageError(f"trace() has no option {', '.join(map(repr, unknown))}; "
                         f"its options are: {', '.join(_OPTIONS)}.")
    return capture(model, example_inputs, **options).gm


# help(trace) and Jupyter's Shift-Tab show capture's keyword arguments, declared once there.
trace.__signature__ = inspect.signature(capture).replace(return_annotation="torch.fx.GraphModule")
_OPTIONS = [p.name for p in trace.__signature__.parameters.values() if p.kind == p.KEYWORD_ONLY]


def _distinct(inputs: tuple) -> tuple:
    """The same tensor passed twice (``model(ids, mask, ids)``) would make export and
    make_fx specialise the graph to that aliasing, wrong on any other inputs: capture
    from a copy of each repeat."""
    seen: set[int] = set()
    out = []
    for value in inputs:
        if isinstance(value, torch.Tensor) and id(value) in seen:
            value = value.clone()
        seen.add(id(value))
        out.append(value)
    return tuple(out)


def _is_tracer(tracer: Any) -> bool:
    return isinstance(tracer, torch.fx.Tracer) or (isinstance(tracer, type) and issubclass(tracer, torch.fx.Tracer))


def _one(method: Any, model: Any, inputs: tuple, module: nn.Module | None, options: dict) -> Capture:
    if method == "symbolic" or _is_tracer(method):
        return Capture([symbolic.capture(model, tracer=method, **options)], "symbolic")
    if method in ("export", "export (strict)", "export (joint)"):
        if not isinstance(model, nn.Module):
            raise TraceError(f"torch.export needs an nn.Module, got {type(model).__name__}: use tracer='make_fx'.")
        if method == "export (joint)":
            return Capture([export_joint.capture(model, inputs)], method, reference=export_joint.reference(model))
        plain = with_plain_outputs(model)
        return Capture([export.capture(plain, inputs, strict=method != "export")], method, reference=plain)
    if method == "make_fx":
        plain = with_plain_outputs(model) if isinstance(model, nn.Module) else with_gradients(model, module)
        gm = make_fx.capture(plain, inputs, module)
        if gm.meta["fxviz"].get("gradient_outputs") and plain is not model:
            plain.fxviz_gradient_outputs = gm.meta["fxviz"]["gradient_outputs"]  # for the check (run_outputs)
        return Capture([gm], "make_fx", reference=plain)
    if not inputs:
        raise TraceError("dynamo captures by running the model: pass example_inputs.")
    return dynamo.capture(model, inputs)


def _runs(result: Capture, inputs: tuple) -> None:
    """A capture that cannot run on the inputs it was made for is no capture (symbolic
    tracing bakes in Python values and misses shape errors): try the next method."""
    from fxviz._runtime import preserved_buffers

    gm = result.gm
    args = gm.meta["fxviz"].get("graph_inputs", inputs)
    try:
        with torch.no_grad(), preserved_buffers(gm):
            gm.forward(*args)
    except Exception as exc:
        raise TraceError(f"{result.method} captured a graph that fails on the example inputs{where(exc)}\n"
                         f"  {first_line(exc)}") from exc


def _skip_reason(method: str, model: Any, inputs: tuple) -> str | None:
    if method != "symbolic" and not inputs:
        return "needs example inputs"
    if method in ("symbolic", "export", "export (strict)") and not isinstance(model, nn.Module):
        return "needs an nn.Module (this is a plain function)"
    return None


def _detail(exc: TraceError) -> str:
    lines = str(exc).splitlines()
    return f" ({lines[1].strip()})" if len(lines) > 1 and not lines[1].strip().startswith("What to do") else ""


def _own_failure(model: Any, inputs: tuple) -> TraceError | None:
    """When every method failed, the model itself may not run on these inputs: say that
    (with its line) rather than five capture errors."""
    from fxviz._runtime import preserved_buffers, untouched

    if not inputs:
        return None
    kept = preserved_buffers(model) if isinstance(model, nn.Module) else untouched(model)
    try:  # a plain function may be a training step: it needs autograd
        with torch.set_grad_enabled(not isinstance(model, nn.Module)), kept:
            model(*inputs)
    except Exception as exc:
        name = getattr(model, "__name__", type(model).__name__)
        error = TraceError(f"{caller()}(...): {name} itself fails on the example inputs{where(exc)}\n"
                           f"  {first_line(exc)}\n  What to do: pass inputs the model accepts.")
        error.__cause__ = exc
        return error
    return None


def _all_failed(model: Any, attempts: list[tuple[str, str]], errors: list[TraceError]) -> TraceError:
    if len(errors) == 1 and not any(reason.startswith("skipped: needs an nn") for _, reason in attempts):
        # Only one method could run (the others need example inputs): its own advice holds.
        skipped = [m for m, reason in attempts if reason.startswith("skipped")]
        return TraceError(f"{errors[0]}\n  Or pass example inputs: then {', '.join(skipped)} are tried too.")
    name = getattr(model, "__name__", type(model).__name__)
    tried = "\n".join(f"  - {method}: {reason}" for method, reason in attempts)
    error = TraceError(f"{caller()}(...) could not capture {name} with any method:\n{tried}\n"
                       "  What to do: make the model run on the example inputs as given; replace Python "
                       "branches on tensor values with torch.where or torch.cond.")
    if errors:
        error.__cause__ = errors[0]
    return error

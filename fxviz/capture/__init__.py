"""Capture: a model, function or exported program in, GraphModule(s) with module paths out.

One module per method (:mod:`.symbolic`, :mod:`.export`, :mod:`.make_fx`, :mod:`.dynamo`,
:mod:`.export_joint`), each declaring itself with :func:`._common.front_end`; this package
imports every module of itself, so a new front-end is one module. :func:`capture` picks one,
or with ``tracer="auto"`` tries them in order of fidelity within ``capture_timeout`` and
records why each earlier one failed. Every node gets ``node.meta["module_path"]`` (``''``
top level, ``None`` for the output) and, where the front-end knows it, ``node.meta["source"]``
(``file:line`` of the model's code).
"""
from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.fx
from torch import nn

from fxviz.capture import data_dependent, dynamo, export, keywords, names
from fxviz.capture.model_failure import own_failure
from fxviz.capture._common import (Capture, FrontEnd, Request, as_inputs, auto_order, choose, first_line,
                                   forget_front_end, front_end, front_ends, methods, torch_errors_quiet)
from fxviz.capture.info import GraphInfo, graph_info
from fxviz.capture.places import called_as, caller, cell_name, where
from fxviz.background._gc import gc_paused
from fxviz._runtime import containers_kept, fresh_inputs, inputs_kept
from fxviz._torch_internals import uncompiled
from fxviz.discovery import import_modules
from fxviz.errors import FxvizError, TraceError, UsageError

MODULES = import_modules(__name__, __path__)
#: Seconds ``tracer="auto"`` may spend: after a failure past it, later methods are not tried.
CAPTURE_TIMEOUT = 60.0

__all__ = ["CAPTURE_TIMEOUT", "OPTIONS", "Capture", "FrontEnd", "GraphInfo", "Request", "as_inputs", "auto_order", "called_as",
           "capture", "cell_name", "forget_front_end", "front_end", "front_ends", "graph_info", "methods", "trace"]


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
    capture_timeout: float | None = CAPTURE_TIMEOUT,
    kwargs: dict[str, Any] | None = None,
) -> Capture:
    """Capture ``model`` with ``tracer`` (see :func:`trace`); the record says how.

    The cyclic collector is paused meanwhile: a tracer makes objects that all stay
    alive (nodes, their metadata), and collections triggered by making them rescan them
    over and over (measured: capture 0.55-0.74x as long at 30k-100k nodes). The
    cycles a trace leaves are freed at the next full collection. The model's caches
    are left as they were (:func:`~fxviz._runtime.containers_kept`)."""
    with gc_paused(), containers_kept(model), inputs_kept((example_inputs, kwargs)):  # make_fx, dynamo: real runs
        return _capture(model, example_inputs, dict(kwargs or {}), tracer, capture_timeout,
                        {"leaf_modules": leaf_modules, "lower": lower, "concrete_args": concrete_args,
                         "fallback": fallback, "module": module})


def _capture(model: Any, example_inputs: Any, kwargs: dict[str, Any], tracer: Any, capture_timeout: float | None,
             options: dict[str, Any]) -> Capture:
    model = uncompiled(model)
    if not callable(model) and not export.is_exported(model):
        raise UsageError(f"{caller()}(...) needs a model to capture: an nn.Module, a function over tensors, a "
                         f"torch.export ExportedProgram or the path of a .pt2 file; got {type(model).__name__} "
                         f"({str(model)[:80]!r}).")
    if export.is_exported(model):
        result = Capture([export.from_program(export.load(model))], "exported program")
        names.describe_outputs(result.gm)
        return result
    args = as_inputs(example_inputs)
    keywords.check(model, args, kwargs)
    inputs = _distinct(keywords.flat(args, kwargs))
    options = {**options, "keywords": tuple(kwargs), "listed": isinstance(example_inputs, list)}
    if tracer == "auto":
        return _auto(model, inputs, options, capture_timeout)
    try:
        chosen = choose("symbolic" if _is_tracer(tracer) else tracer)
        _refuse_options(chosen, options)
        reason = chosen.why_not(model, inputs)
        if reason:
            raise TraceError(_advice(chosen, model, reason))
        try:
            return chosen(_request(chosen, model, inputs, tracer, options))
        except TraceError as exc:  # as with "auto": a model that fails on its own is not the tracer's failure
            raise _own_failure(model, inputs, options) or exc
    except TraceError as exc:  # name the call the user wrote, as the messages below do
        if not str(exc).startswith(f"{caller()}("):
            exc.args = (f"{caller()}(...): {exc}",)
        raise


def _auto(model: Any, inputs: tuple, options: dict[str, Any], timeout: float | None) -> Capture:
    """Each front-end of the auto chain in turn, until one captures a graph that runs.
    The budget is checked between attempts (an attempt is never interrupted: torch's state
    would be left half-changed): once one fails past it, the rest are listed as not tried."""
    with data_dependent.kept():
        return _tried(model, inputs, options, timeout)


def _tried(model: Any, inputs: tuple, options: dict[str, Any], timeout: float | None) -> Capture:
    """:func:`_auto`'s chain; a method that would stop where torch.export stopped on a
    data-dependent value is skipped, saying so (:mod:`.data_dependent`)."""
    attempts: list[tuple[str, str]] = []
    errors: list[TraceError] = []
    began = time.perf_counter()
    order = auto_order()
    for i, method in enumerate(order):
        chosen = choose(method)
        reason = chosen.why_not(model, inputs) or data_dependent.why_skip(method)
        if reason:
            attempts.append((method, f"skipped: {reason}"))
            continue
        start = time.perf_counter()
        try:
            result = chosen(_request(chosen, model, inputs, method, options))
            if inputs:
                _runs(result, inputs)
            exc = None
        except TraceError as failed:
            exc = failed
        except FxvizError:  # the user's to fix (an input the program does not take): no method would do
            raise
        except Exception as failed:  # front-ends raise TraceError for the capture itself: this came after it
            exc = TraceError(f"{method} captured, then fxviz failed processing its graph: {first_line(failed)}")
            exc.__cause__ = failed
        if exc is not None:
            data_dependent.note(method, exc)
            spent = f" [{time.perf_counter() - start:.1f} s]"
            attempts.append((method, str(exc).splitlines()[0] + _detail(exc) + spent))
            errors.append(exc)
            elapsed = time.perf_counter() - began
            if timeout is not None and elapsed > timeout and i + 1 < len(order):
                attempts.extend((later, "not tried: out of time") for later in order[i + 1:])
                raise _own_failure(model, inputs, options) or _out_of_time(model, attempts, elapsed, timeout, exc)
            continue
        result.attempts = attempts
        if result.method == "dynamo":
            result.note = dynamo.split_note(getattr(model, "__name__", type(model).__name__), result, attempts)
        for gm in result.graphs:
            graph_info(gm).attempts = attempts
        return result
    raise _own_failure(model, inputs, options) or _all_failed(model, attempts, errors)


def trace(
    model: nn.Module | Callable[..., Any] | torch.export.ExportedProgram | str,
    example_inputs: Any = None,
    **options: Any,
) -> torch.fx.GraphModule:
    """Capture ``model`` into a GraphModule whose nodes know their module path.

    ``model``: an ``nn.Module``, a plain function (make_fx), an ``ExportedProgram`` or
    a ``.pt2`` path. ``example_inputs``: the positional inputs (a tuple, or one tensor);
    ``kwargs``: the keyword ones (``{"decoder_input_ids": ids}``); the graph takes them
    all positionally, the keyword ones last. ``tracer``: ``"auto"`` (default: symbolic, then torch.export
    non-strict and strict, make_fx, dynamo; ``graph_info(gm).attempts`` says why
    earlier ones failed), one of those by name, ``"export (joint)"`` (a model whose
    output is a scalar loss, as torch.export's forward+backward graph), or a
    ``torch.fx.Tracer`` subclass or instance (:func:`methods` lists the names). With dynamo
    the largest graph is returned (the one a Session opens, ``Capture.shown``);
    ``graph_info(gm).graph_breaks`` lists the graph breaks (use :func:`capture` for all
    graphs). ``capture_timeout``: seconds ``"auto"`` may spend;
    once a method fails past them the later ones are not tried and the error says how long
    each took (None: no limit; a method is never interrupted).

    Symbolic only: ``leaf_modules`` (paths or types kept as one node), ``lower`` (types
    traced *through*), ``concrete_args``, ``fallback=True`` (retry with the failing
    submodule as a leaf; ``graph_info(gm).leaves_added``). ``module``: with make_fx
    and a plain function, the model it calls (found in its closure when not given).

    The GraphModule shares parameters and buffers with ``model``; the model is never changed.
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise UsageError(f"trace() has no option {', '.join(map(repr, unknown))}; "
                         f"its options are: {', '.join(OPTIONS)}.")
    return capture(model, example_inputs, **options).gm


# help(trace) and Jupyter's Shift-Tab show capture's keyword arguments, declared once there.
trace.__signature__ = inspect.signature(capture).replace(return_annotation="torch.fx.GraphModule")
#: capture's and trace's keyword options
OPTIONS = tuple(p.name for p in trace.__signature__.parameters.values() if p.kind == p.KEYWORD_ONLY)


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


def _request(chosen: FrontEnd, model: Any, inputs: tuple, tracer: Any, options: dict[str, Any]) -> Request:
    return Request(model, inputs, chosen.name, tracer, {k: options[k] for k in chosen.options}, options["keywords"])


def _own_failure(model: Any, inputs: tuple, options: dict[str, Any]) -> TraceError | None:
    return own_failure(keywords.keywords_last(model, options["keywords"]), inputs, options["listed"])


def _given(options: dict[str, Any]) -> list[str]:
    """The options the user set (not left at their empty defaults)."""
    return [k for k, v in options.items() if k not in ("keywords", "listed")
            and v is not None and v is not False and not (isinstance(v, (tuple, list, dict, set)) and not v)]


def _refuse_options(chosen: FrontEnd, options: dict[str, Any]) -> None:
    unused = [k for k in _given(options) if k not in chosen.options]
    if unused:
        takers = [name for name, f in front_ends().items() if set(unused) & set(f.options)]
        raise TraceError(f"{', '.join(unused)} {'applies' if len(unused) == 1 else 'apply'} to tracer "
                         f"{' or '.join(map(repr, takers))} only, not {chosen.name!r}: drop "
                         f"{'it' if len(unused) == 1 else 'them'} or use that tracer.")


def _advice(chosen: FrontEnd, model: Any, reason: str) -> str:
    if reason == "needs example inputs":
        return f"{chosen.name} captures by running the model: pass example_inputs."
    functions = [name for name, f in front_ends().items() if not f.needs_module]
    return (f"{chosen.name} needs an nn.Module, got {type(model).__name__}: to trace a plain function use "
            f"tracer={' or '.join(map(repr, functions))}.")


def _runs(result: Capture, inputs: tuple) -> None:
    """A capture that cannot run on the inputs it was made for is no capture (symbolic
    tracing bakes in Python values and misses shape errors): try the next method. The run
    is the annotated one a Session's step 0 needs (``result.first_run``): one forward, not two.
    A graph that carries its shapes (export's, make_fx's: traced through the ops themselves)
    is not run: its check runs it (:func:`~fxviz.annotation.known_shapes.unrun`)."""
    from fxviz.checks.check import seeded
    from fxviz.annotation.known_shapes import unrun
    from fxviz.annotation.shapes import annotated_run

    gm = result.gm
    ran = graph_info(gm).graph_inputs
    args = inputs if ran is None else ran
    result.first_run = unrun(gm, args)
    if result.first_run is not None:
        return
    try:
        with seeded(args):  # a copy: capture() puts back inputs a run writes into, its output may be one
            result.first_run = annotated_run(gm, fresh_inputs(args))
    except Exception as exc:
        cause = exc.__cause__ or exc  # the node's own error, not the annotator's wrapping
        raise TraceError(f"{result.method} captured a graph that fails on the example inputs{where(cause)}\n"
                         f"  {first_line(cause)}") from exc


def _detail(exc: TraceError) -> str:
    lines = str(exc).splitlines()
    return f" ({lines[1].strip()})" if len(lines) > 1 and not lines[1].strip().startswith("What to do") else ""


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


def _out_of_time(model: Any, attempts: list[tuple[str, str]], elapsed: float, timeout: float,
                 cause: TraceError) -> TraceError:
    name = getattr(model, "__name__", type(model).__name__)
    tried = "\n".join(f"  - {method}: {reason}" for method, reason in attempts)
    untried = [method for method, reason in attempts if reason == "not tried: out of time"]
    error = TraceError(f"{caller()}(...) could not capture {name} within capture_timeout={timeout:g} s "
                       f"({elapsed:.1f} s spent):\n{tried}\n  What to do: try the next method by name "
                       f"(tracer={untried[0]!r}), or allow more time (capture_timeout=None: no limit).")
    error.__cause__ = cause
    return error

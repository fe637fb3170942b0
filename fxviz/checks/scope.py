"""What a step's check covered, said where it is less than "match" suggests.

Two ways a check can claim more than it tested: a graph that runs on its example and
fails on other data the model runs (a capture that baked in the example's sizes), and
one of dynamo's graphs (a model cut at graph breaks) whose check covers that graph alone.
"""
from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch.fx

from fxviz.capture.info import graph_info
from fxviz.checks.check import CheckResult, compare_outputs, run_outputs
from fxviz.checks.inputs import EXAMPLE_ONLY, EXAMPLE_ONLY_WHY
from fxviz.checks.truth import against_float64, float64_outputs


def check_graph(gm: torch.fx.GraphModule, check_inputs: Sequence[tuple], reference: Callable[[], list], first: Any,
                fresh: bool, differs: bool, captured: Callable[[], bool],
                model: Callable[[], Any] = lambda: None,
                model_inputs: Callable[[], Sequence[tuple]] | None = None) -> tuple[CheckResult, list]:
    """A step's check: ``gm`` against the model's outputs (``reference()``) on
    ``check_inputs``, the example first; ``first``: ``gm``'s output on it, kept from the run
    that proved it runs unless ``fresh`` is False (the model's tensors changed since);
    ``differs``: a semantics-changing pass was applied; ``captured()``: whether a graph right
    on the example alone is the capture's doing (step 0, or a later step when step 0 is
    "example only"); a pass's doing is a mismatch; ``model()``: what ``reference()`` runs, or None:
    on a mismatch it runs in float64 (:mod:`fxviz.checks.truth`), and a step no further from that
    than float32 eager is matches; ``model_inputs()``: what ``reference()`` ran it on, when not ``check_inputs``
    (a pass that converted them: float64 runs on the reference's, and float32 eager's own error is the larger
    on either: channels_last's BatchNorm rounds otherwise). The result, and ``gm``'s outputs ([] if it failed)."""
    try:
        expected = reference()
    except Exception as exc:  # a state the badge shows, never an exception lost in a thread
        return CheckResult.failed("running the original model for the check", exc, len(check_inputs),
                                  "Call it on the example inputs in a cell to see the traceback; "
                                  "if only the example inputs work, use n_random_inputs=0."), []
    drew: list = []  # a True for each run of ``gm`` that drew random numbers
    try:
        rest = run_outputs(gm, check_inputs[1:] if fresh else check_inputs, drew=drew)
    except Exception as exc:  # ran on the example inputs, fails on a random one
        example = (lambda: first) if fresh else (lambda: run_outputs(gm, check_inputs[:1])[0])
        return failed_beyond_example(exc, expected, example, captured), []
    outputs = [first, *rest] if fresh else rest
    result = compare_outputs(expected, outputs, expected_to_differ=differs, example_only=True)
    if result.status == "example only" and not captured():
        result = compare_outputs(expected, outputs, expected_to_differ=differs)
    if result.status == "mismatch":
        root = model()
        if root is not None:
            inputs = check_inputs if model_inputs is None else model_inputs()
            result = against_float64(result, expected, outputs, lambda: _truth(root, inputs, check_inputs))
    return _seeded_note(result, gm, bool(drew)), outputs


def _truth(model: Any, inputs: Sequence[tuple], converted: Sequence[tuple]) -> tuple | None:
    """:func:`float64_outputs` on the model's inputs, and where a pass converted them (other
    strides) the model's float32 outputs on the converted ones: float32's rounding too."""
    runs = float64_outputs(model, inputs)
    return runs if runs is None or converted is inputs else (*runs, run_outputs(model, converted))


#: Ops that draw from torch's random stream (aten's and torch's names, in-place forms too).
_RANDOM = re.compile(r"^(rand|randn|randint|randperm|rand_like|randn_like|randint_like|bernoulli|normal|uniform|"
                     r"exponential|geometric|cauchy|log_normal|multinomial|native_dropout|rrelu_with_noise)_?$")

_DROPOUTS = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d, torch.nn.AlphaDropout,
             torch.nn.FeatureAlphaDropout)


def _seeded_note(result: CheckResult, gm: torch.fx.GraphModule, drew: bool = False) -> CheckResult:
    """A match of a graph that draws random numbers (ViT-MAE's masking, dropout in
    training) says that both ran from one seed: it shows the same computation, and
    another seed would draw other numbers in both. ``drew``: a run of it drew (the generator
    moved): its ops whose names say they may are named too (``F.dropout``, ``drop_block2d``)."""
    drawn = sorted({name for node in gm.graph.nodes
                    if (name := _draw(gm, node)) or drew and (name := _may_draw(gm, node))})
    if result.status != "match" or not (drawn or drew):
        return result
    named = f" ({', '.join(drawn[:3])})" if drawn else ""
    return dataclasses.replace(result, message=(
        f"{result.message}; the graph draws random numbers{named}: the model and the graph ran "
        "from the same seed on each input, so both drew the same ones"))


#: Names of ops that may draw, by what their code does in training (dropout, drop_path, drop_block2d, stochastic_depth).
_MAY_DRAW = re.compile(r"drop|stochastic|bernoulli|rand|noise", re.IGNORECASE)


def _may_draw(gm: torch.fx.GraphModule, node: torch.fx.Node) -> str | None:
    """The name of an op whose name says it may draw, or None; not a Dropout module, which :func:`_draw` judges."""
    if node.op == "call_module" and isinstance(gm.get_submodule(str(node.target)), _DROPOUTS):
        return None
    name = _target_name(gm, node)
    return name if _MAY_DRAW.search(name) else None


def _target_name(gm: torch.fx.GraphModule, node: torch.fx.Node) -> str:
    """What ``node`` calls, by name: a module's class, a function's or operator's name, a method."""
    if node.op == "call_module":
        return type(gm.get_submodule(str(node.target))).__name__
    return str(getattr(node.target, "__name__", node.target)).split(".")[0] if node.op.startswith("call_") else ""


def _draw(gm: torch.fx.GraphModule, node: torch.fx.Node) -> str | None:
    """The name of the random op ``node`` runs, or None."""
    if node.op == "call_module":
        module = gm.get_submodule(str(node.target))
        random = isinstance(module, _DROPOUTS) and module.training and module.p > 0
        return type(module).__name__ if random else None
    name = _target_name(gm, node)
    return name if node.op in ("call_function", "call_method") and _RANDOM.match(name) else None


def failed_beyond_example(exc: BaseException, reference: list, example_output: Callable[[], Any],
                          captured: Callable[[], bool] = lambda: True) -> CheckResult:
    """The check of a graph that ran on the example and failed (``exc``) on a random
    input the model ran (``reference``: its outputs): "example only" when the graph
    matches the model on the example and that is the capture's doing (``captured()``),
    else a mismatch saying where it failed."""
    n_inputs = len(reference)
    failure = f"{type(exc).__name__}: {exc}"
    try:
        on_example = compare_outputs(reference[:1], [example_output()]).status if captured() else "mismatch"
    except Exception:  # the graph fails on the example too now (the model's weights changed since)
        on_example = "mismatch"
    if on_example in ("match", "nothing compared"):
        return CheckResult("example only", math.inf, math.inf, 0.0, 0.0, n_inputs,
                           f"{EXAMPLE_ONLY}: the graph fails on a random input of the example's shapes that the "
                           f"model runs ({failure}). {EXAMPLE_ONLY_WHY}")
    return CheckResult("mismatch", math.inf, math.inf, 0.0, 0.0, n_inputs,
                       f"fails on a random input of the example's shapes: {failure}")


def graph_scope(result: CheckResult, gm: torch.fx.GraphModule) -> CheckResult:
    """``result`` saying which graph it covered when ``gm`` is one of several (dynamo's
    graphs, cut at graph breaks): "graph 1 of 3 checked"."""
    info = graph_info(gm)
    count, index = info.graph_count, info.graph_index
    if count < 2:
        return result
    covered = f"graph {index + 1} of {count} checked"
    return dataclasses.replace(result, scope="; ".join(filter(None, [result.scope, covered])), message=(
        f"{result.message}; {covered}: the model runs as {count} graphs cut at graph breaks and this check ran "
        f"this one alone (listed as graph {index}); Session.check_all_graphs(), or 'check all {count} graphs' "
        "above the Explorer, checks each"))


def check_all_graphs(session: Any, **session_options: Any) -> list[CheckResult]:
    """One check per graph of ``session``'s capture: its own current step's for the graph
    it is open on, step 0's of a Session on each other graph (``session_options``:
    theirs). A capture of one graph gives the session's own check alone."""
    from fxviz.compiler.graphs import Compiled

    if len(session.capture.graphs) < 2:
        return [session.current.check]
    compiled = Compiled.from_capture(session.capture, **session_options)
    compiled.adopt(session)
    return graph_checks(compiled)


def graph_checks(compiled: Any, done: Callable[[int, CheckResult], Any] = lambda *_: None) -> list[CheckResult]:
    """The check of each dynamo graph of ``compiled`` (:class:`fxviz.compiler.graphs.Compiled`):
    its Session's current step's, in order; ``done(index, result)`` after each. A graph
    that cannot be opened is an "error" result saying why."""
    results = []
    for graph in compiled.graphs:
        try:
            result = compiled.session(graph.index).current.check
        except Exception as exc:  # a graph that cannot open is a result, not the end of the list
            result = CheckResult.failed(f"opening graph {graph.index}", exc, 0, "fxviz.compiled(model, x)"
                                        f".session({graph.index}) opens it on its own, with the traceback.")
        results.append(result)
        done(graph.index, result)
    return results

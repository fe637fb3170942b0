"""Session: a model's history of passes (:class:`~fxviz.step.Step`), with undo, redo and a numeric check.

Step 0 is the traced model; every later step is one pass applied to the step
before it. Applying is transactional: a pass that fails, breaks the graph or
produces a graph that cannot run raises PassError and leaves the session as it
was. Steps own their module objects but share every tensor a pass did not
replace (see :mod:`fxviz._cow`), and the user's model is never changed.
"""
from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import torch
import torch.fx
from torch import nn

from fxviz import _cow
from fxviz.draw import dot
from fxviz.background._gc import gc_paused
from fxviz._runtime import fresh_inputs
from fxviz._torch_internals import uncompiled
from fxviz.checks.check import CheckResult, compare_outputs, random_like, run_outputs, seeded
from fxviz.checks.scope import check_all_graphs, check_graph
from fxviz.capture import OPTIONS as TRACE_OPTIONS, export, keywords
from fxviz.capture.info import graph_info, own_graph_info
from fxviz.errors import FxvizError, NoSuchStep, PassError, TraceError, UsageError
from fxviz.annotation.known_shapes import NOT_RUN, unrun
from fxviz.passes.registry import PassSpec, resolve, selection_names
from fxviz.annotation.shapes import annotated_run
from fxviz.step import NEEDS_REAL_TENSORS, Action, Step, first_output, has_fake_tensors

__all__ = ["Action", "OPTIONS", "Session", "Step", "split_options"]
#: Session's keyword options (those of :func:`fxviz.trace` and ``n_random_inputs``)
OPTIONS = ("n_random_inputs", *TRACE_OPTIONS)


def split_options(model: Any, args: tuple, options: dict[str, Any], own: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """``options`` (a call's ``**options``, as ``explore`` takes them) split into fxviz's
    (``own`` and :data:`OPTIONS`) and the model's keyword inputs (the others, with
    ``kwargs=``'s); a UsageError names a keyword neither takes."""
    extra = {k: v for k, v in options.items() if k not in OPTIONS and k not in own}
    ours = {k: v for k, v in options.items() if k not in extra}
    keywords.check(uncompiled(model), args, extra, options=(*own, *OPTIONS))
    return ours, {**(ours.pop("kwargs", None) or {}), **extra}


class Session:
    """A list of Steps over one model, with an editor's undo/redo.

    ``Session(model, example_inputs)`` traces step 0 (``tracer`` and
    ``trace_kwargs`` go to :func:`fxviz.trace`); ``kwargs``: the model's keyword inputs
    (``kwargs={"decoder_input_ids": ids}``), passed after ``example_inputs`` in one tuple
    (:attr:`example_inputs`) wherever fxviz runs a graph, and as keywords to the model. Every step is checked against
    the model's own outputs on the example inputs and ``n_random_inputs`` random
    inputs of the same shapes (so step 0 checks the trace), when its check is first
    read. Steps share the model's parameter tensors: train the model after creating a session
    and every step sees the new weights, and checks compare with the model as it is then.

    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    >>> session = Session(model, torch.randn(2, 4))
    >>> session.apply("fake_quantize", bits=8).check.status
    'expected to differ'
    >>> session.undo().index, session.can_redo, session
    (0, True, <Session: 2 steps, at 0 (trace)>)
    """

    def __init__(
        self,
        model: nn.Module | Callable[..., Any] | torch.export.ExportedProgram | str,
        example_inputs: Any = None,
        *,
        kwargs: dict[str, Any] | None = None,
        tracer: Any = "auto",
        n_random_inputs: int = 2,
        **trace_kwargs: Any,
    ):
        from fxviz.capture import Capture, as_inputs, called_as, capture

        unknown = sorted(set(trace_kwargs) - set(OPTIONS))
        if unknown:
            raise UsageError(f"Session() has no option {', '.join(map(repr, unknown))} (its options: "
                             f"{', '.join(OPTIONS)}): the model's keyword inputs go in kwargs={{...}}.")
        if not (isinstance(n_random_inputs, int) and n_random_inputs >= 0):
            raise UsageError(f"Session(n_random_inputs=...) is a count (0 or more), not {n_random_inputs!r}.")
        inputs, kwargs = as_inputs(example_inputs), dict(kwargs or {})
        self._given = (example_inputs, kwargs)  # what replay() passes another model
        dot.prepare()  # dot starts while the model is captured
        model = uncompiled(model)
        if export.is_exported(model):
            model = export.load(model)
            inputs, kwargs = export.positional_inputs(model, inputs, kwargs), {}
        # What a Session builds besides the capture (the model's skeleton, step 0) lives as long as it
        # does: a collection meanwhile would only rescan the fresh heap (0.6-0.8 s at 100k nodes, one run in 3).
        # An exported program's reference (ep.module(): 1 s at 24 layers) is made after the first view (_reference).
        self._program = model if isinstance(model, torch.export.ExportedProgram) else None
        with gc_paused():
            self._root = None if self._program is not None else _cow.skeleton(model) if isinstance(model, nn.Module) else model
        with called_as("Session"):  # a Capture made already (one graph of fxviz.compiled) is opened as is
            if self._program is None and not isinstance(model, Capture):
                keywords.require_inputs(model, inputs, kwargs)  # concrete_args' too: torch.fx keeps them as inputs
            captured = model if isinstance(model, Capture) else capture(
                self._root if isinstance(model, nn.Module) else model, example_inputs, tracer=tracer, kwargs=kwargs,
                **trace_kwargs)
        inputs = keywords.flat(inputs, kwargs)
        with gc_paused():
            gm = captured.gm
            if captured.reference is not None:
                self._root = captured.reference
            info = graph_info(gm)
            if info.graph_inputs is not None:  # one graph of several: checked against itself, on its own inputs
                inputs, self._root = info.graph_inputs, _cow.fork(gm)
            state = {id(v) for n, v in zip(gm.graph.find_nodes(op="placeholder"), inputs) if n.meta.get("qualified_name")}
            self.capture = captured
            self.real_tensors = own_graph_info(gm).real_tensors = not has_fake_tensors(
                self._program if self._root is None else self._root, inputs)
            n_random = n_random_inputs if self.real_tensors else 0
            check_inputs = (inputs, *(random_like(inputs, seed, state) for seed in range(1, n_random + 1)))
            self._options = {"tracer": tracer, "n_random_inputs": n_random_inputs, **trace_kwargs}
            self._reference_outputs: tuple[dict, list] | None = None  # (tensor versions, outputs)
            self._reference_lock = threading.Lock()
            action = Action("trace", MappingProxyType({"tracer": captured.method, **trace_kwargs}))
            self._steps = [self._make_step(0, gm, action, check_inputs, False, "the trace", TraceError, captured.first_run)]
            captured.first_run = None  # the step's now (Step.graph empties its notes)
            self._index = 0
            self._subscribers: list[Callable[[Session], Any]] = []

    @property
    def steps(self) -> tuple[Step, ...]:
        """All steps, including those after the current one that redo would restore."""
        return tuple(self._steps)

    @property
    def index(self) -> int:
        return self._index

    @property
    def current(self) -> Step:
        return self._steps[self._index]

    @property
    def example_inputs(self) -> tuple:
        return self._steps[0].example_inputs

    @property
    def history(self) -> tuple[Action, ...]:
        """The actions that lead from step 0 to the current step."""
        return tuple(step.action for step in self._steps[1 : self._index + 1])

    @property
    def can_undo(self) -> bool:
        return self._index > 0

    @property
    def can_redo(self) -> bool:
        return self._index < len(self._steps) - 1

    def apply(self, pass_: str | PassSpec | Callable[..., Any], *, nodes: Any = None, **params: Any) -> Step:
        """Apply a pass (a registered name, a PassSpec or a function) to the current
        step and make the result the new current step; any redo tail is dropped.

        Raises PassError (the session unchanged) when the pass fails, leaves an
        invalid graph or one that cannot run, and NothingToDo when it changes nothing.
        """
        spec = resolve(pass_)
        prev = self.current
        # The copy and what the pass makes live on as the new step: a collection meanwhile only
        # rescans them (a quarter of apply at 100k nodes).
        with gc_paused():
            gm = _cow.fork(prev.gm, code_later=True)  # the pass's result is recompiled (PassSpec)
            with _cow.guard_writes(prev.gm):
                result = spec(gm, nodes=nodes, **params)
        check_inputs = prev.check_inputs
        if spec.convert_inputs is not None:
            check_inputs = tuple(spec.convert_inputs(inputs) for inputs in check_inputs)
        selection = () if nodes is None else selection_names(nodes)
        action = Action(spec.name, MappingProxyType(spec.bind(params)), selection, spec)
        differs = prev.expected_to_differ or not spec.preserves_semantics
        step = self._make_step(prev.index + 1, result.graph_module, action, check_inputs, differs,
                               f"pass '{spec.name}'", PassError)
        self._steps[self._index + 1 :] = [step]
        self._index = step.index
        self._notify()
        return step

    def goto(self, index: int) -> Step:
        """Make step ``index`` current (negative counts from the end); nothing is dropped."""
        self._index = self._at(index).index
        self._notify()
        return self.current

    def undo(self) -> Step:
        if not self.can_undo:
            raise NoSuchStep("Nothing to undo: the session is at step 0.")
        return self.goto(self._index - 1)

    def redo(self) -> Step:
        if not self.can_redo:
            raise NoSuchStep("Nothing to redo: the current step is the last one.")
        return self.goto(self._index + 1)

    def replay(self, other_model: nn.Module | Callable[..., Any], example_inputs: Any = None,
               kwargs: dict[str, Any] | None = None) -> Session:
        """A new Session on ``other_model`` with this session's history applied (on this
        session's inputs unless ``example_inputs`` or ``kwargs`` are given)."""
        given = self._given if example_inputs is None and kwargs is None else (example_inputs, kwargs)
        session = Session(other_model, given[0], kwargs=given[1], **self._options)
        for action in self.history:
            session.apply(action.spec, nodes=action.nodes or None, **action.params)
        return session

    def compare(self, i: int, j: int, **options: Any) -> Any:
        """``fxviz.compare`` of steps ``i`` and ``j``: its timings measure both steps in one
        interleaved run (``options``: its keyword arguments, e.g. ``profile_kwargs={"budget_s": 1}``)."""
        from fxviz.diff.comparison import compare

        return compare(self._at(i), self._at(j), **options)

    def _at(self, index: int) -> Step:
        """Step ``index`` (negative counts from the end), or NoSuchStep saying which there are."""
        count = len(self._steps)
        if not hasattr(index, "__index__") or not -count <= index.__index__() < count:
            raise NoSuchStep(f"There is no step {index!r}; this session has steps 0 to {count - 1}.")
        return self._steps[index.__index__()]

    def check_all_graphs(self) -> list[CheckResult]:
        """One check per graph of a model opened as several (dynamo's): ``current.check`` covers one."""
        return check_all_graphs(self, n_random_inputs=self._options["n_random_inputs"])

    def to_html(self, path: Any, **options: Any) -> Any:
        """Write the session as one self-contained HTML page, readable without a kernel;
        returns its path. ``options``: see :func:`fxviz.report.page.write_html`."""
        from fxviz.report.page import write_html

        return write_html(self, path, **options)

    def _make_step(self, index: int, gm: torch.fx.GraphModule, action: Action, check_inputs: tuple[tuple, ...],
                   differs: bool, what: str, error: type[FxvizError], first_run: tuple | None = None) -> Step:
        """One annotated run on the example inputs proves the graph runs (else ``error``,
        and nothing changes), notes what its drawing shows, and is the check's first output;
        ``first_run``: that run, made already (the capture's, :attr:`Capture.first_run`), or
        for step 0 of a graph that carries its shapes, those (:func:`~fxviz.annotation.known_shapes.unrun`)."""
        first_run = first_run or (unrun(gm, check_inputs[0]) if index == 0 else None)
        try:
            with gc_paused(), seeded(check_inputs[0]):  # linear cost on graphs of 100k nodes
                first, notes = first_run or annotated_run(gm, fresh_inputs(check_inputs[0]))  # notes, not gm's meta
        except Exception as exc:
            cause = exc.__cause__ or exc
            node = exc.node if isinstance(exc, FxvizError) else None
            where = f" at node '{node}'" if node else ""
            raise error(
                f"The graph after {what} cannot run on the example inputs{where}: "
                f"{type(cause).__name__}: {cause}. The session is unchanged.", node=node
            ) from exc

        versions = _cow.tensor_versions(gm)

        def check() -> CheckResult:
            if not self.real_tensors:
                return CheckResult("not checked", math.nan, math.nan, 0.0, 0.0, 0, NEEDS_REAL_TENSORS)
            # Drawn from its shapes, the graph runs first here; the model (whose tensors the steps share) may
            # have been trained since: then the first output is stale and everything runs again, now.
            ran, failed = first_output(gm, check_inputs, self._reference) if first is NOT_RUN else (first, None)
            if failed is not None:
                return failed
            fresh = ran is not NOT_RUN and (first is NOT_RUN or _cow.tensor_versions(gm) == versions)
            result, outputs = check_graph(gm, check_inputs, self._reference, ran, fresh, differs,
                                          lambda: index == 0 or self._steps[0].check.status == "example only", lambda: self._root,
                                          lambda: self._steps[0].check_inputs)
            return self._grad_mode_note(result, outputs) if outputs and result.status == "mismatch" and index == 0 else result

        return Step(index, gm, action, check_inputs[0], check_inputs, notes, differs, check)

    def _grad_mode_note(self, result: CheckResult, outputs: list) -> CheckResult:
        """A trace that differs from the model run without autograd (as the check runs it) but
        matches it run with autograd: the model itself computes otherwise under no_grad (a fast
        path: nn.TransformerEncoder with a padding mask zeroes the padded positions), which a
        trace does not follow. Said, rather than a bare mismatch."""
        if not isinstance(self._root, nn.Module) or \
                compare_outputs(run_outputs(self._root, self._steps[0].check_inputs, grad=True), outputs).status != "match":
            return result
        return dataclasses.replace(result, message=(
            f"{result.message}. The model itself computes otherwise without autograd (a fast path taken only "
            "under no_grad, e.g. nn.TransformerEncoder's with a padding mask), and the graph matches it run "
            "with autograd on: compare with the model called under torch.enable_grad()"))

    def _reference(self) -> list:
        """The model's own outputs on the check inputs, computed when first needed and
        again only if the model's tensors changed since."""
        with self._reference_lock:
            if self._root is None:
                self._root = export.reference(self._program)
            versions = _cow.tensor_versions(self._root)
            if self._reference_outputs is None or self._reference_outputs[0] != versions:
                self._reference_outputs = (versions, run_outputs(self._root, self._steps[0].check_inputs))
            return self._reference_outputs[1]

    def subscribe(self, callback: Callable[[Session], Any]) -> Callable[[], None]:
        """Call ``callback(session)`` after every change of steps or index; returns
        a function that unsubscribes it."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    def _notify(self) -> None:
        for callback in list(self._subscribers):
            callback(self)

    def _repr_html_(self) -> str:
        from fxviz.report.static import session_html

        return session_html(self)

    def __repr__(self) -> str:
        return f"<Session: {len(self._steps)} steps, at {self._index} ({self.current.pass_name})>"


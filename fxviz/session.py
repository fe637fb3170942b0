"""Session and Step: a model's history of passes, with undo, redo and a numeric check.

Step 0 is the traced model; every later step is one pass applied to the step
before it. Applying is transactional: a pass that fails, breaks the graph or
produces a graph that cannot run raises PassError and leaves the session as it
was. Steps own their module objects but share every tensor a pass did not
replace (see :mod:`fxviz._cow`), and the user's model is never changed.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import torch
import torch.fx
from torch import nn

from fxviz import _cow
from fxviz._gc import gc_paused
from fxviz.check import CheckResult, compare_outputs, random_like, run_outputs, seeded
from fxviz.graph import to_networkx
from fxviz.shapes import annotated_run
from fxviz.errors import FxvizError, PassError, TraceError
from fxviz.passes.registry import PassSpec, resolve, selection_names


@dataclass(frozen=True)
class Action:
    """What made a step: a pass, its parameters (defaults filled in) and the
    selected node names (empty: the whole graph). Enough to replay it."""

    pass_name: str
    params: Mapping[str, Any]
    nodes: tuple[str, ...] = ()
    spec: PassSpec | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, eq=False, repr=False)
class Step:
    """One state of the model: its GraphModule, how it was made, its annotated graph,
    and (computed on first use) how its outputs compare with the original model's."""

    index: int
    gm: torch.fx.GraphModule
    action: Action
    example_inputs: tuple
    check_inputs: tuple[tuple, ...]
    #: The annotated ``networkx.DiGraph`` (shapes, FLOPs), from the run that proved
    #: the step runs; annotation never writes to ``gm``'s nodes.
    graph: Any
    expected_to_differ: bool
    _checker: Callable[[], CheckResult] = field(repr=False)
    _profiles: dict = field(default_factory=dict)

    @property
    def pass_name(self) -> str:
        return self.action.pass_name

    @property
    def params(self) -> Mapping[str, Any]:
        return self.action.params

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.action.nodes

    @property
    def preserves_semantics(self) -> bool:
        return self.action.spec is None or self.action.spec.preserves_semantics

    @property
    def code(self) -> str:
        return self.gm.code

    @cached_property
    def check(self) -> CheckResult:
        """The numeric check against the original model on the example inputs and the
        random ones. Computed on first use: each random input costs two forwards, which
        a UI can spend in the background after drawing the step."""
        return self._checker()

    @property
    def check_done(self) -> bool:
        """Whether :attr:`check` is computed already (reading it then costs nothing)."""
        return "check" in self.__dict__

    def profile(self, **kwargs: Any) -> Any:
        """``fxviz.profile(gm, example_inputs, **kwargs)``, computed once per kwargs."""
        from fxviz.profiling import profile

        key = repr(sorted(kwargs.items()))
        if self.gm.meta.get("fxviz", {}).get("real_tensors") is False:
            raise FxvizError(f"Cannot time this step: {NEEDS_REAL_TENSORS}")
        if key not in self._profiles:
            # Costs live on the annotated graph: annotation never touches ``gm`` itself.
            flops = {name: attrs["flops"] for name, attrs in self.graph.nodes(data=True)}
            moved = {name: attrs.get("bytes") for name, attrs in self.graph.nodes(data=True)}
            self._profiles[key] = profile(self.gm, self.example_inputs, **{"flops": flops, "moved": moved, **kwargs})
        return self._profiles[key]

    @property
    def measured_profile(self) -> Any:
        """The latest profile computed so far, or None: what a report shows without measuring."""
        profiles = list(self._profiles.values())  # a copy: a profiler thread may add one
        return profiles[-1] if profiles else None

    def _repr_html_(self) -> str:
        from fxviz.report_static import step_html

        return step_html(self)

    def drop_profile(self, **kwargs: Any) -> None:
        """Forget the profile cached for ``kwargs`` (a disturbed one, to measure again)."""
        self._profiles.pop(repr(sorted(kwargs.items())), None)

    def __repr__(self) -> str:
        check = self.check.status if self.check_done else "check pending"
        return f"<Step {self.index}: {self.pass_name}, {check}>"


class Session:
    """A list of Steps over one model, with an editor's undo/redo.

    ``Session(model, example_inputs)`` traces step 0 (``tracer`` and
    ``trace_kwargs`` go to :func:`fxviz.trace`). Every step is checked against
    the model's own outputs on the example inputs and ``n_random_inputs`` random
    inputs of the same shapes (so step 0 checks the trace), when its check is first
    read. Steps share the model's parameter tensors: train the model after creating
    a session and every step sees the new weights, and checks compare with the model
    as it is then.
    """

    def __init__(
        self,
        model: nn.Module | Callable[..., Any] | torch.export.ExportedProgram | str,
        example_inputs: Any = None,
        *,
        tracer: Any = "auto",
        n_random_inputs: int = 2,
        **trace_kwargs: Any,
    ):
        from fxviz.capture import as_inputs, called_as, capture, export

        inputs = as_inputs(example_inputs)
        if export.is_exported(model):
            model = export.load(model)
            if not inputs and model.example_inputs:  # a .pt2 file keeps the inputs it was exported with
                inputs = tuple(model.example_inputs[0])
        self._root = (model.module() if isinstance(model, torch.export.ExportedProgram)
                      else _cow.skeleton(model) if isinstance(model, nn.Module) else model)
        with called_as("Session"):
            captured = capture(self._root if isinstance(model, nn.Module) else model, inputs,
                               tracer=tracer, **trace_kwargs)
        gm = captured.gm
        if captured.reference is not None:
            self._root = captured.reference
        if captured.method == "dynamo":  # one graph of several: checked against itself, on its own inputs
            inputs = gm.meta["fxviz"]["graph_inputs"]
            self._root = _cow.fork(gm)
        self.capture = captured
        self.real_tensors = gm.meta["fxviz"]["real_tensors"] = not _has_fake_tensors(self._root, inputs)
        n_random = n_random_inputs if self.real_tensors else 0
        check_inputs = (inputs, *(random_like(inputs, seed) for seed in range(1, n_random + 1)))
        self._options = {"tracer": tracer, "n_random_inputs": n_random_inputs, **trace_kwargs}
        self._reference_outputs: tuple[dict, list] | None = None  # (tensor versions, outputs)
        self._reference_lock = threading.Lock()
        action = Action("trace", MappingProxyType({"tracer": captured.method, **trace_kwargs}))
        self._steps = [self._make_step(0, gm, action, check_inputs, False, "the trace", TraceError)]
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
        gm = _cow.fork(prev.gm)
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
        count = len(self._steps)
        if not -count <= index < count:
            raise IndexError(f"There is no step {index}; this session has steps 0 to {count - 1}.")
        self._index = index % count
        self._notify()
        return self.current

    def undo(self) -> Step:
        if not self.can_undo:
            raise IndexError("Nothing to undo: the session is at step 0.")
        return self.goto(self._index - 1)

    def redo(self) -> Step:
        if not self.can_redo:
            raise IndexError("Nothing to redo: the current step is the last one.")
        return self.goto(self._index + 1)

    def replay(self, other_model: nn.Module | Callable[..., Any], example_inputs: Any = None) -> Session:
        """A new Session on ``other_model`` with this session's history applied."""
        inputs = self.example_inputs if example_inputs is None else example_inputs
        session = Session(other_model, inputs, **self._options)
        for action in self.history:
            session.apply(action.spec, nodes=action.nodes or None, **action.params)
        return session

    def compare(self, i: int, j: int, **options: Any) -> Any:
        """``fxviz.compare`` of steps ``i`` and ``j``: its timings measure both steps in one
        interleaved run (``options``: its keyword arguments, e.g. ``profile_kwargs={"budget_s": 1}``)."""
        from fxviz.comparison import compare

        return compare(self._steps[i], self._steps[j], **options)

    def to_html(self, path: Any, **options: Any) -> Any:
        """Write the session as one self-contained HTML page, readable without a kernel;
        returns its path. ``options``: see :func:`fxviz.report.write_html`."""
        from fxviz.report import write_html

        return write_html(self, path, **options)

    def _make_step(self, index: int, gm: torch.fx.GraphModule, action: Action, check_inputs: tuple[tuple, ...],
                   differs: bool, what: str, error: type[Exception]) -> Step:
        """One annotated run on the example inputs proves the graph runs (else ``error``,
        and nothing changes), draws it, and is the check's first output."""
        try:
            with gc_paused(), seeded(check_inputs[0]):  # linear cost on graphs of 100k nodes
                first, notes = annotated_run(gm, check_inputs[0])  # notes, not gm's meta: gm is unchanged
                graph = to_networkx(gm, notes)  # with the collector still paused: it never scans the notes
                del notes
        except Exception as exc:
            cause = exc.__cause__ or exc
            raise error(
                f"The graph after {what} cannot run on the example inputs{_node_of(exc)}: "
                f"{type(cause).__name__}: {cause}. The session is unchanged."
            ) from exc

        versions = _cow.tensor_versions(gm)

        def check() -> CheckResult:
            if not self.real_tensors:
                return CheckResult("not checked", math.nan, math.nan, 0.0, 0.0, 0, NEEDS_REAL_TENSORS)
            # The model (whose tensors the steps share) may have been trained since:
            # then the first output is stale and everything runs again, now.
            fresh = _cow.tensor_versions(gm) == versions
            try:
                rest = run_outputs(gm, check_inputs[1:] if fresh else check_inputs)
            except Exception as exc:  # ran on the example inputs, fails on a random one
                return CheckResult("mismatch", math.inf, math.inf, 0.0, 0.0, len(check_inputs),
                                   f"fails on a random input of the example's shapes: {type(exc).__name__}: {exc}")
            try:
                reference = self._reference()
            except Exception as exc:  # a state the badge shows, never an exception lost in a thread
                return CheckResult.failed("running the original model for the check", exc, len(check_inputs),
                                          "Call it on the example inputs in a cell to see the traceback; "
                                          "if only the example inputs work, use n_random_inputs=0.")
            outputs = [first, *rest] if fresh else rest
            return compare_outputs(reference, outputs, expected_to_differ=differs)

        return Step(index, gm, action, check_inputs[0], check_inputs, graph, differs, check)

    def _reference(self) -> list:
        """The model's own outputs on the check inputs, computed when first needed and
        again only if the model's tensors changed since."""
        with self._reference_lock:
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
        from fxviz.report_static import session_html

        return session_html(self)

    def __repr__(self) -> str:
        return f"<Session: {len(self._steps)} steps, at {self._index} ({self.current.pass_name})>"


def _node_of(exc: BaseException) -> str:
    node = getattr(exc, "node_name", None)
    return f" at node '{node}'" if node else ""


NEEDS_REAL_TENSORS = ("needs real tensors: the model or its inputs are on the meta device or fake; "
                      "the graph, shapes and FLOPs are exact, but outputs and timings need real weights "
                      "(build the model on a real device to check or time it).")


def _has_fake_tensors(root: Any, inputs: tuple) -> bool:
    """Whether the model or its inputs hold meta or fake tensors (no values to compare)."""
    from torch._subclasses.fake_tensor import FakeTensor

    tensors = [t for t in torch.utils._pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]
    if isinstance(root, nn.Module):
        tensors += [*root.parameters(), *root.buffers()]
    return any(t.is_meta or isinstance(t, FakeTensor) for t in tensors)

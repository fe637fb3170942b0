"""Session and Step: a model's history of passes, with undo, redo and a numeric check.

Step 0 is the traced model; every later step is one pass applied to the step
before it. Applying is transactional: a pass that fails, breaks the graph or
produces a graph that cannot run raises PassError and leaves the session as it
was. Steps own their module objects but share every tensor a pass did not
replace (see :mod:`fxviz._cow`), and the user's model is never changed.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import torch
import torch.fx
from torch import nn

from fxviz import _cow
from fxviz._runtime import preserved_buffers
from fxviz.check import CheckResult, compare_outputs, random_like, run_outputs
from fxviz.errors import PassError, TraceError
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
    """One state of the model: its GraphModule, how it was made, and how its
    outputs compare with the original model's on the session's check inputs."""

    index: int
    gm: torch.fx.GraphModule
    action: Action
    check: CheckResult
    example_inputs: tuple
    check_inputs: tuple[tuple, ...]
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
    def graph(self) -> Any:
        """The annotated ``networkx.DiGraph`` (shapes, FLOPs) of this step. Annotation
        writes node metadata, so it runs on a copy of the graph, not on ``gm``'s."""
        from fxviz.graph import to_networkx
        from fxviz.shapes import annotate

        scratch = torch.fx.GraphModule(self.gm, copy.deepcopy(self.gm.graph), type(self.gm).__name__)
        return to_networkx(annotate(scratch, self.example_inputs))

    def profile(self, **kwargs: Any) -> Any:
        """``fxviz.profile(gm, example_inputs, **kwargs)``, computed once per kwargs."""
        from fxviz.profile import profile

        key = repr(sorted(kwargs.items()))
        if key not in self._profiles:
            self._profiles[key] = profile(self.gm, self.example_inputs, **kwargs)
        return self._profiles[key]

    def __repr__(self) -> str:
        return f"<Step {self.index}: {self.pass_name}, {self.check.status}>"


class Session:
    """A list of Steps over one model, with an editor's undo/redo.

    ``Session(model, example_inputs)`` traces step 0 (``tracer`` and
    ``trace_kwargs`` go to :func:`fxviz.trace`). Every step is checked against
    the model's own outputs on the example inputs and ``n_random_inputs`` random
    inputs of the same shapes, computed once here (so step 0 checks the trace).
    Steps share the model's parameter tensors: train the model after creating a
    session and every step sees the new weights while the checks compare with
    the old outputs; start a new session instead.
    """

    def __init__(
        self,
        model: nn.Module | Callable[..., Any],
        example_inputs: Any,
        *,
        tracer: Any = "symbolic",
        n_random_inputs: int = 2,
        **trace_kwargs: Any,
    ):
        from fxviz.trace import as_inputs, trace

        inputs = as_inputs(example_inputs)
        root = _cow.skeleton(model) if isinstance(model, nn.Module) else model
        gm = trace(root, inputs, tracer=tracer, **trace_kwargs)
        check_inputs = (inputs, *(random_like(inputs, seed) for seed in range(1, n_random_inputs + 1)))
        self._options = {"tracer": tracer, "n_random_inputs": n_random_inputs, **trace_kwargs}
        self._reference = run_outputs(root, check_inputs)
        outputs = _run(gm, check_inputs, "the trace", TraceError)
        action = Action("trace", MappingProxyType({"tracer": _label(tracer), **trace_kwargs}))
        self._steps = [Step(0, gm, action, compare_outputs(self._reference, outputs), inputs, check_inputs)]
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
        versions = _cow.tensor_versions(prev.gm)
        result = spec(gm, nodes=nodes, **params)
        _require_untouched(prev.gm, versions, spec.name)
        check_inputs = prev.check_inputs
        if spec.convert_inputs is not None:
            check_inputs = tuple(spec.convert_inputs(inputs) for inputs in check_inputs)
        outputs = _run(result.graph_module, check_inputs, f"pass '{spec.name}'", PassError)
        differs = not spec.preserves_semantics or prev.check.status == "expected to differ"
        selection = () if nodes is None else selection_names(nodes)
        action = Action(spec.name, MappingProxyType(spec.bind(params)), selection, spec)
        check = compare_outputs(self._reference, outputs, expected_to_differ=differs)
        step = Step(prev.index + 1, result.graph_module, action, check, check_inputs[0], check_inputs)
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

    def compare(self, i: int, j: int) -> Any:
        """``fxviz.compare`` of steps ``i`` and ``j``."""
        from fxviz.compare import compare

        return compare(self._steps[i], self._steps[j])

    def subscribe(self, callback: Callable[[Session], Any]) -> Callable[[], None]:
        """Call ``callback(session)`` after every change of steps or index; returns
        a function that unsubscribes it."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    def _notify(self) -> None:
        for callback in list(self._subscribers):
            callback(self)

    def __repr__(self) -> str:
        return f"<Session: {len(self._steps)} steps, at {self._index} ({self.current.pass_name})>"


def _run(gm: torch.fx.GraphModule, inputs_list: tuple[tuple, ...], what: str, error: type[Exception]) -> list:
    """Outputs of ``gm`` on every input tuple; on failure, an error naming the node."""
    try:
        return run_outputs(gm, inputs_list)
    except Exception as exc:
        node = _failing_node(gm, inputs_list)
        where = f" at node '{node.name}' ({node.op} {node.target})" if node is not None else ""
        raise error(
            f"The graph after {what} cannot run on the example inputs{where}: {type(exc).__name__}: {exc}. "
            "The session is unchanged."
        ) from exc


def _failing_node(gm: torch.fx.GraphModule, inputs_list: tuple[tuple, ...]) -> torch.fx.Node | None:
    """The first node that raises, found by running the graph node by node.
    (Interpreter.run is not used: on error it symbolizes tracebacks, which imports
    torch._dynamo and takes seconds.)"""
    for inputs in inputs_list:
        interpreter = torch.fx.Interpreter(gm, garbage_collect_values=False)
        interpreter.env, interpreter.args_iter = {}, iter(inputs)
        with torch.no_grad(), preserved_buffers(gm):
            for node in gm.graph.nodes:
                try:
                    interpreter.env[node] = interpreter.run_node(node)
                except Exception:
                    return node
    return None


def _require_untouched(gm: torch.fx.GraphModule, versions: dict[str, int], name: str) -> None:
    """A pass must replace tensors, not write into them: those are shared with
    earlier steps and the user's model."""
    written = [n for n, v in _cow.tensor_versions(gm).items() if versions.get(n, v) != v]
    if written:
        raise PassError(
            f"Pass '{name}' wrote in place into {', '.join(map(repr, written[:3]))}, which is shared with "
            "earlier steps and the model: they now see the change. Build a new tensor or nn.Parameter "
            "and assign it to a copy of the module (fxviz._cow.module_copy) instead."
        )


def _label(tracer: Any) -> str:
    return tracer if isinstance(tracer, str) else getattr(tracer, "__name__", type(tracer).__name__)

"""Step: one state of a Session's model, and the Action (a pass and its arguments) that made it; what
its check needs first (real tensors; a graph drawn from its shapes, one run on the example)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
import threading
from typing import Any

import torch
import torch.fx
from torch import nn

from fxviz._runtime import closed_over_modules
from fxviz._torch_internals import is_fake, tree_leaves
from fxviz.annotation.known_shapes import NOT_RUN
from fxviz.capture.info import graph_info
from fxviz.checks.check import CheckResult, run_outputs
from fxviz.checks.scope import graph_scope
from fxviz.errors import MeasureError
from fxviz.annotation.graph import to_networkx
from fxviz.passes.spec import PassSpec


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
    #: What the run that proved the step runs noted per node (shapes, FLOPs; never
    #: written to ``gm``'s nodes), until :attr:`graph` is built from it.
    _notes: dict[str, dict[str, Any]] = field(repr=False)
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

    @property
    def graph(self) -> Any:
        """The annotated ``networkx.DiGraph`` (:func:`fxviz.to_networkx` with the run's
        notes), built on first use: a session that only applies and checks passes on a
        graph of 100,000 nodes never pays for it, and a drawing pays once."""
        graph = self.__dict__.get("_graph")
        if graph is None:
            with _GRAPH_LOCK:  # a profiler thread and the drawing may ask at once
                graph = self.__dict__.get("_graph")
                if graph is None:
                    graph = self.__dict__["_graph"] = to_networkx(self.gm, self._notes)
                    self._notes.clear()
        return graph

    @cached_property
    def memory(self) -> Any:
        """Bytes per node, output and alive after it, with the peak in ``attrs``
        (:func:`fxviz.checks.memory.memory`): from shapes alone, so meta models answer too; on
        CUDA also the measured peak of one forward (``attrs["measured_peak_bytes"]``)."""
        from fxviz.capture import as_inputs
        from fxviz.checks.memory import memory

        return memory(self.graph, self.gm, as_inputs(self.example_inputs))

    @cached_property
    def check(self) -> CheckResult:
        """The numeric check against the original model on the example inputs and the
        random ones. Computed on first use: each random input costs two forwards, which
        a UI can spend in the background after drawing the step. On one of dynamo's
        graphs it says which of them it covered (:func:`fxviz.checks.scope.graph_scope`)."""
        return graph_scope(self._checker(), self.gm)

    @property
    def check_done(self) -> bool:
        """Whether :attr:`check` is computed already (reading it then costs nothing)."""
        return "check" in self.__dict__

    def profile(self, **kwargs: Any) -> Any:
        """``fxviz.profile(gm, example_inputs, **kwargs)``, computed once per kwargs."""
        from fxviz.timing.profiling import profile

        key = repr(sorted(kwargs.items()))
        if graph_info(self.gm).real_tensors is False:
            raise MeasureError(f"Cannot time this step: {NEEDS_REAL_TENSORS}")
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
        from fxviz.report.static import step_html

        return step_html(self)

    def drop_profile(self, **kwargs: Any) -> None:
        """Forget the profile cached for ``kwargs`` (a disturbed one, to measure again)."""
        self._profiles.pop(repr(sorted(kwargs.items())), None)

    def __repr__(self) -> str:
        check = self.check.summary if self.check_done else "check pending"
        return f"<Step {self.index}: {self.pass_name}, {check}>"


_GRAPH_LOCK = threading.Lock()

NEEDS_REAL_TENSORS = ("needs real tensors: the model or its inputs are on the meta device or fake; "
                      "the graph, shapes and FLOPs are exact, but outputs and timings need real weights "
                      "(build the model on a real device to check or time it).")


def has_fake_tensors(root: Any, inputs: tuple) -> bool:
    """Whether the model or its inputs hold meta or fake tensors (no values to compare);
    a plain function (a training step) by the modules it closes over, since its real
    inputs may be moved onto the model's meta device inside."""
    tensors = [t for t in tree_leaves(inputs) if isinstance(t, torch.Tensor)]
    if isinstance(root, torch.export.ExportedProgram):  # its weights, without making ep.module()
        tensors += [t for t in (*root.state_dict.values(), *root.constants.values()) if isinstance(t, torch.Tensor)]
    for module in [root] if isinstance(root, nn.Module) else closed_over_modules(root):
        tensors += [*module.parameters(), *module.buffers()]
    return any(map(is_fake, tensors))


def first_output(gm: torch.fx.GraphModule, check_inputs: tuple[tuple, ...],
                 reference: Callable[[], list]) -> tuple[Any, CheckResult | None]:
    """The example's output of a step drawn from the shapes its capture recorded (its first
    run is the check's), or NOT_RUN and, where it fails there and the model (``reference()``)
    runs, the check's result saying so: the capture's fault, not "fails on a random input"."""
    try:
        return run_outputs(gm, check_inputs[:1])[0], None
    except Exception as exc:  # a state the badge shows
        try:
            reference()
        except Exception:  # the model fails too: the check says how
            return NOT_RUN, None
        return NOT_RUN, CheckResult.failed(
            "running the graph on the example inputs", exc, len(check_inputs),
            "The graph was drawn from the shapes its capture recorded, without running it, and the model runs on "
            "these inputs: the capture is at fault. Open the model with another tracer (Session(..., "
            "tracer='make_fx') or 'symbolic').")

"""torch.compile from the inside: every graph dynamo hands a backend, in the order they
ran, with the graph break that ended each, its guards, and what AOT autograd makes of
it (its ATen forward and backward graphs), each one explorable as a Session.

>>> import torch, fxviz
>>> def gate(x):
...     y = x * 2
...     if y.sum() > 0:  # data-dependent: a graph break
...         return y.relu()
...     return y
>>> c = fxviz.compiled(gate, torch.ones(3))
>>> len(c.graphs), c.graph_breaks[0]["reason"]
(2, 'Data-dependent branching')
>>> c.session(0, "dynamo").current.check.status
'match'
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
import torch.fx
from torch import nn

from fxviz.capture.info import graph_info, set_graph_info
from fxviz.errors import InputError, NoSuchStep
from fxviz.compiler.kernels import inductor_compile, inductor_failure, mark
from fxviz.present.markup import escape

#: The views of one dynamo graph: the graph itself, and AOT autograd's ATen graphs.
PARTS = ("dynamo", "forward", "backward")
#: What each AOT part shows (the dynamo part: what the dynamo front-end says of its graphs).
PART_SUMMARIES = {"forward": "AOT autograd's forward of a dynamo graph: the ATen operators it runs",
                  "backward": "AOT autograd's backward of a dynamo graph: the ATen operators of its gradients"}


@dataclass(frozen=True)
class CompiledGraph:
    """Dynamo graph ``index``: its GraphModule, AOT's ``forward``/``backward`` (None when
    not captured), its guards (one line each, and dynamo's guard tree as text) and the
    graph break that ended it (``{reason, detail, user_line}``; None for the last graph)."""

    index: int
    gm: torch.fx.GraphModule
    forward: torch.fx.GraphModule | None
    backward: torch.fx.GraphModule | None
    guards: tuple[str, ...]
    guard_tree: str
    graph_break: dict[str, Any] | None

    def part(self, name: str) -> torch.fx.GraphModule | None:
        """The GraphModule of part ``name`` (one of PARTS)."""
        if name not in PARTS:
            raise InputError(f"Unknown part {name!r}: use one of {', '.join(map(repr, PARTS))}.")
        return {"dynamo": self.gm, "forward": self.forward, "backward": self.backward}[name]

    @property
    def parts(self) -> tuple[str, ...]:
        """The parts captured for this graph, in PARTS order."""
        return tuple(p for p in PARTS if self.part(p) is not None)


@dataclass
class Compiled:
    """What ``torch.compile`` made of a model: ``graphs`` (CompiledGraph, in the order
    they ran) and ``graph_breaks``. :meth:`session` opens any graph or part as a
    Session (made once, then kept)."""

    graphs: tuple[CompiledGraph, ...]
    capture: Any
    name: str = "model"
    session_options: dict[str, Any] = field(default_factory=dict)
    backend: str | None = None
    _sessions: dict[tuple[int, str], Any] = field(default_factory=dict, repr=False)
    _kernels: tuple[pd.DataFrame, dict[tuple[int, str], float]] | None = field(default=None, repr=False)

    @classmethod
    def from_capture(cls, captured: Any, name: str = "model", **session_options: Any) -> Compiled:
        """The graphs of a dynamo ``Capture`` (``fxviz.capture.capture(..., tracer="dynamo")``)."""
        graphs = []
        for gm in captured.graphs:
            info = graph_info(gm)
            graphs.append(CompiledGraph(info.graph_index, gm, info.aot_forward, info.aot_backward,
                                        info.guards, info.guard_tree, info.graph_break))
        return cls(tuple(graphs), captured, name, session_options)

    @property
    def kernels(self) -> pd.DataFrame:
        """inductor's kernels (``backend="inductor"``), one row each in the order they run:
        ``graph, part, kernel, kind`` (triton/cpp/template/extern), ``nodes`` (those it
        computes in :meth:`session`'s graph of that part), ``also`` (nodes it helps compute),
        ``inferred`` (those of ``nodes`` given it by their users: a rewrite dropped their provenance),
        ``modules``, ``calls`` (per run), ``time_us`` (mean per run, profiled on first use),
        ``share`` (of its graph's own time, :attr:`kernel_totals`), ``code``."""
        return self._timed()[0]

    @property
    def kernel_totals(self) -> dict[tuple[int, str], float]:
        """Each compiled graph's own time (µs per run) by ``(index, part)``, measured with its kernels."""
        return self._timed()[1]

    def module_times(self, index: int | None = None) -> pd.DataFrame:
        """Per module of graph ``index`` (default: the one opened first, :attr:`shown`): ``eager_us`` (its dynamo graph run op by op, as the
        model runs without torch.compile: the Session's profile, median µs per op) beside
        ``compiled_us`` (its forward's kernels, a fused kernel's time shared among its
        nodes' modules) and ``ratio`` (compiled over eager)."""
        from fxviz.compiler.kernel_times import by_module

        index = self.shown if index is None else index
        kernels = self.kernels[(self.kernels.graph == index) & (self.kernels.part == "forward")]
        eager = self.session(index, "dynamo").steps[0]
        return by_module(kernels, eager.profile(budget_s=1.0), eager.graph, self.graphs[index].forward)

    def _timed(self) -> tuple[pd.DataFrame, dict[tuple[int, str], float]]:
        from fxviz.compiler import kernel_times

        if self.backend != "inductor":
            raise InputError("Only a model compiled with inductor has kernels: "
                             "fxviz.compiled(model, *inputs, backend=\"inductor\").")
        if self._kernels is None:
            self._kernels = kernel_times.table(self.graphs)
        return self._kernels

    @property
    def graph_breaks(self) -> list[dict[str, Any]]:
        return [g.graph_break for g in self.graphs if g.graph_break]

    def views(self) -> list[tuple[int, str]]:
        """Every ``(graph index, part)`` that can be opened, in order."""
        return [(g.index, part) for g in self.graphs for part in g.parts]

    def session(self, index: int | None = None, part: str = "dynamo") -> Any:
        """The Session of graph ``index``'s ``part`` (default: the graph opened first, :attr:`shown`);
        it runs on the inputs that graph was called with and is checked against itself (the
        graph as dynamo/AOT made it)."""
        from fxviz.capture import Capture
        from fxviz.session import Session

        index = self.shown if index is None else index
        if not 0 <= index < len(self.graphs):
            raise NoSuchStep(f"There is no graph {index}: torch.compile made graphs 0 to {len(self.graphs) - 1}.")
        gm = self.graphs[index].part(part)
        if gm is None:
            why = ("nothing in it needs a gradient (pass backward=True, or inputs/parameters that require grad)"
                   if part == "backward" else "AOT autograd was not run (fxviz.compiled runs it)")
            raise InputError(f"Graph {index} has no {part} graph: {why}.")
        key = (index, part)
        if key not in self._sessions:
            one = Capture([_own_inputs(gm)], self.capture.method, graph_breaks=self.capture.graph_breaks,
                          summary=PART_SUMMARIES.get(part, ""))
            self._sessions[key] = Session(one, **self.session_options)
        return self._sessions[key]

    @property
    def shown(self) -> int:
        """The index of the graph to open first: the largest (``Capture.shown``), the others listed."""
        return self.capture.shown

    def adopt(self, session: Any) -> None:
        """Use ``session`` (opened on this capture's shown graph, e.g. by ``tracer="auto"``)
        as that graph's: its steps are kept."""
        if session.capture is not self.capture:
            raise InputError("adopt(session): the session was opened on another capture.")
        self._sessions[(self.shown, "dynamo")] = session

    def sessions(self) -> dict[tuple[int, str], Any]:
        """A Session for every view (each made on first use, then kept)."""
        return {view: self.session(*view) for view in self.views()}

    def table(self) -> pd.DataFrame:
        """One row per view: ``graph, part, nodes, ends_with`` (the break's reason, or
        "end of the model"), ``user_line``, ``guards`` (how many)."""
        rows = []
        for g in self.graphs:
            brk = g.graph_break or {}
            for part in g.parts:
                rows.append({"graph": g.index, "part": part, "nodes": len(g.part(part).graph.nodes),
                             "ends_with": brk.get("reason", "end of the model"),
                             "user_line": brk.get("user_line"), "guards": len(g.guards)})
        return pd.DataFrame(rows, columns=["graph", "part", "nodes", "ends_with", "user_line", "guards"])

    def __repr__(self) -> str:
        return f"<Compiled {self.name}: {len(self.graphs)} graphs, {len(self.graph_breaks)} graph breaks>"

    def _repr_html_(self) -> str:
        return f"<p><b>{escape(repr(self))}</b></p>" + self.table().to_html(index=False, escape=True, border=0,
                                                                          classes="fxviz-table")


def _own_inputs(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` over copies of the tensors it was called with, parameters aside: a dynamo
    graph of a training-mode BatchNorm adds to ``num_batches_tracked`` in place, and
    must not change what another graph's Session runs on."""
    from fxviz import _cow

    own = _cow.fork(gm)
    inputs = tuple(t if isinstance(t, nn.Parameter) or not isinstance(t, torch.Tensor) else t.clone()
                   for t in graph_info(gm).graph_inputs)
    set_graph_info(own, dataclasses.replace(graph_info(gm), graph_inputs=inputs))
    return own


def compiled(model: nn.Module | Callable[..., Any], *example_inputs: Any, backward: bool | None = None,
             n_random_inputs: int = 2, kwargs: dict[str, Any] | None = None,
             backend: str | None = None) -> Compiled:
    """Run ``model(*example_inputs, **kwargs)`` under ``torch.compile`` and keep everything its
    backend is handed (see :class:`Compiled`). ``backward``: also run the backward
    (default: when grad mode is on and a parameter or input requires grad), recording
    AOT's backward graphs; gradients are returned to nobody, never written to ``.grad``.
    The model is not changed: it runs on a copy of its module tree whose buffers are
    copies (a training-mode BatchNorm updates those), sharing its parameters.
    ``backend="inductor"``: compiled by inductor, whose AOT graphs (after its
    decompositions) are the forward/backward parts, and whose kernels are
    :attr:`Compiled.kernels`; inductor's config is restored afterwards (fxviz.compiler.kernels.inductor_compile)."""
    from fxviz import _cow
    from fxviz._runtime import untouched
    from fxviz._torch_internals import uncompiled
    from fxviz.capture import called_as, caller, dynamo
    from fxviz.capture.closure import closed_over_module
    from fxviz.capture._common import name_graphs, torch_errors_quiet
    from fxviz.errors import TraceError

    if not example_inputs:
        raise TraceError("compiled(model, *example_inputs): torch.compile captures by running the model; "
                         "pass example inputs, e.g. compiled(model, torch.randn(1, 3, 224, 224)).")
    model = uncompiled(model)  # dynamo's graphs of what torch.compile wrapped (compiling the wrapper again fails)
    root = _cow.skeleton(model) if isinstance(model, nn.Module) else model
    if backward is None:
        owner = model if isinstance(model, nn.Module) else closed_over_module(model)
        params = list(owner.parameters()) if owner is not None else []
        tensors = [t for t in (*params, *example_inputs, *(kwargs or {}).values()) if isinstance(t, torch.Tensor)]
        backward = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    name = getattr(model, "__name__", type(model).__name__)
    with called_as("compiled"), torch_errors_quiet(), untouched(root), inductor_compile(backend, example_inputs) as how:
        try:
            captured = dynamo.capture(root, tuple(example_inputs), aot=True, backward=backward, kwargs=kwargs,
                                      compiler=how)
        except TraceError as exc:  # name the call the user wrote
            exc.args = (f"{caller()}(...): {inductor_failure(exc) or exc}",)
            raise
    name_graphs(captured.graphs, type(model).__name__ if isinstance(model, nn.Module) else name)
    made = Compiled.from_capture(captured, name, n_random_inputs=n_random_inputs)
    made.backend = backend
    if backend:
        mark(made.graphs)
    return made

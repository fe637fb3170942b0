"""What every capture method shares: the record it returns, the registry of front-ends,
module paths from ``nn_module_stack`` and source lines from ``stack_trace``.

A front-end is a module of this package that declares itself with :func:`front_end`:
its name (``tracer=``), its place in ``tracer="auto"``'s chain, what it needs and which
of :func:`fxviz.capture.capture`'s options it takes. ``fxviz.capture`` imports every
module of itself, so a new front-end is one module.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch import nn

from fxviz._torch_internals import forget_last_trace
from fxviz.capture.info import GraphInfo, graph_info, set_graph_info
from fxviz.capture.places import method_path, source_line
from fxviz.errors import TraceError



@dataclass
class Capture:
    """One capture: the graph(s), the method that made them and why earlier methods
    were skipped or failed (``attempts``: ``(method, reason)`` pairs, in order)."""

    graphs: list[torch.fx.GraphModule]
    method: str
    attempts: list[tuple[str, str]] = field(default_factory=list)
    graph_breaks: list[dict[str, Any]] = field(default_factory=list)
    #: What the graph reproduces, when not the model itself (a copy with plain outputs).
    reference: Any = None
    #: Of dynamo's several graphs, which is shown first and why; with ``tracer="auto"``, also why it
    #: opened the model as those graphs and what to do about it ("" for one graph whole).
    note: str = ""
    #: What its graphs show when not what the method's usually do (AOT's graphs of a dynamo graph).
    summary: str = ""
    #: The outputs and per-node notes of the annotated run (:func:`fxviz.annotation.shapes.annotated_run`,
    #: seeded as a check is) that proved its graph runs (``tracer="auto"``): a Session's step 0
    #: reuses them instead of running the model again before its first view.
    first_run: tuple[Any, dict[str, dict[str, Any]]] | None = None
    #: The index of the graph a Session opens (``gm``): of dynamo's, the largest (:mod:`.shown`).
    shown: int = 0

    @property
    def gm(self) -> torch.fx.GraphModule:
        return self.graphs[self.shown]

    @property
    def about(self) -> str:
        """What its graphs show, in a sentence: the ``summary``, else what its method's
        front-end says of its graphs ("" where it does not)."""
        found = _FRONT_ENDS.get(self.method)
        return self.summary or (found.about if found is not None else "")


@dataclass
class Request:
    """What a front-end is asked to capture: ``model``, ``inputs`` (a tuple), ``method``
    (its name as chosen), ``tracer`` (the user's ``tracer=``: a name or a torch.fx
    Tracer) and ``options`` (those of capture's options it declared, as given)."""

    model: Any
    inputs: tuple
    method: str
    tracer: Any
    options: dict[str, Any]
    #: The names of the keyword inputs, the last ``len(keywords)`` of ``inputs``.
    keywords: tuple[str, ...] = ()

    @property
    def args(self) -> tuple:
        """The positional inputs, as the user called the model."""
        return self.inputs[:len(self.inputs) - len(self.keywords)]

    @property
    def kwargs(self) -> dict[str, Any]:
        """The keyword inputs, as the user called the model."""
        return dict(zip(self.keywords, self.inputs[len(self.args):]))

    @functools.cached_property
    def plain(self) -> Any:
        """The model as a graph can return it: a module copy whose cache outputs are tuples
        (torch.export and make_fx refuse types they do not know), a training step that
        returns what it leaves in ``.grad``. A capture made from it is checked against it."""
        from fxviz.capture.gradients import with_gradients
        from fxviz.capture.outputs import with_plain_outputs

        if isinstance(self.model, nn.Module):
            return with_plain_outputs(self.model)
        return with_gradients(self.model, self.options.get("module"))


@dataclass(frozen=True)
class FrontEnd:
    """A capture method: ``run(request)`` returns a Capture or a GraphModule; ``auto``
    its place in ``tracer="auto"``'s chain (lower first; None: by name only); ``about``
    what its graphs show, for a reader who did not pick it. Its graphs' inputs are named
    after the model's parameters and their outputs described (:mod:`.names`)."""

    name: str
    run: Callable[[Request], Any]
    auto: float | None = None
    needs_module: bool = False
    needs_inputs: bool = True
    options: tuple[str, ...] = ()
    about: str = ""

    def why_not(self, model: Any, inputs: tuple) -> str | None:
        """Why this front-end cannot take ``model`` and ``inputs``, or None."""
        if self.needs_inputs and not inputs:
            return "needs example inputs"
        if self.needs_module and not isinstance(model, nn.Module):
            return "needs an nn.Module (this is a plain function)"
        return None

    def __call__(self, request: Request) -> Capture:
        from fxviz.capture.keywords import keywords_last
        from fxviz.capture.names import name_ends

        result = self.run(request)
        if not isinstance(result, Capture):
            reference = request.__dict__.get("plain")  # the front-end captured request.plain
            if request.keywords:  # the check calls it as the graph: keyword inputs last
                reference = keywords_last(request.model if reference is None else reference, request.keywords)
            gradients = graph_info(result).gradient_outputs
            if gradients and reference is not None and reference is not request.model:
                reference.fxviz_gradient_outputs = gradients  # the check marks these outputs (run_outputs)
            result = Capture([result], self.name, reference=reference)
        if isinstance(request.model, nn.Module):
            name_graphs(result.graphs, type(request.model).__name__)
        name_ends(result.graphs, request.model, request.inputs, request.keywords)
        return result


def name_graphs(graphs: list[torch.fx.GraphModule], name: str) -> None:
    """Name ``name`` each of ``graphs`` (and the AOT graphs dynamo's carry) that torch named
    "GraphModule" (torch.export's, dynamo's, AOT's): as the user named the model. Each
    GraphModule has a class of its own, so renaming it renames one graph."""
    for gm in graphs:
        info = graph_info(gm)
        for part in (gm, info.aot_forward, info.aot_backward):
            if part is not None and type(part).__name__ == "GraphModule":
                type(part).__name__ = name


_FRONT_ENDS: dict[str, FrontEnd] = {}


def front_end(name: str, *, auto: float | None = None, needs_module: bool = False, needs_inputs: bool = True,
              options: tuple[str, ...] = (), about: str = ""
              ) -> Callable[[Callable[[Request], Any]], Callable[[Request], Any]]:
    """Declare ``run(request)`` as the front-end ``name`` (see :class:`FrontEnd`); returns
    ``run`` unchanged. Declaring a name again replaces it (a re-run notebook cell)."""

    def add(run: Callable[[Request], Any]) -> Callable[[Request], Any]:
        _FRONT_ENDS[name] = FrontEnd(name, run, auto, needs_module, needs_inputs, tuple(options), about)
        return run

    return add


def forget_front_end(name: str) -> None:
    """Remove the front-end ``name`` (a test's stub, a user's experiment)."""
    _FRONT_ENDS.pop(name)


def front_ends() -> dict[str, FrontEnd]:
    """The declared front-ends by name: those in the auto chain in its order, then the others."""
    ranked = sorted(_FRONT_ENDS.values(), key=lambda f: (f.auto is None, f.auto or 0))
    return {f.name: f for f in ranked}


def auto_order() -> tuple[str, ...]:
    """The methods ``tracer="auto"`` tries, in order of fidelity.

    >>> auto_order()
    ('symbolic', 'export', 'export (strict)', 'make_fx', 'dynamo')
    """
    return tuple(name for name, f in front_ends().items() if f.auto is not None)


def methods() -> tuple[str, ...]:
    """Every name ``tracer=`` takes: ``"auto"`` and each front-end."""
    return ("auto", *front_ends())


def choose(name: Any) -> FrontEnd:
    """The front-end called ``name``; a TraceError listing them for any other value."""
    chosen = _FRONT_ENDS.get(name) if isinstance(name, str) else None
    if chosen is None:
        raise TraceError(f"Unknown tracer {name!r}: use one of {', '.join(map(repr, methods()))} "
                         "or a torch.fx.Tracer subclass.")
    return chosen


class _BelowError(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR and not (
            record.levelno == logging.WARNING and record.name.startswith("torch._dynamo"))


@contextlib.contextmanager
def torch_errors_quiet() -> Iterator[None]:
    """While capturing, torch logs the traceback of a failed meta kernel or export before
    raising it: pages of stderr in the cell. fxviz reports that exception itself (kept as
    the ``__cause__``; ``%tb`` shows it), so torch's ERROR records are dropped meanwhile,
    and dynamo's warnings (a graph break at ``.item()``, with its stack) that fxviz lists
    as the graph breaks."""
    names = ["torch", *(name for name in logging.root.manager.loggerDict if name.startswith("torch."))]
    handlers = {h for name in names for h in logging.getLogger(name).handlers}
    quiet = _BelowError()
    for handler in handlers:
        handler.addFilter(quiet)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(quiet)


def with_stack_room(fn: Callable[[], Any]) -> Any:
    """``fn()`` called from a frame that takes a chunk of CPython's frame stack of its own,
    the calls below it running in the rest of that chunk. CPython (3.11 on) keeps frames in
    16 KB chunks and frees a chunk as soon as the frame at its start returns: a call made
    thousands of times whose frame lands there maps and unmaps memory each time, and where
    that happens hangs on the caller's stack depth. torch.export of the same model cost up to
    68 ms of system time (11,000 page faults) more at some depths than at others, 5-12 %
    of it (Mistral 6 layers, RoBERTa 4 layers); below this frame, none at any depth."""
    return _roomy(fn)


def _roomy(fn: Callable[[], Any]) -> Any:
    return fn()


# Stack slots it never uses (64 KB): CPython gives its frame a 128 KB chunk, half of it left to the callees.
_roomy.__code__ = _roomy.__code__.replace(co_stacksize=8192)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__


def module_types(model: nn.Module | None) -> dict[str, str]:
    """Class name per module path; the GraphModule itself keeps only plain containers."""
    if not isinstance(model, nn.Module):
        return {}
    return {path: type(m).__name__ for path, m in model.named_modules() if path}


def path_from_stack(node: torch.fx.Node) -> str:
    """The innermost module path of ``nn_module_stack``, normalised: export writes
    ``L__self___layer1_0`` keys but plain dotted paths as values, sometimes with a
    ``_orig_mod.`` or ``self.`` prefix; a module called twice gets an ``@1`` suffix.
    dynamo names the root ``L['self']``, or ``L['fn']`` when the root is one of torch's own
    modules (``nn.Sequential``: it compiles a wrapper that calls it)."""
    stack = node.meta.get("nn_module_stack")
    return _normalised_path(str(next(reversed(stack.values()))[0])) if stack else ""


@functools.lru_cache(maxsize=4096)
def _normalised_path(path: str) -> str:
    """:func:`path_from_stack` of the innermost path, made once per distinct path (a graph's
    nodes share a few hundred: a 24-layer Qwen2's 1,900, 319)."""
    path = re.sub(r"@\d+$", "", path)
    for prefix in ("_orig_mod.", "self.", "L['self'].", "L['fn']."):
        path = path.removeprefix(prefix)
    return "" if path in ("L['self']", "L['fn']", "self") else path


def finish(gm: torch.fx.GraphModule, method: str, root: Any, **info: Any) -> torch.fx.GraphModule:
    """Module paths and source lines on every node, and its :class:`GraphInfo` (``info`` its fields)."""
    forget_last_trace()  # every front end but symbolic tracing runs make_fx, which keeps its graph
    types = module_types(root)
    for node in gm.graph.nodes:
        if node.op == "output":
            node.meta["module_path"] = None
            continue
        if "module_path" not in node.meta:
            node.meta["module_path"] = method_path(node, path_from_stack(node), types)
        line = source_line(node)
        if line:
            node.meta["source"] = line
    set_graph_info(gm, GraphInfo(tracer=method, module_types=types, **info))
    return gm


def as_inputs(example_inputs: Any) -> tuple:
    """Example inputs as a tuple; a single tensor is accepted for convenience."""
    if example_inputs is None:
        return ()
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs)
    return (example_inputs,)

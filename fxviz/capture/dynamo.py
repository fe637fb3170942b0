"""The graphs torch.compile's dynamo hands a backend: the last resort for models with
data-dependent Python, which open as several graphs split at their graph breaks, and
(``aot=True``) what AOT autograd makes of each: its ATen forward and backward graphs."""
from __future__ import annotations

import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
import torch.fx

from fxviz._torch_internals import dynamo as api
from fxviz._torch_internals import tree_leaves
from fxviz.capture._common import Capture, finish, first_line, front_end, path_from_stack
from fxviz.capture.info import graph_info
from fxviz.capture.places import package_relative, where
from fxviz.capture.backward import MARK
from fxviz.capture.names import name_ends
from fxviz.capture.shown import shown_graph, shown_note
from fxviz.errors import TraceError

#: :class:`GraphInfo` fields of a dynamo graph's AOT graphs (GraphModules, or None)
AOT_PARTS = ("aot_forward", "aot_backward")


def capture(fn: Callable[..., Any], inputs: tuple, *, aot: bool = True, backward: bool = False,
            kwargs: dict[str, Any] | None = None, compiler: Callable[..., Any] | None = None) -> Capture:
    """Run ``fn(*inputs, **kwargs)`` under ``torch.compile`` with a recording backend: every graph
    in the order it ran (with the inputs it was first called with), its guards, and
    each graph break's reason and user line. ``aot``: each graph also goes through AOT
    autograd, recording its ATen forward graph (without ``backward``, AOT's inference
    trace: it adds about a quarter to dynamo's own capture, bench/compiled.py, so
    ``tracer="auto"``'s fallback has it too)
    and, with ``backward`` (run as ``torch.autograd.grad``: no ``.grad`` is written),
    its backward graph. A graph AOT cannot trace keeps its dynamo graph, with the reason
    in its ``graph_info(gm).aot_error``. ``compiler(forward, backward)``: the backend that hands
    AOT's graphs to those recorders instead of AOT autograd alone (inductor's, which runs
    its own code); its errors are raised."""
    ran: list[torch.fx.GraphModule] = []  # in the order they first ran (a graph compiled, never run: not shown)
    guards: dict[str | None, list[str]] = {}
    root = _model_of(fn)
    modules = {id(m): path for path, m in root.named_modules()} if root is not None else {}

    def record(gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
        gm.meta["fxviz_compile_id"] = api.compile_id()
        _absolute_stacks(gm, *api.frame_scope(), modules)  # before AOT: its graphs copy the stacks
        run = gm.forward
        if aot:
            try:
                with messages.quiet():
                    run = (compiler or api.aot_backend)(_recorder(gm, "aot_forward"),
                                                        _recorder(gm, "aot_backward"))(gm, example_inputs)
            except Exception as exc:  # the dynamo graph still opens; the list says why it has no AOT parts
                if compiler is not None:
                    raise
                gm.meta["fxviz_aot_error"] = first_line(exc)

        def recorded(*args: Any) -> Any:
            nonlocal run
            if "fxviz_inputs" not in gm.meta:
                gm.meta["fxviz_inputs"] = _kept(args)
                ran.append(gm)
                if run is not gm.forward and compiler is None:
                    try:  # AOT's graph can fail where dynamo's runs (torch's fake strides: PatchTST's view)
                        return run(*args)
                    except Exception as exc:  # the dynamo graph opens without AOT parts, saying why
                        gm.meta["fxviz_aot_error"] = f"AOT's forward failed when run: {first_line(exc)}"
                        for part in AOT_PARTS:
                            gm.meta.pop(f"fxviz_{part}", None)
                        run = gm.forward
            return run(*args)

        return recorded

    def export_guards(exported: Any) -> None:
        guards.setdefault(api.compile_id(), []).extend(api.guard_lines(exported))

    messages = api.BreakMessages()
    with api.fresh_dynamo(), messages:
        try:
            # A plain function may be a training step: it takes its own gradients.
            grad = backward or not isinstance(fn, torch.nn.Module)
            with torch.set_grad_enabled(grad):
                outputs = api.optimize(record, export_guards)(fn)(*inputs, **(kwargs or {}))
                if backward:
                    with messages.quiet():  # compiles the backward graphs: no graph breaks there
                        _differentiate(outputs, fn, (*inputs, *(kwargs or {}).values()))
        except Exception as exc:
            explained = [line.strip() for line in str(exc).splitlines() if line.strip().startswith("Explanation:")]
            raise TraceError(f"dynamo could not capture the model{where(exc, api.error_frame(exc))}\n"
                             f"  {first_line(exc)}" + "".join(f"\n  {line}" for line in explained[:1])) from exc
        trees = api.guard_trees(record)
    graphs = list(ran)
    if not graphs:
        raise TraceError("dynamo captured no graph: the model runs no tensor operations dynamo can record.")
    for gm in graphs:
        gm.meta["fxviz_break"] = _graph_break(gm, messages)
    breaks = [g.meta["fxviz_break"] for g in graphs if g.meta["fxviz_break"]]
    names = {id(t): name for name, t in (*root.named_parameters(), *root.named_buffers())} if root is not None else {}
    for index, gm in enumerate(graphs):
        cid = gm.meta["fxviz_compile_id"]
        _name_inputs(gm, names)
        parts = {part: _finished_part(gm, part, root, index, names) for part in AOT_PARTS}
        finish(gm, "dynamo", root, graph_index=index, graph_count=len(graphs), graph_breaks=breaks,
               graph_inputs=tuple(gm.meta["fxviz_inputs"]), guards=tuple(guards.get(cid, ())),
               guard_tree=trees.get(cid, ""), graph_break=gm.meta["fxviz_break"],
               aot_error=gm.meta.pop("fxviz_aot_error", None), **parts)
    name_ends(graphs, fn, (*inputs, *(kwargs or {}).values()), tuple(kwargs or {}))  # fxviz.compiled's too
    shown = shown_graph(graphs)  # graph 0 may be setup before the layers (DBRX's attention mask)
    return Capture(graphs, "dynamo", graph_breaks=breaks, shown=shown, note=shown_note(graphs, shown))


def split_note(name: str, result: Capture, attempts: list[tuple[str, str]]) -> str:
    """Why ``tracer="auto"`` opened ``name`` as dynamo's graphs cut at graph breaks (what
    stopped each method that would have made one whole graph) and what the user can do, then
    which graph is shown first (``result.note``); that alone when there is no break."""
    if not result.graph_breaks:
        return result.note
    count, first = len(result.graphs), result.graph_breaks[0]
    at = f" at {first['user_line']}" if first.get("user_line") else ""
    stopped = "".join(f"\n  - {method}: {reason}" for method, reason in attempts if not reason.startswith("skipped: needs"))
    return (
        f"{name} opened as {count} graph{'s' * (count != 1)}, cut where dynamo broke (the first: "
        f"{first['reason']}{at}): what runs at a break is in no graph. No method traced it as one graph:{stopped}\n"
        "Each graph is checked on its own, on the inputs dynamo gave it, not the whole model or step.\n"
        "What to do: make the line where each method stopped traceable (a Python branch or loop on a "
        "tensor's value: torch.where or torch.cond, or an option of the library that takes a traceable path); "
        "then it opens as one graph. Meanwhile explore() lists the graphs and opens each on its own."
        + (f"\n{result.note}" if result.note else ""))


def _recorder(owner: torch.fx.GraphModule, part: str) -> Callable[..., Any]:
    """An AOT compiler that keeps the graph it is given (on ``owner``'s meta) and the
    real inputs of its first call; it runs the graph, or ``call`` (the code a compiler made of it)."""

    def compile_part(gm: torch.fx.GraphModule, _example_inputs: list,
                     call: Callable[..., Any] | None = None) -> Callable[[list], Any]:
        owner.meta[f"fxviz_{part}"] = gm

        def run(*args: Any) -> Any:
            gm.meta.setdefault("fxviz_inputs", _kept(args))
            return (call or gm.forward)(*args)

        return api.boxed(run)

    return compile_part


def _model_of(fn: Any) -> torch.nn.Module | None:
    """The model whose parameters the graphs lift: ``fn`` itself, or the one a plain
    function (a training step) closes over."""
    from fxviz.capture.closure import closed_over_module

    return fn if isinstance(fn, torch.nn.Module) else closed_over_module(fn)


def _kept(args: tuple) -> tuple:
    """The inputs a graph ran on, without the autograd history they carry (activations
    of the graph before): parameters stay themselves (they mark lifted parameters)."""
    return tuple(a.detach() if isinstance(a, torch.Tensor) and a.grad_fn is not None else a for a in args)


def _differentiate(outputs: Any, fn: Any, inputs: tuple) -> None:
    """Run the compiled backward graphs: gradients of every output that needs one,
    with ``torch.autograd.grad`` (returned, not accumulated into the model's ``.grad``)."""
    outs = [t for t in tree_leaves(outputs) if isinstance(t, torch.Tensor) and t.requires_grad]
    model = _model_of(fn)
    params = list(model.parameters()) if model is not None else []
    leaves = [t for t in [*params, *inputs] if isinstance(t, torch.Tensor) and t.requires_grad]
    if outs and leaves:
        torch.autograd.grad(outs, leaves, [torch.ones_like(t) for t in outs], allow_unused=True)


def _name_inputs(gm: torch.fx.GraphModule, names: dict[int, str]) -> None:
    """Placeholders fed a parameter or buffer of the model get its qualified name (the
    drawing, node table, details and search name them by it) and module (dynamo and AOT
    lift them to inputs: ``primals_1`` is ``lin.weight``); the model's own inputs are at
    the top level."""
    for node, value in zip(gm.graph.find_nodes(op="placeholder"), gm.meta["fxviz_inputs"]):
        name = names.get(id(value))
        node.meta["module_path"] = name.rpartition(".")[0] if name else ""
        if name:
            node.meta["qualified_name"] = name


def _absolute_stacks(gm: torch.fx.GraphModule, scope: dict[str, Any], frame_self: Any,
                     modules: dict[int, str]) -> None:
    """Dynamo names a module by its source in the frame it compiled (``L['self'].layer[0]``):
    relative to that frame's module when the graph starts inside a submodule (after a graph
    break there, or an inner frame), while lifted parameters are named from the root. So
    each stack entry becomes the module's path in the root model, found by identity, and an
    op outside any submodule call gets the frame's own module: a module's parameters and
    ops share one cluster. A source that names no module of the root stays as it was."""
    found: dict[str, str | None] = {}
    frame = modules.get(id(frame_self)) if frame_self is not None else None
    for node in gm.graph.nodes:
        stack = node.meta.get("nn_module_stack")
        if stack:
            node.meta["nn_module_stack"] = {
                key: (_module_path(str(source), scope, modules, found) or source, kind)
                for key, (source, kind) in stack.items()}
        elif frame is not None and node.op not in ("placeholder", "output"):  # the root's ("") too: the
            # stack tells method_path which frame is the root's forward (``self.corr.lookup(...)``)
            node.meta["nn_module_stack"] = {"frame": (frame, type(frame_self))}


def _module_path(source: str, scope: dict[str, Any], modules: dict[int, str],
                 found: dict[str, str | None]) -> str | None:
    if source not in found:
        held = _follow(source, scope)
        found[source] = modules.get(id(held)) if held is not None else None
    return found[source]


_ROOT = re.compile(r"L\[(['\"])(.+?)\1\]")
_STEP = re.compile(r"\.(\w+)|\[(['\"]?)(.*?)\2\]")


def _follow(source: str, scope: dict[str, Any]) -> Any:
    """The object a source names in the frame's locals: ``L['x']``, then attributes,
    entries and keys (dynamo writes ``L['self'].layer.0``, ``.layer[0]``, ``['block']``);
    None for any other source (a global, a call)."""
    root = _ROOT.match(source)
    held, at = (scope.get(root[2]), root.end()) if root else (None, 0)
    while held is not None and at < len(source):
        step = _STEP.match(source, at)
        if step is None:
            return None
        held, at = _child(held, step[1] or step[3], quoted=bool(step[2])), step.end()
    return held


def _child(held: Any, key: str, *, quoted: bool) -> Any:
    if quoted or key.lstrip("-").isdigit():  # an entry (a ModuleList's .0, a dict's ['key']) before an attribute
        try:
            return held[key if quoted else int(key)]
        except (TypeError, KeyError, IndexError):
            pass
    return getattr(held, key, None)


def _backward_modules(gm: torch.fx.GraphModule) -> None:
    """AOT keeps on each backward node the module stack of the forward op it
    differentiates: drawn as a "<module> · backward" cluster beside the forward one."""
    for node in gm.graph.nodes:
        stack = node.meta.get("fwd_nn_module_stack")
        if stack and "nn_module_stack" not in node.meta:
            path = path_from_stack(SimpleNamespace(meta={"nn_module_stack": stack}))
            node.meta["backward_of"] = path
            node.meta["module_path"] = path + MARK if path else "backward"


def _finished_part(owner: torch.fx.GraphModule, part: str, root: Any, index: int,
                   names: dict[int, str]) -> torch.fx.GraphModule | None:
    gm = owner.meta.pop(f"fxviz_{part}", None)
    if gm is None or "fxviz_inputs" not in gm.meta:  # not compiled, or compiled and never run
        return None
    _name_inputs(gm, names)
    _backward_modules(gm)
    finish(gm, f"dynamo · AOT {part.removeprefix('aot_')}", root, graph_index=index,
           graph_inputs=tuple(gm.meta["fxviz_inputs"]))
    types = graph_info(gm).module_types
    for path in {n.meta["backward_of"] for n in gm.graph.nodes if n.meta.get("backward_of") in types}:
        types[path + MARK] = types[path]
    return gm


def _graph_break(gm: torch.fx.GraphModule, messages: dict[str, str]) -> dict[str, Any] | None:
    """``{reason, detail, user_line}`` of the graph break that ended ``gm``, or None."""
    is_break, reason, stack = api.compile_reason(gm)
    if not is_break:
        return None
    detail = _message(messages.get(gm.meta["fxviz_compile_id"] or "")) or reason.strip()
    headline = next((line.strip() for line in detail.splitlines()
                     if line.strip() and not line.startswith("Encountered graph break")), reason)
    return {"reason": headline.rstrip(":"), "detail": detail, "user_line": _user_line(stack)}


def _message(payload: str | None) -> str:
    """The reason, explanation and hints of dynamo's graph-break log entry, without its
    tracebacks and developer context."""
    if not payload:
        return ""
    text = payload.partition("Graph Break Reason:")[2].partition("\nUser code traceback:")[0]
    keep = [line for line in text.splitlines()
            if not line.strip().startswith(("Developer debug context", "For more details about this graph break"))]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip()


def _user_line(stack: Any) -> str | None:
    frames = list(stack or ())
    return f"{package_relative(frames[-1].filename)}:{frames[-1].lineno}" if frames else None


front_end("dynamo", auto=50, about=("TorchDynamo, torch.compile's capture: the torch functions and methods the "
                                     "model ran, one graph per stretch of code between graph breaks"))(
    lambda r: capture(r.model, r.args, kwargs=r.kwargs))

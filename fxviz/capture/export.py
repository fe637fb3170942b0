"""torch.export: an ExportedProgram (made here, given, or loaded from a ``.pt2`` file)
as a runnable GraphModule whose parameters keep their qualified names."""
from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx
from torch import nn

from fxviz.capture._common import finish, first_line, front_end, with_stack_room
from fxviz.capture.info import graph_info
from fxviz.capture.keywords import keywords_last
from fxviz.capture.places import where
from fxviz._torch_internals import call_inputs
from fxviz._torch_internals.unlift import unlifted
from fxviz.errors import InputError, TraceError


def is_exported(model: Any) -> bool:
    """An ExportedProgram or a path to a ``.pt2`` file."""
    return isinstance(model, torch.export.ExportedProgram) or (
        isinstance(model, (str, os.PathLike)) and str(model).endswith(".pt2"))


def load(model: Any) -> torch.export.ExportedProgram:
    if isinstance(model, torch.export.ExportedProgram):
        return model
    try:
        return torch.export.load(model)
    except Exception as exc:
        raise TraceError(f"Cannot load the exported program {str(model)!r}: {first_line(exc)}") from exc


def positional_inputs(ep: torch.export.ExportedProgram, inputs: tuple, kwargs: dict[str, Any] | None = None) -> tuple:
    """``inputs`` (and keyword inputs ``kwargs``) for ``ep`` as fxviz passes them (one
    tuple, keyword inputs after the positional ones, in the program's order); none given:
    those ``ep`` was exported with. Raises InputError when they are not the program's."""
    count, names = call_inputs(ep)
    if kwargs:
        if set(kwargs) != set(names):
            raise InputError(f"This exported program takes the keyword inputs ({', '.join(names) or 'none'}), "
                             f"not ({', '.join(kwargs)}): pass exactly those it was exported with.")
        inputs = (*inputs, *(kwargs[name] for name in names))
    if not inputs and ep.example_inputs:  # a .pt2 file keeps the inputs it was exported with
        args, kwargs = ep.example_inputs
        return (*args, *(kwargs[name] for name in names))
    if count is not None and len(inputs) != count + len(names):
        keywords = f", then its keyword inputs ({', '.join(names)}), in that order" if names else ""
        saved = ", or none to use those it was exported with" if ep.example_inputs else ""
        raise InputError(f"This exported program takes {count} positional input{'s' * (count != 1)}{keywords}: "
                         f"{len(inputs)} given. Pass them as one tuple{saved}.")
    return inputs


def reference(ep: torch.export.ExportedProgram) -> nn.Module:
    """``ep.module()`` (the model a Session checks against) called as fxviz calls a graph:
    with positional inputs only, the last ones its keyword inputs."""
    return keywords_last(ep.module(), call_inputs(ep)[1])


def capture(model: nn.Module, inputs: tuple, *, strict: bool = False,
            kwargs: dict[str, Any] | None = None) -> torch.fx.GraphModule:
    """``torch.export.export(model, inputs, strict=strict)`` as a GraphModule."""
    try:
        with without_partial_graph():
            ep = with_stack_room(lambda: torch.export.export(model, inputs, kwargs, strict=strict))
    except Exception as exc:
        mode = "strict" if strict else "non-strict"
        raise TraceError(f"torch.export ({mode}) failed{where(exc)}\n  {first_line(exc)}{_advice(exc)}") from exc
    return from_program(ep, "export (strict)" if strict else "export", model)


def _advice(exc: Exception) -> str:
    """What to do, where torch.export stopped at a Python branch on a tensor's value
    (Longformer's ``if is_global_attn:``): one graph cannot hold it, several can."""
    if "data-dependent" not in str(exc):
        return ""
    return ("\n  What to do: the model branches on a tensor's value here, which one exported graph cannot hold: "
            "tracer='auto' opens it as dynamo's graphs, cut at this line; or write the branch as torch.cond "
            "(or check the value with torch._check) in the model.")


@contextlib.contextmanager
def without_partial_graph() -> Iterator[None]:
    """torch.export prints the partial graph of a failed export to stderr, once per wrapper
    it passes (hundreds of lines each, for each export the auto chain tries): fxviz reports
    the failure itself, with the exception kept as its cause. What else is written to
    stderr meanwhile (warnings) is passed on."""
    written, partial = io.StringIO(), None
    try:
        with contextlib.redirect_stderr(written):
            yield
    except Exception as exc:
        partial = getattr(exc, "partial_fx_graph", None)
        raise
    finally:  # an interrupt too: nothing else written is lost
        text = written.getvalue()
        sys.stderr.write(text.replace(f"{partial}\n", "") if partial else text)


def from_program(ep: torch.export.ExportedProgram, method: str = "exported program",
                 model: nn.Module | None = None) -> torch.fx.GraphModule:
    """``ep.module()``: lifted parameters, buffers and constants become attributes under
    their qualified names (``conv1.weight``), so the graph runs as a module does. ``model``,
    where known (the one exported): its modules' types, those only called through a method
    too (``nn_module_stack`` names only those whose forward ran), and its modules are the
    paths a method's ops may move to (:func:`fxviz.capture.places.method_path`). Made by
    :func:`unlifted` (one graph copy, code made on first call) where the program only
    reads its weights; ``ep.module()`` itself where it writes some back."""
    gm = unlifted(ep) or ep.module()
    if call_inputs(ep)[1]:  # fxviz calls a graph positionally, keyword inputs last (the generated
        gm.validate_inputs = False  # forward takes them so): the hook checking (args, kwargs) would refuse it
    # The graph fixed train/eval behaviour at export (batch_norm's training flag, dropout
    # ops); module flags (True on ep.module()'s guard module) mean nothing here, and
    # ep.module() refuses .eval(), so the flags are set directly.
    for module in gm.modules():
        module.training = False
    # ep.module() calls a `_guards_fn` module first (input shape checks): not part of the
    # model, and a call_module in an ATen graph. The placeholders' "val" keep the shapes.
    for node in gm.graph.find_nodes(op="call_module", target="_guards_fn"):
        gm.graph.erase_node(node)
        gm.delete_submodule("_guards_fn")
    for node in gm.graph.find_nodes(op="get_attr"):
        if not node.users:  # a buffer the program never reads (an eval BatchNorm's num_batches_tracked):
            gm.graph.erase_node(node)  # a line of code and the table's first rows, saying nothing
    next_to_first_user(gm.graph)
    gm.recompile()
    # The pytree hooks of ep.module() check inputs against the export's spec; a Session
    # forks the graph into plain GraphModules, which keep the codegen (flat tuple in/out).
    first_types = {}  # each module path's type where first read: every node lists its modules
    for node in ep.graph.nodes:
        for path, type_name in (node.meta.get("nn_module_stack") or {}).values():
            if path not in first_types:
                first_types[path] = type_name
    types = {}
    for path, type_name in first_types.items():
        types.setdefault(str(path).removeprefix("L['self']."), str(type_name).rpartition(".")[2])
    gm = finish(gm, method, model)
    graph_info(gm).module_types = {**{p: t for p, t in types.items() if p}, **graph_info(gm).module_types}
    for node in gm.graph.find_nodes(op="get_attr"):
        node.meta["module_path"] = str(node.target).rpartition(".")[0]
        node.meta["qualified_name"] = str(node.target)
    return gm


def next_to_first_user(graph: torch.fx.Graph) -> None:
    """ep.module() reads every parameter at the top of the graph: each get_attr moves to
    just before its first user, where symbolic tracing and make_fx put it. Else a module's
    parameter lies far from its ops, and the drawing (which draws a module whose nodes lie
    far apart in its parent) loses every block's box: all of a transformer's layers in one."""
    order = {node: i for i, node in enumerate(graph.nodes)}
    for node in list(graph.find_nodes(op="get_attr")):
        if node.users:
            min(node.users, key=order.__getitem__).prepend(node)


def run_decompositions(gm: torch.fx.GraphModule, inputs: tuple, table: Any = None) -> torch.fx.GraphModule:
    """The graph lowered to core ATen (or to ``table``), re-exported from ``gm``."""
    ep = with_stack_room(lambda: torch.export.export(gm, inputs, strict=False))
    return from_program(ep.run_decompositions(table), "export + run_decompositions")


_ATEN_FORWARD = "the ATen operators the forward ran"
front_end("export", auto=20, needs_module=True, about=f"torch.export (non-strict): {_ATEN_FORWARD}")(
    lambda r: capture(r.plain, r.args, kwargs=r.kwargs))
front_end("export (strict)", auto=30, needs_module=True,
          about=f"torch.export (strict, through TorchDynamo): {_ATEN_FORWARD}")(
    lambda r: capture(r.plain, r.args, strict=True, kwargs=r.kwargs))

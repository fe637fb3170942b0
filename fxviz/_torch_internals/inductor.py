"""torch's private inductor API: compiling a dynamo graph with inductor while keeping the
ATen graph inductor was given, its generated code and which node went into which kernel.

Provenance tracking (``config.trace.provenance_tracking_level``, torch >= 2.8) maps each
kernel call to the post-grad nodes it computes (read from inductor's debug table as each
graph is compiled); a mark on each node inductor was handed, and ``from_node`` meta for the
nodes its passes made, lead from those back to that graph, the one fxviz shows. Imported
on use.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

#: ``gm.meta`` key of what inductor made of a recorded graph (:class:`Lowered`)
KEY = "fxviz_inductor"
#: ``node.meta`` key naming, on each node of the graph inductor is handed, that node
_SHOWN = "fxviz_shown_as"


@dataclass
class Lowered:
    """What inductor made of one ATen graph (``part``: "forward" or "backward"): the wrapper
    module's ``source``, its kernel calls (``"name:handle"`` -> post-grad node names), the
    graph's node names each post-grad node came from, the compiled callable (boxed: one
    list argument) and, once measured, its kernels timed (``fxviz.compiler.kernel_times.timed``)."""

    part: str
    source: str
    calls: dict[str, list[str]]
    origins: dict[str, list[str]]
    compiled: Callable[[list], Any] = field(repr=False)
    timed: Any = field(default=None, repr=False)


@contextlib.contextmanager
def settings() -> Iterator[None]:
    """inductor's config for a recorded compile, restored afterwards: provenance tracking
    on, C++ kernels named in the profiler, no FX graph or AOT caches (a hit skips the code
    generation the mapping comes from); the cache directory a temporary one, removed
    afterwards, unless the user set ``TORCHINDUCTOR_CACHE_DIR``."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as config
    from torch._inductor.codecache import CacheBase
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # importing inductor sets it to its default
    users = before and before != os.path.abspath(default_cache_dir())
    own = None if users else tempfile.mkdtemp(prefix="fxviz-inductor-")
    if own:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = own
    patch = {"trace.provenance_tracking_level": 1, "cpp.enable_kernel_profile": True,
             "fx_graph_cache": False, "fx_graph_remote_cache": False}
    try:
        with config.patch(patch), functorch_config.patch(enable_autograd_cache=False):
            yield
    finally:
        if own:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR")
            if before is not None:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = before
            CacheBase.get_local_cache_path.cache_clear()  # remembers the directory
            shutil.rmtree(own, ignore_errors=True)


def missing_compiler() -> str | None:
    """Why inductor cannot build C++ kernels (no compiler found), or None."""
    from torch._inductor import cpp_builder, exc

    try:
        cpp_builder.get_cpp_compiler()
    except (exc.InvalidCxxCompiler, OSError) as error:
        return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return None


def backend(forward: Callable[..., Any], backward: Callable[..., Any]) -> Callable[..., Any]:
    """A dynamo backend compiling with inductor (its decompositions, AOT autograd, its
    passes and code generation). ``forward``/``backward(gm, example_inputs, run)`` are
    handed a copy of each ATen graph as inductor receives it and the compiled code's
    unboxed call, and return the boxed callable to run instead."""
    from torch._inductor import debug
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    def inner(gm: torch.fx.GraphModule, example_inputs: list, **kwargs: Any) -> Any:
        for node in gm.graph.nodes:  # which post-grad nodes are these very nodes (a pass may reuse a name)
            node.meta[_SHOWN] = node.name
        handed = id(gm.graph)
        shown = torch.fx.GraphModule(gm, _copied(gm.graph))  # inductor's passes rewrite gm
        before = set(debug._inductor_triton_kernel_to_post_grad_node_info)
        try:
            out = compile_fx_inner(gm, example_inputs, **kwargs)
        except Exception as exc:  # said with the user's line, where the op's node has one
            raise InductorFailed(exc, _stack_of(exc, shown)) from exc
        compiled = out.current_callable
        part = "backward" if kwargs.get("is_backward") else "forward"
        record = backward if part == "backward" else forward
        out.current_callable = record(shown, example_inputs, lambda *args: compiled(list(args)))
        # inductor's own JSON of it is empty for a backward compiled after the forward's compile ended
        calls = {key: list(nodes) for key, nodes in debug._inductor_triton_kernel_to_post_grad_node_info.items()
                 if key not in before}
        for table in ("_inductor_triton_kernel_to_post_grad_node_info", "_inductor_kernel_stack_trace",
                      "_inductor_kernel_extern_info"):  # inductor keeps them for its debug dumps: ours are read
            for key in calls:
                getattr(debug, table, {}).pop(key, None)
        shown.meta[KEY] = Lowered(part, out.source_code, calls, _origins(gm, handed), out)
        return out

    return lambda gm, example_inputs: compile_fx(gm, example_inputs, inner_compile=inner)


class InductorFailed(Exception):
    """inductor's error while compiling a graph, with the stack trace of the node it was
    lowering when its message names one ("" otherwise)."""

    def __init__(self, error: BaseException, stack: str):
        text = str(error).strip()
        said = next((line for line in text.splitlines() if line.strip()), type(error).__name__)
        super().__init__(f"inductor could not compile it: {type(error).__name__}: {said.strip()[:300]}")
        self.stack = stack


def _copied(graph: torch.fx.Graph) -> torch.fx.Graph:
    """``graph`` node for node, names kept (meta dicts copied, their values shared)."""
    import copy

    return copy.deepcopy(graph)


def _stack_of(error: BaseException, gm: torch.fx.GraphModule) -> str:
    """The stack trace of the node whose operator inductor's message names."""
    text = str(error)
    for node in gm.graph.nodes:
        if node.op == "call_function" and f"target: {node.target}" in text:
            return node.meta.get("stack_trace") or ""
    return ""


def _origins(post: torch.fx.GraphModule, handed: int) -> dict[str, list[str]]:
    """Each post-grad node's origins among the nodes of the graph inductor was handed (``id``
    ``handed``): the node itself when the passes kept it (or copied its meta), else the
    nodes of that graph its ``from_node`` provenance leads to."""
    found = {}
    for node in post.graph.nodes:
        if _SHOWN in node.meta:
            found[node.name] = [node.meta[_SHOWN]]
            continue
        names, todo = [], list(node.meta.get("from_node") or ())
        while todo:
            source = todo.pop(0)
            if getattr(source, "graph_id", None) == handed:
                if source.name not in names:
                    names.append(source.name)
            else:
                todo.extend(getattr(source, "from_node", None) or ())
        found[node.name] = names
    return found

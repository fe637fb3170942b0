"""Every private torch API fxviz uses, in one place.

torch has no public equivalent for these. Reaching them only through this module
means a torch release that moves one breaks here, in one import, and nowhere else;
``tests/test_house.py`` keeps the other modules from reaching into torch's privates.
Checked on torch 2.14.1 (the version the suite runs on); pyproject allows
torch>=2.5, and a name that a given version lacks fails when fxviz is imported,
naming this module.

Dynamo's and AOT autograd's private API (graph capture for ``torch.compile``) is in
the ``dynamo`` module beside this one, imported on use: it costs seconds; torch.export's
joint forward+backward program, in ``joint``. torch's FLOP
counter, made to count attention and never to stop a run, is in ``flops``, imported when
:class:`FlopCounter` is first read (:func:`__getattr__`): torch's imports triton where it
is installed, 0.1 s of a cold ``import fxviz`` that only a run which counts needs.

Not here: private *attributes* whose names are a protocol with torch rather than an
API, used where they matter: ``_orig_mod`` (which make_fx reads to record module
paths, fxviz/capture/make_fx.py) and nn.Module's ``_parameters``/``_buffers``/
``_modules`` dicts (copied by fxviz/_cow.py for copy-on-write module trees;
read by fxviz/annotation/_values.py's ``module_signature``).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket  # the types of ATen operator targets
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.graph_module import _WrappedCall, _assign_attr, _get_attr
from torch.fx.node import _get_qualified_name
from torch.fx.passes.shape_prop import _extract_tensor_metadata
from torch.utils._pytree import register_pytree_node, tree_leaves, tree_map, tree_map_only  # torch's own pytree (no public one)
from torch.utils._python_dispatch import TorchDispatchMode  # the only way to see every ATen call

from fxviz.errors import NoSuchAttribute

try:  # what non-strict torch.export sets while it traces; missing from some torch fxviz supports
    from torch._export.utils import _compiling_state_context
except ImportError:
    _compiling_state_context = None
#: whether :func:`make_fx_on_fakes` can trace as torch.export does (``compiling=True``)
TRACES_AS_COMPILING = _compiling_state_context is not None
#: The CPU flash attention kernel, which every ``scaled_dot_product_attention`` on CPU runs.
FLASH_CPU = "_scaled_dot_product_flash_attention_for_cpu"

__all__ = [
    "HigherOrderOperator", "OpOverload", "OpOverloadPacket", "TorchDispatchMode", "register_pytree_node", "tree_leaves", "tree_map",
    "tree_map_only",
    "FLASH_CPU", "FlopCounter", "assign_attr", "core_aten_decompositions", "current_autograd_node",
    "as_called", "extract_tensor_metadata", "get_attr", "has_values", "is_fake", "op_schema", "qualified_name", "code_by_node",
    "code_made", "code_on_first_use", "takes_as_exported", "TRACES_AS_COMPILING",
]


def __getattr__(name: str) -> Any:
    """``FlopCounter``, imported from ``flops`` when first read (see the module's docstring)."""
    if name != "FlopCounter":
        raise NoSuchAttribute(f"module {__name__!r} has no attribute {name!r}")
    from fxviz._torch_internals.flops import FlopCounter

    globals()[name] = FlopCounter
    return FlopCounter


def extract_tensor_metadata(tensor: torch.Tensor) -> Any:
    """The ``TensorMetadata`` that ShapeProp stores in ``node.meta["tensor_meta"]``: made
    the same way, so readers of torch's own annotation read fxviz's."""
    return _extract_tensor_metadata(tensor)


def qualified_name(target: Callable[..., Any]) -> str:
    """The dotted name FX's code generator prints for a call_function target
    (``torch.nn.functional.relu``); raises RuntimeError or AttributeError when it has none."""
    return _get_qualified_name(target)


def get_attr(module: torch.nn.Module, target: str) -> Any:
    """What a get_attr/call_module node's dotted ``target`` refers to, resolved the way
    GraphModule itself does (it also reaches constants and modules torch.export nests)."""
    return _get_attr(module, target)


def assign_attr(value: Any, module: torch.nn.Module, target: str) -> None:
    """Set a dotted ``target`` on ``module``, making the submodules on the way (how
    GraphModule installs the tensors its get_attr nodes name)."""
    _assign_attr(value, module, target)


def current_autograd_node() -> Any:
    """The autograd node the engine is running now (None outside backward): its
    ``_sequence_nr()`` is that of the forward op it differentiates."""
    return torch._C._current_autograd_node()



def core_aten_decompositions() -> dict:
    """torch.export's core ATen decomposition table, less :data:`FLASH_CPU`'s forward (torch
    decomposes it wrongly for training: the decomposition's second output is the attention
    weights, where the backward kernel, never decomposed, reads the log-sum-exp): a
    graph with its backward got wrong gradients (a Llama's k_proj off by 4x its scale)."""
    from torch._decomp import core_aten_decompositions as table

    decompositions = table()
    decompositions.pop(getattr(torch.ops.aten, FLASH_CPU).default, None)
    return decompositions


def code_by_node(gm: torch.fx.GraphModule, *, regenerate: bool = False) -> tuple[str, list[int | None], dict[str, Any]]:
    """``gm``'s code (made now if it is not yet; ``regenerate``: made afresh from its graph,
    which may have been edited since, ``gm`` untouched), the index of the node each of its
    lines is the code of (None before the body: torch's map for naming a failing line),
    and the globals it runs in."""
    if regenerate:
        code = gm.graph.python_code(root_module="self")
        src, lines, start, namespace = code.src, code._lineno_map, code._prologue_start, code.globals
    else:
        src = gm.code
        lines, start, namespace = gm._lineno_map, gm._prologue_start, type(gm).forward.__globals__
    owner: list[int | None] = [None] * (src.count("\n") + 1)
    for line, index in lines.items():  # numbered from the function's header
        if 0 <= line + start - 1 < len(owner):
            owner[line + start - 1] = index
    return src, owner, namespace


def code_on_first_use(root: Any, graph: torch.fx.Graph, class_name: str) -> torch.fx.GraphModule:
    """``GraphModule(root, graph, class_name)`` that generates and compiles its code when
    first called or read (torch's ``_LazyGraphModule``, as inductor uses it): a copy about
    to be edited and recompiled skips making code it would throw away, seconds at 100k nodes."""
    return _LazyGraphModule(root, graph, class_name)


def code_made(gm: torch.fx.GraphModule) -> None:
    """Recompile ``gm`` now, also where ``recompile()`` only marks the code stale (a
    :func:`code_on_first_use` module): errors in making it surface here, not at a later
    call. Such a module then becomes a plain GraphModule, the same object with the code
    just made: torch.jit.script refuses lazy ones, and copies of one start without code."""
    gm.recompile()
    if not isinstance(gm, _LazyGraphModule):
        return
    gm.real_recompile()
    lazy = type(gm)
    # A class of its own per module, as GraphModule.__new__ makes (its name tells copies to
    # derive from GraphModule), with the forward just compiled and GraphModule's call wrapper.
    plain = type("GraphModuleImpl", (torch.fx.GraphModule,), {"forward": lazy.forward, "__call__": _call_wrapped})
    plain._wrapped_call = _WrappedCall(plain, None)
    plain.__name__ = lazy.__name__
    gm.__class__ = plain


def _call_wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
    """GraphModule's ``__call__`` (set by its ``recompile``): errors name the generated code's line."""
    return self._wrapped_call(self, *args, **kwargs)


def takes_as_exported(graph: torch.fx.Graph, program: Any) -> None:
    """``graph`` (of ``program``'s flat inputs, in its order) called as ``program`` is: its
    code takes the inputs traced (a dict, a list of tensors) and flattens them by the
    program's input spec (torch's codegen for ``ep.module()``); its outputs stay as the
    graph returns them. The caller recompiles."""
    from torch.export._unlift import _get_codegen  # imports dynamo: not before a program

    call = program.module_call_graph[0].signature if program.module_call_graph else None
    graph._codegen = _get_codegen(program.call_spec.in_spec, None, call.forward_arg_names if call else None)


def call_inputs(program: Any) -> tuple[int | None, list[str]]:
    """How an ExportedProgram is called: the number of its positional inputs (None when
    its input TreeSpec is not the usual ``(args, kwargs)``) and the names of its keyword
    inputs, in the order its graph takes them (after the positional ones)."""
    spec = program.call_spec.in_spec
    if spec is None or spec.type is not tuple or spec.num_children != 2:
        return None, []
    args, kwargs = _child(spec, 0), _child(spec, 1)
    return args.num_children, list(kwargs.context) if kwargs.type is dict else []


def _child(spec: Any, index: int) -> Any:
    """A TreeSpec's child (``child()``: torch >= 2.9, which deprecates ``children_specs``)."""
    return spec.child(index) if hasattr(spec, "child") else spec.children_specs[index]


def as_called(graph: torch.fx.Graph, flat: tuple) -> tuple[tuple, dict]:
    """The arguments ``graph``'s code is called with, ``(args, kwargs)``, holding ``flat`` (one
    value per placeholder): make_fx's and export's code take the structure traced (a list of
    images) and flatten it; export's spec is of ``(args, kwargs)``, make_fx's of ``args``."""
    from torch.utils._pytree import tree_unflatten

    info = getattr(graph._codegen, "pytree_info", None)
    if info is None or info.in_spec is None:
        return flat, {}
    called = tree_unflatten(list(flat), info.in_spec)
    spec = info.in_spec
    if spec.type is tuple and spec.num_children == 2 and _child(spec, 1).type is dict:
        return tuple(called[0]), dict(called[1])
    return tuple(called), {}


def op_schema(func: OpOverload) -> Any:
    """An ATen operator's schema (which arguments it writes into)."""
    return func._schema


def is_fake(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` has no values: on the meta device, or a FakeTensor."""
    from torch._subclasses.fake_tensor import FakeTensor

    return tensor.is_meta or isinstance(tensor, FakeTensor)


def has_values(tensor: torch.Tensor) -> bool:
    """False for meta and fake tensors, and the wrappers tracing makes of them (export's
    functional tensors): shapes and dtypes only, no storage to save, compare or guard."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    return not (tensor.is_meta or isinstance(tensor, (FakeTensor, FunctionalTensor)))


def uncompiled(model: Any) -> Any:
    """What ``torch.compile`` wrapped (the module of an ``OptimizedModule``, the function of
    a compiled one), else ``model``: capturing the wrapper would run dynamo inside a capture."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")  # not imported: nothing was compiled
    while eval_frame is not None:
        inner = (model._orig_mod if isinstance(model, eval_frame.OptimizedModule)
                 else getattr(model, "_torchdynamo_orig_callable", None))
        if inner is None:
            return model
        model = inner
    return model


def make_fx_on_fakes(fn: Callable[..., Any], decompositions: dict | None, record_module_stack: bool,
                     compiling: bool = False) -> Callable[..., Any]:
    """make_fx tracing on fake copies of the inputs, the tensors ``fn`` closes over
    (parameters) taken as they are (``_allow_non_fake_inputs``: no public switch).
    ``compiling``: with ``torch.compiler.is_compiling()`` and ``is_exporting()`` true, as
    non-strict torch.export traces (``_compiling_state_context``), so code that asks takes
    the path it keeps for compiled graphs (only where ``TRACES_AS_COMPILING``)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    traced = make_fx(fn, decompositions, tracing_mode="fake", _allow_non_fake_inputs=True,
                     record_module_stack=record_module_stack)
    if not compiling:
        return traced

    def trace(*inputs: Any) -> torch.fx.GraphModule:
        with _compiling_state_context():
            return traced(*inputs)
    return trace


def forget_last_trace() -> None:
    """Drop the graph make_fx keeps from its last trace (every node, with the values in
    their meta) in a module global for export's leak check, read only right after
    export's own trace: else a closed session's whole graph lives until the next one."""
    from torch.fx.experimental import proxy_tensor

    getattr(proxy_tensor, "_FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT", {}).clear()

"""Every private torch API fxviz uses, in one place.

torch has no public equivalent for these. Reaching them only through this module
means a torch release that moves one breaks here, in one import, and nowhere else;
``tests/test_house.py`` keeps the other modules from reaching into torch's privates.
Checked on torch 2.14.1 (the version the suite runs on); pyproject allows
torch>=2.5, and a name that a given version lacks fails when fxviz is imported,
naming this module.

Dynamo's and AOT autograd's private API (graph capture for ``torch.compile``) is in
the ``dynamo`` module beside this one, imported on use: it costs seconds.

Not here: private *attributes* whose names are a protocol with torch rather than an
API, used where they matter: ``_orig_mod`` (which make_fx reads to record module
paths, fxviz/capture/make_fx.py) and nn.Module's ``_parameters``/``_buffers``/
``_modules`` dicts (copied by fxviz/_cow.py for copy-on-write module trees).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch._ops import OpOverload, OpOverloadPacket  # the types of ATen operator targets
from torch.fx.graph_module import _get_attr
from torch.fx.node import _get_qualified_name
from torch.fx.passes.shape_prop import _extract_tensor_metadata
from torch.utils._pytree import tree_leaves, tree_map, tree_map_only  # torch's own pytree (no public one)
from torch.utils._python_dispatch import TorchDispatchMode  # the only way to see every ATen call
from torch.utils.flop_counter import FlopCounterMode

__all__ = [
    "OpOverload", "OpOverloadPacket", "TorchDispatchMode", "tree_leaves", "tree_map", "tree_map_only",
    "FlopCounter", "extract_tensor_metadata", "get_attr", "is_fake", "op_schema",
    "qualified_name", "share_codegen",
]


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


def share_codegen(graph: torch.fx.Graph, source: torch.fx.Graph) -> None:
    """Give ``graph`` the code generator of ``source`` (export's graphs have their own,
    with pytree in/out specs); ``set_codegen`` is public, reading it is not."""
    graph.set_codegen(source._codegen)


def op_schema(func: OpOverload) -> Any:
    """An ATen operator's schema (which arguments it writes into)."""
    return func._schema


def is_fake(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` has no values: on the meta device, or a FakeTensor."""
    from torch._subclasses.fake_tensor import FakeTensor

    return tensor.is_meta or isinstance(tensor, FakeTensor)


class FlopCounter(FlopCounterMode):
    """A FlopCounterMode that also says whether any operator it has a formula for ran:
    FLOPs of an operator without one (BatchNorm, ReLU, add) are unknown, not zero.
    ``_count_flops`` is the hook torch calls once per operator (no public one)."""

    counted = False

    def _count_flops(self, func_packet, out, args, kwargs):
        self.counted = self.counted or func_packet in self.flop_registry
        return super()._count_flops(func_packet, out, args, kwargs)

"""Values as the annotated run (:mod:`fxviz.annotation.shapes`) sees them: what a call's FLOPs
depend on (its signature), their tensor metadata, the tensors inside containers."""
from __future__ import annotations

import operator
from typing import Any

import torch
from torch.fx.node import map_aggregate
from torch.fx.passes.shape_prop import TensorMetadata

from fxviz._torch_internals import extract_tensor_metadata, tree_leaves


class Unknown:
    """Metadata that could not be read, and why."""

    def __init__(self, why: str):
        self.why = why


def tensors(values: Any) -> list[torch.Tensor]:
    """The tensors among ``values`` and inside their containers (pytree leaves)."""
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif not isinstance(value, (int, float, bool, str, type(None))):
            found += [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]
    return found


def signature(value: Any) -> Any:
    """What a call's operators and their FLOPs depend on: tensors by shape, dtype and
    device, everything else by value (raises TypeError when that is unhashable)."""
    if isinstance(value, torch.Tensor):
        return (value.shape, value.dtype, value.device, value.layout)
    if isinstance(value, (tuple, list)):
        return (type(value), *map(signature, value))
    if isinstance(value, dict):
        return (dict, *((k, signature(v)) for k, v in value.items()))
    if isinstance(value, slice):  # unhashable before Python 3.12
        return (slice, signature(value.start), signature(value.stop), signature(value.step))
    hash(value)
    return (type(value), value)  # type too: 1 == 1.0 == True, yet they dispatch differently


def module_signature(module: torch.nn.Module) -> Any:
    """What a module's call and its FLOPs depend on besides its inputs: its class, its
    settings (stride, groups, training), its parameters' and buffers' signatures and its
    submodules', so that the equal layers of a stack share one count. None where a
    setting is unhashable or a hook could change what the call runs. Read for every
    module a graph calls: plain settings and tensor tables take a short path."""
    parts: list[Any] = [module.__class__]
    try:
        for name, value in module.__dict__.items():
            kind = value.__class__
            if kind in _PLAIN:
                parts.append((name, kind, value))
                continue
            if "hook" in name:
                if value:
                    return None
                continue
            if name == "_modules":
                value = tuple((k, () if m is None else module_signature(m)) for k, m in value.items())
                if any(part is None for _, part in value):  # a submodule that has none
                    return None
            elif name in _TENSOR_TABLES:
                value = tuple((k, None if t is None else (t.shape, t.dtype, t.device, t.layout))
                              for k, t in value.items())
            elif isinstance(value, (set, frozenset)):
                value = frozenset(value)
            else:
                value = signature(value)
            parts.append((name, value))
    except TypeError:  # an unhashable setting
        return None
    return tuple(parts)


_PLAIN = frozenset({bool, int, float, str, type(None)})  # settings that are their own signature, with their type
_TENSOR_TABLES = frozenset({"_parameters", "_buffers"})


def module_tensors(module: torch.nn.Module) -> list[torch.Tensor]:
    """A module's parameters and buffers, its submodules' included, each once: one walk
    (``parameters()`` and ``buffers()`` walk the tree each, through generators)."""
    found: dict[int, torch.Tensor] = {}
    for part in module.modules():
        for table in (part._parameters, part._buffers):
            for tensor in table.values():
                if tensor is not None:
                    found[id(tensor)] = tensor
    return list(found.values())


def tensor_metadata(value: Any) -> Any:
    """torch's ``TensorMetadata`` of a tensor, or the same structure with one for each
    tensor of a container; other values as they are. A contiguous dense tensor (most
    of them) takes a fast path to the same record."""
    if isinstance(value, torch.Tensor):
        if value.layout == torch.strided and not value.is_quantized and value.is_contiguous():
            return TensorMetadata(value.shape, value.dtype, value.requires_grad, value.stride(),
                                  torch.contiguous_format, False, {})
        return extract_tensor_metadata(value)
    if isinstance(value, (tuple, list, dict)):
        return map_aggregate(value, lambda v: extract_tensor_metadata(v) if isinstance(v, torch.Tensor) else v)
    return value


def has_tensor(meta: Any) -> bool:
    if isinstance(meta, TensorMetadata):
        return True
    if isinstance(meta, (tuple, list)):
        return any(has_tensor(m) for m in meta)
    if isinstance(meta, dict):
        return any(has_tensor(m) for m in meta.values())
    return False


#: Methods that read a tensor's metadata, never its elements
_METADATA_METHODS = frozenset({"size", "dim", "ndimension", "numel", "nelement", "stride", "element_size",
                               "storage_offset", "is_contiguous", "is_floating_point", "is_complex", "get_device"})
_METADATA_OPS = frozenset(f"aten.{name}" for name in ("sym_size.int", "sym_size.default", "sym_numel.default",
                                                     "sym_stride.int", "sym_stride.default",
                                                     "sym_storage_offset.default"))


def reads_metadata_only(node: torch.fx.Node, first: Any = None) -> bool:
    """Whether ``node`` moves no bytes of the tensors it takes: it reads their metadata
    (``x.shape``, ``x.size(1)``, ``aten.sym_size``) or picks one of an op's outputs
    (``getitem`` of ``first``, its first input's value, when that is a tuple or list)."""
    if node.op == "call_method":
        return node.target in _METADATA_METHODS
    return node.op == "call_function" and (node.target is getattr or str(node.target) in _METADATA_OPS or (
        node.target is operator.getitem and isinstance(first, (tuple, list))))

"""Channels-last (NHWC) storage for 4-D weights and inputs.

Values are unchanged, only strides: a 10x3x16x16 batch gets strides
(768, 1, 48, 3). Convolutions on CPU (oneDNN) and GPU (cuDNN) pick their
kernels by the memory format of input and weight, so the step's timing can be
compared with the contiguous one. The step's example inputs are converted too.
"""
from __future__ import annotations

import torch
import torch.fx
from torch import nn
from torch.fx.passes.infra.pass_base import PassResult

from fxviz._cow import module_copy, set_submodule
from fxviz.passes.registry import NothingToDo, register

NO_4D_WEIGHTS = "no 4-D weights to convert to channels-last"


def to_channels_last(inputs: tuple) -> tuple:
    """``inputs`` with every 4-D tensor in channels-last memory format."""
    return tuple(_channels_last(x) if _is_4d(x) else x for x in inputs)


def _nothing_to_convert(gm: torch.fx.GraphModule) -> str | None:
    tensors = (*gm.parameters(), *gm.buffers())
    return None if any(map(_needs_conversion, tensors)) else NO_4D_WEIGHTS


@register(order=60, name="channels_last", preserves_semantics=True, convert_inputs=to_channels_last,
          nothing_to_do=_nothing_to_convert)
def channels_last(gm: torch.fx.GraphModule) -> PassResult:
    """Store 4-D weights and inputs in channels-last memory format."""
    converted = 0
    for path, module in list(gm.named_modules()):
        names = [n for n, t in (*module.named_parameters(recurse=False), *module.named_buffers(recurse=False))
                 if _needs_conversion(t)]
        if not names:
            continue
        # the GraphModule itself is this pass's to change; submodules may be shared
        owner = gm if module is gm else module_copy(module)
        for name in names:
            tensor = getattr(module, name)
            value = _channels_last(tensor)
            if isinstance(tensor, nn.Parameter):
                value = nn.Parameter(value, requires_grad=tensor.requires_grad)
            setattr(owner, name, value)
        if owner is not gm:
            set_submodule(gm, path, owner)
        converted += len(names)
    if not converted:
        raise NothingToDo(NO_4D_WEIGHTS)
    return PassResult(gm, True)


def _is_4d(x: object) -> bool:
    return isinstance(x, torch.Tensor) and x.dim() == 4


def _needs_conversion(t: object) -> bool:
    return _is_4d(t) and not t.is_contiguous(memory_format=torch.channels_last)


def _channels_last(t: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return t.contiguous(memory_format=torch.channels_last)

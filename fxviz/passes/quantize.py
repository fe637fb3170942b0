"""Fake quantization of conv and linear outputs, to see what 8 (or fewer) bits do.

After each convolution or linear layer the pass inserts a call to
:func:`fake_quant`: the output rounded to ``bits``-bit signed integers and back,
with a symmetric per-tensor scale taken from the tensor itself (no calibration
data needed). The outputs change; the step is labelled so.
"""
from __future__ import annotations

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.infra.pass_base import PassResult

from fxviz.errors import PassError
from fxviz.passes.levels import module_calls
from fxviz.passes.registry import NothingToDo, register

NO_LAYERS = "no conv or linear output found to quantize"

_LAYERS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)
_FUNCTIONS = (
    F.conv1d, F.conv2d, F.conv3d, F.linear, torch.conv1d, torch.conv2d, torch.conv3d,
    torch.ops.aten.convolution.default, torch.ops.aten.linear.default, torch.ops.aten.addmm.default,
)


def fake_quant(x: torch.Tensor, bits: int) -> torch.Tensor:
    """``x`` rounded to the grid of symmetric ``bits``-bit integers scaled to its range."""
    qmax = 2 ** (bits - 1) - 1
    scale = x.detach().abs().amax().clamp(min=torch.finfo(x.dtype).tiny) / qmax
    return torch.clamp(torch.round(x / scale), -qmax - 1, qmax) * scale


def _no_layers(gm: torch.fx.GraphModule) -> str | None:
    if any(gm.graph.find_nodes(op="call_function", target=f) for f in _FUNCTIONS) or \
            any(module_calls(gm, lambda m: type(m) in _LAYERS)):
        return None
    return NO_LAYERS


@register(order=70, name="fake_quantize", preserves_semantics=False, targets_nodes=True, nothing_to_do=_no_layers)
def fake_quantize(gm: torch.fx.GraphModule, *, nodes=None, bits: int = 8) -> PassResult:
    """Insert fake-quantization after conv and linear outputs (changes the outputs)."""
    if not 2 <= bits <= 16:
        raise PassError(f"fake_quantize: bits={bits} is out of range; use 2 to 16.")
    selected = None if nodes is None else set(nodes)
    inserted = 0
    for node in list(gm.graph.nodes):
        if not _is_layer(gm, node) or (selected is not None and node not in selected):
            continue
        with gm.graph.inserting_after(node):
            quantized = gm.graph.call_function(fake_quant, (node, bits))
        quantized.meta["module_path"] = node.meta.get("module_path")
        node.replace_all_uses_with(quantized, delete_user_cb=lambda user: user is not quantized)
        inserted += 1
    if not inserted:
        raise NothingToDo(NO_LAYERS)
    return PassResult(gm, True)


def _is_layer(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)) in _LAYERS
    return node.op == "call_function" and node.target in _FUNCTIONS

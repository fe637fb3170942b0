"""Folding eval-mode BatchNorm into the convolution or linear layer before it.

With running statistics frozen, ``bn(conv(x))`` is one affine map per output
channel, so it can live in the conv's weight and bias:
``w' = w * gamma / sqrt(var + eps)``, ``b' = (b - mean) * gamma / sqrt(var + eps) + beta``.
"""
from __future__ import annotations

import torch
import torch.fx
from torch import nn
from torch.fx.passes.infra.pass_base import PassResult
from torch.nn.utils.fusion import fuse_conv_bn_weights, fuse_linear_bn_weights

from fxviz._cow import module_copy, set_submodule
from fxviz.passes.fusion_functional import fuse_functional
from fxviz.passes.registry import NothingToDo, register

# BatchNorm type -> the layer types it can fold into (exact types: a subclass may
# override forward, and then folding would be wrong).
_FOLDS_INTO = {
    nn.BatchNorm1d: (nn.Conv1d, nn.Linear),
    nn.BatchNorm2d: (nn.Conv2d,),
    nn.BatchNorm3d: (nn.Conv3d,),
}


@register(order=10, name="fuse_conv_bn", preserves_semantics=True, needs_eval=True, targets_nodes=True)
def fuse_conv_bn(gm: torch.fx.GraphModule, *, nodes=None) -> PassResult:
    """Fold eval-mode BatchNorm into the Conv1d/2d/3d or Linear before it (modules,
    ``F.batch_norm`` calls and ATen batch_norm ops alike)."""
    selected = None if nodes is None else set(nodes)
    skipped: list[str] = []
    fused = 0
    for bn_node in list(gm.graph.find_nodes(op="call_module")):
        layer_node = _foldable_layer(gm, bn_node)
        if layer_node is None or (selected is not None and not selected & {bn_node, layer_node}):
            continue
        reason = _why_not(gm, layer_node, bn_node)
        if reason:
            skipped.append(reason)
            continue
        _fold(gm, layer_node, bn_node)
        fused += 1
    fused += fuse_functional(gm, selected, skipped)
    if not fused:
        raise NothingToDo("no conv→BN pattern found" + "".join(f"; {r}" for r in skipped))
    gm.delete_all_unused_submodules()
    return PassResult(gm, True)


def _foldable_layer(gm: torch.fx.GraphModule, node: torch.fx.Node) -> torch.fx.Node | None:
    """The conv/linear node feeding BatchNorm ``node``, if the types pair up."""
    layer_types = _FOLDS_INTO.get(type(gm.get_submodule(node.target)))
    if layer_types is None or len(node.args) != 1 or node.kwargs:
        return None
    source = node.args[0]
    if not isinstance(source, torch.fx.Node) or source.op != "call_module":
        return None
    return source if type(gm.get_submodule(source.target)) in layer_types else None


def _why_not(gm: torch.fx.GraphModule, layer_node: torch.fx.Node, bn_node: torch.fx.Node) -> str | None:
    """Why this pair cannot be folded, or None."""
    layer, bn = gm.get_submodule(layer_node.target), gm.get_submodule(bn_node.target)
    if len(layer_node.users) > 1:
        return f"'{layer_node.name}' output has {len(layer_node.users)} users"
    calls = len(gm.graph.find_nodes(op="call_module", target=layer_node.target))
    if calls > 1:
        return f"module '{layer_node.target}' is called {calls} times"
    if any(str(n.target).startswith(f"{layer_node.target}.") for n in gm.graph.find_nodes(op="get_attr")):
        return f"the weights of '{layer_node.target}' are also read directly"
    if bn.running_mean is None or bn.running_var is None:
        return f"'{bn_node.name}' has no running statistics (track_running_stats=False)"
    if isinstance(layer, nn.Linear):
        meta = layer_node.meta.get("tensor_meta")
        if bn.num_features != layer.out_features or (meta is not None and len(getattr(meta, "shape", ())) != 2):
            return f"'{bn_node.name}' does not normalise the features of '{layer_node.name}'"
    return None


def _fold(gm: torch.fx.GraphModule, layer_node: torch.fx.Node, bn_node: torch.fx.Node) -> None:
    layer, bn = gm.get_submodule(layer_node.target), gm.get_submodule(bn_node.target)
    fold = fuse_linear_bn_weights if isinstance(layer, nn.Linear) else fuse_conv_bn_weights
    gamma = bn.weight if bn.weight is not None else torch.ones_like(bn.running_mean)
    beta = bn.bias if bn.bias is not None else torch.zeros_like(bn.running_mean)
    fused = module_copy(layer)  # new Parameters on a copy: earlier steps keep theirs
    with torch.no_grad():
        fused.weight, fused.bias = fold(layer.weight, layer.bias, bn.running_mean, bn.running_var, bn.eps, gamma, beta)
    set_submodule(gm, layer_node.target, fused)
    bn_node.replace_all_uses_with(layer_node)
    gm.graph.erase_node(bn_node)

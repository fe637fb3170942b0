"""Folding eval-mode BatchNorm into the convolution or linear layer before it.

With running statistics frozen, ``bn(conv(x))`` is one affine map per output
channel, so it can live in the conv's weight and bias:
``w' = w * gamma / sqrt(var + eps)``, ``b' = (b - mean) * gamma / sqrt(var + eps) + beta``.
Every pair that can be folded is; the BatchNorms left, and why, are the step's note.
"""
from __future__ import annotations

import functools
from collections.abc import Iterator

import torch
import torch.fx
from torch import nn
from torch.fx.passes.infra.pass_base import PassResult
from torch.nn.utils.fusion import fuse_conv_bn_weights, fuse_linear_bn_weights

from fxviz._cow import module_copy, set_submodule
from fxviz.passes import fusion_functional
from fxviz.passes.fusion_functional import Candidate, called, shared_layer
from fxviz.passes.levels import module_calls
from fxviz.passes.registry import NothingToDo, register

# BatchNorm type -> the layer types it can fold into (exact types: a subclass may
# override forward, and then folding would be wrong).
_FOLDS_INTO = {
    nn.BatchNorm1d: (nn.Conv1d, nn.Linear),
    nn.BatchNorm2d: (nn.Conv2d,),
    nn.BatchNorm3d: (nn.Conv3d,),
}
_SHOWN = 3  # node names shown per reason; the rest are counted


def _nothing_to_fold(gm: torch.fx.GraphModule) -> str | None:
    """Why the pass would fold nothing in ``gm`` (what the Passes tab says), or None."""
    skipped = []
    for bn_node, reason, _ in _candidates(gm, None):
        if reason is None:
            return None
        skipped.append((bn_node.name, reason))
    return _nothing_found(skipped)


@register(order=10, name="fuse_conv_bn", preserves_semantics=True, needs_eval=True, targets_nodes=True,
          nothing_to_do=_nothing_to_fold)
def fuse_conv_bn(gm: torch.fx.GraphModule, *, nodes=None) -> PassResult:
    """Fold eval-mode BatchNorm into the Conv1d/2d/3d or Linear before it (modules,
    ``F.batch_norm`` calls and ATen batch_norm ops alike).

    Every pair that can be folded is; the BatchNorms left (after a ReLU, weight
    standardisation, ...) and why are the step's ``gm.meta["pass_note"]``."""
    selected = None if nodes is None else set(nodes)
    skipped: list[tuple[str, str]] = []
    folded = 0
    for bn_node, reason, fold in _candidates(gm, selected):
        if reason:
            skipped.append((bn_node.name, reason))
            continue
        fold()
        folded += 1
    if not folded:
        raise NothingToDo(_nothing_found(skipped))
    left = f"; left {len(skipped)}: {_reasons(skipped)}" if skipped else ""
    gm.meta["pass_note"] = f"folded {folded} BatchNorm{'s' * (folded > 1)}{left}"
    gm.delete_all_unused_submodules()
    return PassResult(gm, True)


def _candidates(gm: torch.fx.GraphModule, selected: set | None) -> Iterator[Candidate]:
    """Every BatchNorm module call, then every functional one, with why it stays or how to fold it."""
    for bn_node in list(module_calls(gm, lambda m: isinstance(m, tuple(_FOLDS_INTO)))):
        layer_node = bn_node.args[0] if bn_node.args else None
        if selected is not None and not selected & {bn_node, layer_node}:
            continue
        yield bn_node, _why_not(gm, layer_node, bn_node), functools.partial(_fold, gm, layer_node, bn_node)
    yield from fusion_functional.candidates(gm, selected)


def _nothing_found(skipped: list[tuple[str, str]]) -> str:
    if not skipped:
        return "no BatchNorm in this graph"
    return f"no BatchNorm can be folded: {_reasons(skipped)}"


def _reasons(skipped: list[tuple[str, str]]) -> str:
    """``skipped`` grouped by reason: a few node names each, the rest counted."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in skipped:
        by_reason.setdefault(reason, []).append(name)
    parts = []
    for reason, names in by_reason.items():
        more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
        parts.append(f"{reason} ({', '.join(names[:_SHOWN])}{more})")
    return "; ".join(parts)


def _why_not(gm: torch.fx.GraphModule, layer_node: object, bn_node: torch.fx.Node) -> str | None:
    """Why BatchNorm module call ``bn_node`` cannot be folded into ``layer_node``, or None."""
    bn = gm.get_submodule(bn_node.target)
    layer_types = _FOLDS_INTO.get(type(bn))
    if layer_types is None:
        return f"a BatchNorm subclass ({type(bn).__name__}), whose forward may do more"
    if len(bn_node.args) != 1 or bn_node.kwargs:
        return "called with more than its input"
    if not (isinstance(layer_node, torch.fx.Node) and layer_node.op == "call_module"
            and type(gm.get_submodule(layer_node.target)) in layer_types):
        return f"after {called(gm, layer_node)}, not a layer it folds into"
    if len(layer_node.users) > 1:
        return f"the layer's output has {len(layer_node.users)} users"
    shared = shared_layer(gm, layer_node)
    if shared:
        return shared
    if bn.running_mean is None or bn.running_var is None:
        return "no running statistics: track_running_stats=False"
    layer = gm.get_submodule(layer_node.target)
    if isinstance(layer, nn.Linear):
        meta = layer_node.meta.get("tensor_meta")
        if bn.num_features != layer.out_features or (meta is not None and len(getattr(meta, "shape", ())) != 2):
            return "does not normalise the features of the linear layer before it"
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

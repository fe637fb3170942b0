"""Conv+BN folding where BatchNorm is a function call, not a module: ATen graphs
(torch.export, make_fx) and eval-mode ``F.batch_norm`` in torch-IR graphs (timm's
``BatchNormAct2d`` and other BatchNorm subclasses traced through to it).

The folded weight and bias become new attributes beside the conv's own (``weight_fused``),
so earlier steps keep theirs; the conv reads them and BatchNorm's output is replaced by
the conv's.
"""
from __future__ import annotations

import operator

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.operator_schemas import normalize_function
from torch.nn.utils.fusion import fuse_conv_bn_weights

from fxviz._cow import module_copy, set_submodule
from fxviz._torch_internals import get_attr

aten = torch.ops.aten
_BATCH_NORMS = {aten.batch_norm.default, aten.native_batch_norm.default,
                aten._native_batch_norm_legit_no_training.default, F.batch_norm}
_TUPLE_OUTPUT = {aten.native_batch_norm.default, aten._native_batch_norm_legit_no_training.default}
_CONVS = {aten.conv1d.default, aten.conv2d.default, aten.conv3d.default, aten.convolution.default}
_CONV_MODULES = (nn.Conv1d, nn.Conv2d, nn.Conv3d)


def fuse_functional(gm: torch.fx.GraphModule, selected: set | None, skipped: list[str]) -> int:
    """Fold every eval-mode functional BatchNorm into the convolution before it; returns
    how many were folded and appends to ``skipped`` why a candidate was not."""
    fused = 0
    for bn in list(gm.graph.nodes):
        if bn.op != "call_function" or bn.target not in _BATCH_NORMS:
            continue
        args = _bn_args(gm, bn)
        conv = args["input"] if isinstance(args["input"], torch.fx.Node) else None
        if conv is None or (selected is not None and not selected & {bn, conv}):
            continue
        reason = _why_not(gm, conv, bn, args)
        if reason:
            skipped.append(reason)
            continue
        _fold(gm, conv, bn, args)
        fused += 1
    return fused


def _bn_args(gm: torch.fx.GraphModule, node: torch.fx.Node) -> dict:
    """input, weight, bias, running_mean, running_var, eps and training by name."""
    found = normalize_function(node.target, node.args, node.kwargs, normalize_to_only_use_kwargs=True)
    kwargs = dict(found.kwargs) if found else {}
    kwargs.setdefault("training", False)  # _native_batch_norm_legit_no_training has no flag
    return kwargs


def _tensor(gm: torch.fx.GraphModule, value) -> torch.Tensor | None:
    if value is None:
        return None
    if isinstance(value, torch.fx.Node) and value.op == "get_attr":
        return get_attr(gm, value.target)
    raise ValueError("not a stored tensor")


def _why_not(gm: torch.fx.GraphModule, conv: torch.fx.Node, bn: torch.fx.Node, args: dict) -> str | None:
    is_module_conv = conv.op == "call_module" and type(gm.get_submodule(conv.target)) in _CONV_MODULES
    if not is_module_conv and not (conv.op == "call_function" and conv.target in _CONVS):
        return None if conv.op != "call_function" else f"'{bn.name}' does not follow a convolution"
    if args["training"]:
        return f"'{bn.name}' runs in training mode (batch statistics): call model.eval() first"
    users = [u for u in conv.users if u.target is not getattr]  # x.shape reads stay true after folding
    if len(users) > 1:
        return f"'{conv.name}' output has {len(users)} users"
    if conv.target is aten.convolution.default and conv.args[6]:
        return f"'{conv.name}' is a transposed convolution"
    try:
        _tensor(gm, args["running_mean"]), _tensor(gm, args["weight"])
        if not is_module_conv:
            _tensor(gm, conv.args[1])
    except ValueError:
        return f"the weights or statistics of '{bn.name}' are computed in the graph, not stored"
    if args["running_mean"] is None:
        return f"'{bn.name}' has no running statistics"
    if bn.target in _TUPLE_OUTPUT and any(u.target is not operator.getitem or (u.args[1] != 0 and u.users)
                                          for u in bn.users):
        return f"'{bn.name}' saves statistics that are used later"
    return None


def _fold(gm: torch.fx.GraphModule, conv: torch.fx.Node, bn: torch.fx.Node, args: dict) -> None:
    read = [*conv.all_input_nodes, *(args[k] for k in ("weight", "bias", "running_mean", "running_var"))]
    mean, var = _tensor(gm, args["running_mean"]), _tensor(gm, args["running_var"])
    gamma = _tensor(gm, args["weight"])
    beta = _tensor(gm, args["bias"])
    gamma = torch.ones_like(mean) if gamma is None else gamma
    beta = torch.zeros_like(mean) if beta is None else beta
    if conv.op == "call_module":
        layer = gm.get_submodule(conv.target)
        fused = module_copy(layer)  # new Parameters on a copy: earlier steps keep theirs
        with torch.no_grad():
            fused.weight, fused.bias = fuse_conv_bn_weights(layer.weight, layer.bias, mean, var, args["eps"], gamma, beta)
        set_submodule(gm, conv.target, fused)
    else:
        weight_node = conv.args[1]
        bias_node = conv.args[2] if len(conv.args) > 2 else conv.kwargs.get("bias")
        with torch.no_grad():
            weight, bias = fuse_conv_bn_weights(_tensor(gm, weight_node), _tensor(gm, bias_node), mean, var,
                                                args["eps"], gamma, beta)
        with gm.graph.inserting_before(conv):
            new_weight = _stored(gm, weight_node, "weight_fused", weight)
            new_bias = _stored(gm, weight_node, "bias_fused", bias)
        conv.update_arg(1, new_weight)
        if len(conv.args) > 2:
            conv.update_arg(2, new_bias)
        else:
            conv.update_kwarg("bias", new_bias)
    output = bn if bn.target not in _TUPLE_OUTPUT else next(u for u in bn.users if u.args[1] == 0)
    output.replace_all_uses_with(conv)
    for user in list(bn.users):
        gm.graph.erase_node(user)
    gm.graph.erase_node(bn)
    for node in dict.fromkeys(read):  # the parameters only the folded pair read: no dangling boxes
        if isinstance(node, torch.fx.Node) and node.op == "get_attr" and not node.users:
            gm.graph.erase_node(node)


def _stored(gm: torch.fx.GraphModule, beside: torch.fx.Node, name: str, value: torch.Tensor) -> torch.fx.Node:
    """A new attribute next to ``beside``'s tensor (same owner module), read by a new get_attr."""
    owner_path, _, _ = str(beside.target).rpartition(".")
    owner = gm.get_submodule(owner_path) if owner_path else gm
    candidate, k = name, 1
    while hasattr(owner, candidate):
        candidate, k = f"{name}{k}", k + 1
    setattr(owner, candidate, nn.Parameter(value, requires_grad=False))
    node = gm.graph.get_attr(f"{owner_path}.{candidate}" if owner_path else candidate)
    node.meta["module_path"] = beside.meta.get("module_path", owner_path)
    return node

"""Conv+BN folding where BatchNorm is a function call, not a module: ATen graphs
(torch.export, make_fx) and eval-mode ``F.batch_norm`` in torch-IR graphs (timm's
``BatchNormAct2d`` and other BatchNorm subclasses traced through to it).

The folded weight and bias become new attributes beside the conv's own (``weight_fused``),
so earlier steps keep theirs; the conv reads them and BatchNorm's output is replaced by
the conv's. A batch_norm that cannot be folded (after a ReLU, timm's weight-standardising
``StdConv2d``, statistics computed in the graph) is left as it is, with the reason.
"""
from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.operator_schemas import normalize_function
from torch.nn.utils.fusion import fuse_conv_bn_weights

from fxviz._cow import module_copy, set_submodule
from fxviz._torch_internals import get_attr

aten = torch.ops.aten
_BATCH_NORMS = (aten.batch_norm.default, aten.native_batch_norm.default,
                aten._native_batch_norm_legit_no_training.default, F.batch_norm)
_TUPLE_OUTPUT = {aten.native_batch_norm.default, aten._native_batch_norm_legit_no_training.default}
_CONVS = {aten.conv1d.default, aten.conv2d.default, aten.conv3d.default, aten.convolution.default,
          torch.conv1d, torch.conv2d, torch.conv3d}  # the last: F.conv2d in a symbolic trace
_CONV_MODULES = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
#: A candidate: the BatchNorm node, why it stays (None: it folds) and how to fold it.
Candidate = tuple[torch.fx.Node, "str | None", Callable[[], None]]


def candidates(gm: torch.fx.GraphModule, selected: set | None) -> Iterator[Candidate]:
    """Every functional BatchNorm (in ``selected``, or with its input there), judged when
    reached: folding one pair changes what the next sees."""
    for bn in [n for target in _BATCH_NORMS for n in gm.graph.find_nodes(op="call_function", target=target)]:
        args = _bn_args(bn)
        source = args.get("input", bn.args[0] if bn.args else None)
        if selected is not None and not selected & {bn, source}:
            continue
        reason = _why_not(gm, source, bn, args) if "input" in args else "arguments that do not match its schema"
        yield bn, reason, functools.partial(_fold, gm, source, bn, args)


def called(gm: torch.fx.GraphModule, node: object) -> str:
    """What ``node`` computes, in a word: its module's type, function or method name."""
    if not isinstance(node, torch.fx.Node):
        return "a constant"
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)).__name__
    if node.op in ("call_function", "call_method"):
        return str(getattr(node.target, "__name__", node.target)).removesuffix(".default")
    return f"the input '{node.name}'" if node.op == "placeholder" else "a stored tensor"


def shared_layer(gm: torch.fx.GraphModule, layer: torch.fx.Node) -> str | None:
    """Why folding into module call ``layer`` would change other calls, or None."""
    calls = len(gm.graph.find_nodes(op="call_module", target=layer.target))
    if calls > 1:
        return f"its layer '{layer.target}' is called {calls} times"
    if any(str(n.target).startswith(f"{layer.target}.") for n in gm.graph.find_nodes(op="get_attr")):
        return f"the weights of '{layer.target}' are also read directly"
    return None


def _bn_args(node: torch.fx.Node) -> dict:
    """input, weight, bias, running_mean, running_var, eps and training by name; {} when
    the call does not match the schema."""
    found = normalize_function(node.target, node.args, node.kwargs, normalize_to_only_use_kwargs=True)
    if found is None:
        return {}
    kwargs = dict(found.kwargs)
    kwargs.setdefault("training", False)  # _native_batch_norm_legit_no_training has no flag
    return kwargs


def _is_stored(value: object) -> bool:
    """None, or a tensor the graph reads as it is (not one it computes)."""
    return value is None or isinstance(value, torch.fx.Node) and value.op == "get_attr"


def _tensor(gm: torch.fx.GraphModule, value: torch.fx.Node | None) -> torch.Tensor | None:
    return None if value is None else get_attr(gm, value.target)


def _weight_only(node: torch.fx.Node, limit: int = 16) -> bool:
    """Whether ``node`` is computed from stored tensors alone (a weight reshaped, say), not
    from the inputs; judged on its nearest ``limit`` ancestors."""
    seen, todo = set(), [node]
    while todo:
        current = todo.pop()
        if current.op == "placeholder" or len(seen) >= limit:
            return False
        seen.add(current)
        todo += [n for n in current.all_input_nodes if n not in seen]
    return True


def _why_not(gm: torch.fx.GraphModule, conv: object, bn: torch.fx.Node, args: dict) -> str | None:
    """Why batch_norm ``bn`` (reading ``conv``) stays, in words that fit any number of nodes."""
    if args["training"]:
        if args.get("running_mean") is None and isinstance(conv, torch.fx.Node) and _weight_only(conv):
            return "standardises a weight, as timm's StdConv2d does"
        return "training mode (batch statistics): call model.eval() first"
    is_module = isinstance(conv, torch.fx.Node) and conv.op == "call_module" and \
        type(gm.get_submodule(conv.target)) in _CONV_MODULES
    if not is_module and not (isinstance(conv, torch.fx.Node) and conv.op == "call_function" and conv.target in _CONVS):
        return f"after {called(gm, conv)}, not a convolution"
    users = [u for u in conv.users if u.target is not getattr]  # x.shape reads stay true after folding
    if len(users) > 1:
        return f"the convolution's output has {len(users)} users"
    if conv.target is aten.convolution.default and conv.args[6]:
        return "after a transposed convolution"
    if is_module:
        shared = shared_layer(gm, conv)
        if shared:
            return shared
    elif len(conv.args) < 2:
        return "the convolution's weight is passed by keyword"
    weight = gm.get_submodule(conv.target).weight if is_module else conv.args[1]
    read = [args.get(k) for k in ("weight", "bias", "running_mean", "running_var")]
    if not all(map(_is_stored, read if is_module else [*read, weight, _conv_bias(conv)])):
        return "weights or statistics not stored in the model (computed in the graph or passed as inputs)"
    if args.get("running_mean") is None or args.get("running_var") is None:
        return "no running statistics"
    channels = (weight if is_module else _tensor(gm, weight)).shape[0]
    if _tensor(gm, args["running_mean"]).numel() != channels:
        return "statistics for another number of channels than the convolution's"
    if bn.target in _TUPLE_OUTPUT and any(u.target is not operator.getitem or (u.args[1] != 0 and u.users)
                                          for u in bn.users):
        return "statistics saved for later use"
    return None


def _conv_bias(conv: torch.fx.Node) -> torch.fx.Node | None:
    return conv.args[2] if len(conv.args) > 2 else conv.kwargs.get("bias")


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
        with torch.no_grad():
            weight, bias = fuse_conv_bn_weights(_tensor(gm, weight_node), _tensor(gm, _conv_bias(conv)), mean, var,
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

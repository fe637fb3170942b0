"""Lowering leaf modules to the functional calls they make.

The tutorial's ReLU lowering, generalised: a call_module node of a stateless
``torch.nn`` type becomes one call_function node (always ``inplace=False``, so
later passes may reorder or share it). Identities, and dropout in eval mode,
compute nothing and are removed. The node keeps its name, so a comparison of
steps matches it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.infra.pass_base import PassResult

from fxviz.errors import PassError
from fxviz.passes.levels import module_calls
from fxviz.passes.registry import NothingToDo, register

Call = tuple[Callable[..., Any] | None, dict[str, Any]]  # (function, kwargs); None: remove


def _dropout(fn: Callable[..., Any]) -> Callable[[nn.Module], Call]:
    return lambda m: (fn, {"p": m.p, "training": True, "inplace": False}) if m.training else (None, {})


def _pool(fn: Callable[..., Any], *fields: str) -> Callable[[nn.Module], Call]:
    return lambda m: (fn, {f: getattr(m, f) for f in fields})


# nn type name -> the functional call replacing a module of that type.
LOWERINGS: dict[str, Callable[[nn.Module], Call]] = {
    "ReLU": lambda m: (F.relu, {"inplace": False}),
    "ReLU6": lambda m: (F.relu6, {"inplace": False}),
    "LeakyReLU": lambda m: (F.leaky_relu, {"negative_slope": m.negative_slope, "inplace": False}),
    "ELU": lambda m: (F.elu, {"alpha": m.alpha, "inplace": False}),
    "GELU": lambda m: (F.gelu, {"approximate": m.approximate}),
    "SiLU": lambda m: (F.silu, {"inplace": False}),
    "Hardswish": lambda m: (F.hardswish, {"inplace": False}),
    "Hardsigmoid": lambda m: (F.hardsigmoid, {"inplace": False}),
    "Sigmoid": lambda m: (torch.sigmoid, {}),
    "Tanh": lambda m: (torch.tanh, {}),
    "Softmax": lambda m: (F.softmax, {"dim": m.dim}),
    "Flatten": lambda m: (torch.flatten, {"start_dim": m.start_dim, "end_dim": m.end_dim}),
    "Identity": lambda m: (None, {}),
    "Dropout": _dropout(F.dropout),
    "Dropout1d": _dropout(F.dropout1d),
    "Dropout2d": _dropout(F.dropout2d),
    "Dropout3d": _dropout(F.dropout3d),
    "AlphaDropout": _dropout(F.alpha_dropout),
    "MaxPool1d": _pool(F.max_pool1d, "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
    "MaxPool2d": _pool(F.max_pool2d, "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
    "AvgPool2d": _pool(
        F.avg_pool2d, "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"
    ),
    "AdaptiveAvgPool1d": _pool(F.adaptive_avg_pool1d, "output_size"),
    "AdaptiveAvgPool2d": _pool(F.adaptive_avg_pool2d, "output_size"),
}


def _nothing_to_lower(gm: torch.fx.GraphModule) -> str | None:
    if any(module_calls(gm, _lowerable)):
        return None
    return "no call_module node of a type it lowers (ReLU, GELU, Dropout, MaxPool2d, ...)"


def _lowerable(module: nn.Module) -> str | None:
    """The name of ``module``'s type where it is exactly the ``torch.nn`` one lowered."""
    name = type(module).__name__
    return name if name in LOWERINGS and type(module) is getattr(nn, name) else None


@register(order=20, name="lower_modules", preserves_semantics=True, targets_nodes=True, level="torch",
          choices={"types": tuple(LOWERINGS)}, nothing_to_do=_nothing_to_lower)
def lower_modules(
    gm: torch.fx.GraphModule, *, nodes=None, types: tuple[str, ...] = ("ReLU",)
) -> PassResult:
    """Rewrite call_module nodes of the chosen nn types into functional calls."""
    wanted = _type_names(types)
    selected = None if nodes is None else set(nodes)
    lowered = 0
    for node in list(gm.graph.find_nodes(op="call_module")):
        module = gm.get_submodule(node.target)
        name = _lowerable(module)
        if name not in wanted:
            continue
        if selected is not None and node not in selected:
            continue
        function, kwargs = LOWERINGS[name](module)
        (source,) = _inputs(node)
        if function is None:
            node.replace_all_uses_with(source)
            gm.graph.erase_node(node)
        else:  # retarget in place: the node keeps its name, users and metadata
            node.op, node.target, node.args, node.kwargs = "call_function", function, (source,), kwargs
        lowered += 1
    if not lowered:
        where = "selected " if selected else ""
        raise NothingToDo(f"no {where}call_module node of type {', '.join(sorted(wanted))} found")
    gm.delete_all_unused_submodules()
    return PassResult(gm, True)


def _type_names(types: Any) -> set[str]:
    """Type names from names or classes (a UI form sends names)."""
    items = (types,) if isinstance(types, (str, type)) else tuple(types)
    names = {t.__name__ if isinstance(t, type) else str(t) for t in items}
    unknown = sorted(names - set(LOWERINGS))
    if unknown:
        raise PassError(
            f"lower_modules cannot lower {', '.join(unknown)}; it handles {', '.join(LOWERINGS)}."
        )
    return names


def _inputs(node: torch.fx.Node) -> tuple:
    values = (*node.args, *node.kwargs.values())
    if len(values) != 1:
        raise PassError(f"Node '{node.name}' calls its module with {len(values)} arguments; lower_modules expects one.",
                        node=node.name)
    return values

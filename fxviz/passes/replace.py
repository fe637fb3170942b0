"""Replacing one binary operator by another, in every spelling it has in a graph.

``x + y``, ``torch.add(x, y)`` and ``x.add(y)`` trace to three different nodes
(``operator.add``, ``torch.add``, method ``add``), and to ``aten.add.Tensor`` in a
make_fx graph; replacing "add" rewrites them all, each in the matching spelling
of the new operator (the same ATen overload, e.g. ``aten.mul.Tensor``). This changes what
the model computes, and is labelled so.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.fx.passes.infra.pass_base import PassResult

from fxviz._torch_internals import OpOverload
from fxviz.errors import PassError
from fxviz.passes.registry import NothingToDo, register

aten = torch.ops.aten
# Where a node came from carries over to its replacement; shapes and values may not.
_PROVENANCE = ("module_path", "nn_module_stack", "stack_trace")
# name -> (Python operator or None, torch function, Tensor method, ATen op packet)
OPS: dict[str, tuple[Callable[..., Any] | None, Callable[..., Any], str, Any]] = {
    "add": (operator.add, torch.add, "add", aten.add),
    "sub": (operator.sub, torch.sub, "sub", aten.sub),
    "mul": (operator.mul, torch.mul, "mul", aten.mul),
    "div": (operator.truediv, torch.div, "div", aten.div),
    "pow": (operator.pow, torch.pow, "pow", aten.pow),
    "matmul": (operator.matmul, torch.matmul, "matmul", aten.matmul),
    "maximum": (None, torch.maximum, "maximum", aten.maximum),
    "minimum": (None, torch.minimum, "minimum", aten.minimum),
}


def _no_operators(gm: torch.fx.GraphModule) -> str | None:
    """None where any spelling of any operator in :data:`OPS` is called (indexed look-ups:
    the Passes tab asks on every step)."""
    for py_op, torch_fn, method, packet in OPS.values():
        functions = [py_op, torch_fn, *(getattr(packet, o) for o in packet.overloads())]
        if gm.graph.find_nodes(op="call_method", target=method) or \
                any(gm.graph.find_nodes(op="call_function", target=f) for f in functions if f is not None):
            return None
    return f"no binary operator it replaces ({', '.join(OPS)})"


@register(order=30, name="replace_op", preserves_semantics=False, targets_nodes=True,
          choices={"old": tuple(OPS), "new": tuple(OPS)}, nothing_to_do=_no_operators)
def replace_op(gm: torch.fx.GraphModule, *, nodes=None, old: str = "add", new: str = "mul") -> PassResult:
    """Replace every use of one binary operator by another (changes the outputs)."""
    if old == new:
        raise PassError(f"replace_op: old and new are both '{old}'; choose two different operators.")
    selected = None if nodes is None else set(nodes)
    skipped: list[str] = []
    replaced = 0
    for node in list(gm.graph.nodes):
        spelling = _spelling(node, old)
        if spelling is None or (selected is not None and node not in selected):
            continue
        if node.kwargs:  # e.g. torch.add(x, y, alpha=2): the new op may not take them
            skipped.append(f"'{node.name}' has keyword arguments {sorted(node.kwargs)}")
            continue
        op, target = _respelled(node, spelling, new)
        if target is None:
            skipped.append(f"'{node.name}' is {node.target}, which has no {new} counterpart")
            continue
        with gm.graph.inserting_before(node):
            replacement = gm.graph.create_node(op, target, node.args)
        replacement.meta = {k: node.meta[k] for k in _PROVENANCE if k in node.meta}
        node.replace_all_uses_with(replacement)
        gm.graph.erase_node(node)
        replaced += 1
    if not replaced:
        raise NothingToDo(f"no '{old}' operation found" + "".join(f"; {r}" for r in skipped))
    return PassResult(gm, True)


def _spelling(node: torch.fx.Node, name: str) -> str | None:
    """How ``node`` spells operator ``name``: "operator", "torch", "method", "aten", or None."""
    py_op, torch_fn, method, packet = OPS[name]
    if node.op == "call_method":
        return "method" if node.target == method else None
    if node.op != "call_function":
        return None
    if py_op is not None and node.target is py_op:
        return "operator"
    if node.target is torch_fn:
        return "torch"
    if isinstance(node.target, OpOverload) and node.target.overloadpacket is packet:
        return "aten"
    return None


def _respelled(node: torch.fx.Node, spelling: str, name: str) -> tuple[str, Any]:
    """``(op, target)`` of operator ``name`` spelled like ``node``; target None if the
    ATen overload (e.g. ``Tensor_Scalar``) does not exist for it."""
    py_op, torch_fn, method, packet = OPS[name]
    if spelling == "method":
        return "call_method", method
    if spelling == "aten":
        return "call_function", getattr(packet, node.target._overloadname, None)
    if spelling == "operator" and py_op is not None:
        return "call_function", py_op
    return "call_function", torch_fn

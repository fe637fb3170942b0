"""Replacing one binary operator by another, in every spelling it has in a graph.

``x + y``, ``torch.add(x, y)`` and ``x.add(y)`` trace to three different nodes
(``operator.add``, ``torch.add``, method ``add``); replacing "add" rewrites all
three, each in the matching spelling of the new operator. This changes what
the model computes, and is labelled so.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.fx.passes.infra.pass_base import PassResult

from fxviz.errors import PassError
from fxviz.passes.registry import NothingToDo, register

# name -> (Python operator or None, torch function, Tensor method name)
OPS: dict[str, tuple[Callable[..., Any] | None, Callable[..., Any], str]] = {
    "add": (operator.add, torch.add, "add"),
    "sub": (operator.sub, torch.sub, "sub"),
    "mul": (operator.mul, torch.mul, "mul"),
    "div": (operator.truediv, torch.div, "div"),
    "pow": (operator.pow, torch.pow, "pow"),
    "matmul": (operator.matmul, torch.matmul, "matmul"),
    "maximum": (None, torch.maximum, "maximum"),
    "minimum": (None, torch.minimum, "minimum"),
}


@register(name="replace_op", preserves_semantics=False, targets_nodes=True, choices={"old": tuple(OPS), "new": tuple(OPS)})
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
        op, target = _respelled(spelling, new)
        with gm.graph.inserting_before(node):
            replacement = gm.graph.create_node(op, target, node.args)
        replacement.meta = dict(node.meta)
        node.replace_all_uses_with(replacement)
        gm.graph.erase_node(node)
        replaced += 1
    if not replaced:
        raise NothingToDo(f"no '{old}' operation found" + "".join(f"; {r}" for r in skipped))
    return PassResult(gm, True)


def _spelling(node: torch.fx.Node, name: str) -> str | None:
    """How ``node`` spells operator ``name``: "operator", "torch", "method", or None."""
    py_op, torch_fn, method = OPS[name]
    if node.op == "call_method" and node.target == method:
        return "method"
    if node.op == "call_function" and py_op is not None and node.target is py_op:
        return "operator"
    if node.op == "call_function" and node.target is torch_fn:
        return "torch"
    return None


def _respelled(spelling: str, name: str) -> tuple[str, Any]:
    py_op, torch_fn, method = OPS[name]
    if spelling == "method":
        return "call_method", method
    if spelling == "operator" and py_op is not None:
        return "call_function", py_op
    return "call_function", torch_fn

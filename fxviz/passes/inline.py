"""Opening up a block: inlining one call_module node's forward into the graph.

The tutorial builds the block's ops with Proxies on a ``GraphAppendingTracer``;
that cannot refer to the block's own parameters and children. Here the block is
traced on its own (one level deep: its children stay call_module nodes) and its
nodes are copied in place of the call, with targets prefixed by the block's
path, so ``layer1.0`` opens into ``layer1.0.conv1``, ``layer1.0.bn1``, ... exactly
as a trace of the whole model that treated the block as not-a-leaf would.
"""
from __future__ import annotations

import inspect
import operator
from typing import Any

import torch
import torch.fx
from torch import nn
from torch.fx.passes.infra.pass_base import PassResult

from fxviz.capture.info import graph_info
from fxviz.errors import PassError
from fxviz.passes.registry import NothingToDo, register


class _OneLevelTracer(torch.fx.Tracer):
    """Traces a block's forward with each of its children kept as a leaf."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return m is not self.root


def _no_module_calls(gm: torch.fx.GraphModule) -> str | None:
    if gm.graph.find_nodes(op="call_module"):
        return None
    why = "dynamo's graphs call functions" if graph_info(gm).tracer == "dynamo" else \
        "every operation is a function call already"
    return f"this graph calls no modules (no call_module node to open: {why})"


@register(order=40, name="inline_module", preserves_semantics=True, targets_nodes=True, level="torch",
          nothing_to_do=_no_module_calls)
def inline_module(gm: torch.fx.GraphModule, *, nodes=None) -> PassResult:
    """Replace selected call_module nodes by the body of their forward."""
    if not nodes:
        reason = _no_module_calls(gm)
        if reason:
            raise NothingToDo(reason)
        raise PassError("inline_module needs a selection: pass nodes=['<call_module node name>'].")
    for node in nodes:
        if node.op != "call_module":
            raise PassError(f"inline_module: node '{node.name}' is a {node.op}, not a call_module node; "
                            "select the node of a module call.", node=node.name)
        _inline(gm, node)
    return PassResult(gm, True)


def _inline(gm: torch.fx.GraphModule, node: torch.fx.Node) -> None:
    path = node.target
    block = gm.get_submodule(path)
    try:
        body = _OneLevelTracer().trace(block)
    except Exception as exc:
        raise PassError(
            f"inline_module: cannot trace the forward of '{path}' ({type(block).__name__}, node '{node.name}'): "
            f"{type(exc).__name__}: {exc}. It stays one node.", node=node.name
        ) from exc
    env = dict(zip(body.find_nodes(op="placeholder"), _bound_arguments(block, node)))
    graph = gm.graph
    with graph.inserting_before(node):
        for inner in body.nodes:
            if inner.op == "placeholder":
                continue
            if inner.op == "output":
                result = torch.fx.node.map_arg(inner.args[0], env.__getitem__)
                break
            target = f"{path}.{inner.target}" if inner.op in ("call_module", "get_attr") else inner.target
            args, kwargs = torch.fx.node.map_arg((inner.args, inner.kwargs), env.__getitem__)
            copied = graph.create_node(inner.op, target, args, kwargs)
            copied.meta["module_path"] = target if inner.op == "call_module" else path
            env[inner] = copied
    _replace_uses(graph, node, result)
    graph.erase_node(node)


def _bound_arguments(block: nn.Module, node: torch.fx.Node) -> list[Any]:
    """The values the call passes to each forward parameter, defaults filled in."""
    try:
        bound = inspect.signature(block.forward).bind(*node.args, **node.kwargs)
    except TypeError as exc:
        raise PassError(
            f"inline_module: node '{node.name}' does not match {type(block).__name__}.forward: {exc}",
            node=node.name,
        ) from exc
    bound.apply_defaults()
    return list(bound.arguments.values())


def _replace_uses(graph: torch.fx.Graph, node: torch.fx.Node, result: Any) -> None:
    """Point ``node``'s users at ``result``; a tuple result is unpacked through the
    ``out[i]`` (getitem) nodes that used it."""
    if isinstance(result, torch.fx.Node):
        node.replace_all_uses_with(result)
        return
    for user in list(node.users):
        element = result[user.args[1]] if _is_index(user) and isinstance(result, (tuple, list)) else None
        if not isinstance(element, torch.fx.Node):
            raise PassError(
                f"inline_module: '{node.target}' returns {type(result).__name__} and node '{user.name}' "
                "uses it other than as out[i] of a node; this call cannot be inlined.", node=user.name
            )
        user.replace_all_uses_with(element)
        graph.erase_node(user)


def _is_index(user: torch.fx.Node) -> bool:
    return user.op == "call_function" and user.target is operator.getitem and isinstance(user.args[1], int)

"""GraphModule -> networkx.DiGraph: one record per FX node, one edge per producer/consumer.

>>> import torch, fxviz
>>> class Model(torch.nn.Module):
...     def forward(self, x):
...         return torch.sum(x.relu(), dim=-1)
>>> g = to_networkx(fxviz.trace(Model()))
>>> list(g), g.nodes["sum_1"]["kwargs"], g.nodes["sum_1"]["users"]
(['x', 'relu', 'sum_1', 'output'], "{'dim': -1}", ('output',))
"""
from __future__ import annotations

from typing import Any

import networkx as nx
import torch
import torch.fx
from torch.fx.node import Node
from torch.fx.passes.shape_prop import TensorMetadata

from fxviz._gc import gc_paused
from fxviz._torch_internals import OpOverload, OpOverloadPacket, qualified_name
from fxviz.shapes import memory_format_name

MAX_ARG_TEXT = 160


def readable_target(node: Node, gm: torch.fx.GraphModule | None = None) -> str:
    """``torch.sum``, ``operator.add``, ``linear (Linear)``, ``relu (method)``, ``aten.mm.default``."""
    if node.op == "call_module":
        kind = ""
        if gm is not None:
            try:
                kind = f" ({type(gm.get_submodule(node.target)).__name__})"
            except AttributeError:
                kind = ""
        return f"{node.target}{kind}"
    if node.op == "call_method":
        return f"{node.target} (method)"
    if node.op == "call_function":
        if isinstance(node.target, OpOverload | OpOverloadPacket):
            return str(node.target)
        try:
            name = qualified_name(node.target)
        except (RuntimeError, AttributeError):
            name = getattr(node.target, "__name__", repr(node.target))
        return name.replace("_operator.", "operator.")
    return str(node.target)


def format_arg(value: Any) -> str:
    """An argument as text, with nodes by name (as print_tabular shows them), kept short."""
    text = _format(value)
    return text if len(text) <= MAX_ARG_TEXT else text[: MAX_ARG_TEXT - 1] + "…"


def _format(value: Any) -> str:
    if isinstance(value, Node):
        return value.name
    if isinstance(value, tuple):
        inner = ", ".join(_format(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_format(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_format(v)}" for k, v in value.items()) + "}"
    if isinstance(value, torch.Tensor):
        return f"tensor(shape={list(value.shape)}, dtype={str(value.dtype).removeprefix('torch.')})"
    return repr(value)


def _tensor_fields(meta: Any) -> dict[str, Any]:
    """Shape fields of a node; tuple outputs give tuples of per-output values."""
    if isinstance(meta, TensorMetadata):
        return {
            "shape": tuple(meta.shape),
            "dtype": str(meta.dtype).removeprefix("torch."),
            "stride": tuple(meta.stride),
            "memory_format": memory_format_name(meta.memory_format),
        }
    leaves = [m for m in (meta if isinstance(meta, (tuple, list)) else ()) if isinstance(m, TensorMetadata)]
    if not leaves:
        return {"shape": None, "dtype": None, "stride": None, "memory_format": None}
    parts = [_tensor_fields(m) for m in leaves]
    return {key: tuple(p[key] for p in parts) for key in parts[0]}


def shape_text(shape: Any) -> str:
    """``1×64×32×32``; a tuple output as ``(3), (3)``; ``''`` when unknown."""
    if shape is None:
        return ""
    if shape and all(isinstance(s, tuple) for s in shape):
        return ", ".join(f"({shape_text(s)})" for s in shape)
    return "×".join(str(d) for d in shape) if shape else "scalar"


def to_networkx(gm: torch.fx.GraphModule) -> nx.DiGraph:
    """A DiGraph keyed by node name, nodes in graph order.

    Graph attribute ``module_types``: module path -> class name. Node attributes: ``index, op, target, args, kwargs, num_users, users, module_path,
    source (``file:line`` of the model's code, when the front-end recorded it),
    shape, dtype, stride, memory_format, flops, macs, bytes`` (shape fields and costs
    are None until :func:`fxviz.annotate` has run, and where it could not count them). Edge attribute ``uses``: the argument
    positions, e.g. ``("args[0]", "args[1]")`` for ``x + x``.
    """
    with gc_paused():
        return _to_networkx(gm)


def _to_networkx(gm: torch.fx.GraphModule) -> nx.DiGraph:
    graph = nx.DiGraph(
        name=type(gm).__name__,
        module_types=gm.meta.get("fxviz", {}).get("module_types")
        or {path: type(m).__name__ for path, m in gm.named_modules() if path},
    )
    for index, node in enumerate(gm.graph.nodes):
        graph.add_node(
            node.name,
            index=index,
            op=node.op,
            target=readable_target(node, gm),
            args=format_arg(node.args),
            kwargs=format_arg(node.kwargs),
            num_users=len(node.users),
            users=tuple(u.name for u in node.users),
            module_path=node.meta.get("module_path"),
            source=node.meta.get("source"),
            flops=node.meta.get("flops"),
            macs=node.meta.get("macs"),
            bytes=node.meta.get("bytes"),
            **_tensor_fields(node.meta.get("tensor_meta")),
        )
        for position, producer in _uses(node):
            if graph.has_edge(producer.name, node.name):
                graph.edges[producer.name, node.name]["uses"] += (position,)
            else:
                graph.add_edge(producer.name, node.name, uses=(position,))
    return graph


def _uses(node: Node) -> list[tuple[str, Node]]:
    found: list[tuple[str, Node]] = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, Node):
            found.append((where, value))
        elif isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]")
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{where}[{k!r}]")

    for i, arg in enumerate(node.args):
        walk(arg, f"args[{i}]")
    for key, arg in node.kwargs.items():
        walk(arg, f"kwargs[{key!r}]")
    return found

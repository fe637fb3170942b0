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

import functools
from collections.abc import Mapping
from typing import Any

import networkx as nx
import torch
import torch.fx
from torch.fx.node import Node
from torch.fx.passes.shape_prop import TensorMetadata

from fxviz.background._gc import gc_paused
from fxviz._torch_internals import OpOverload, OpOverloadPacket, get_attr, qualified_name
from fxviz.capture.info import graph_info, require_graph_module
from fxviz.annotation.shapes import memory_format_name

MAX_ARG_TEXT = 160


def readable_target(node: Node, gm: torch.fx.GraphModule | None = None) -> str:
    """``torch.sum``, ``operator.add``, ``linear (Linear)``, ``relu (method)``, ``aten.mm.default``;
    a placeholder fed a parameter or buffer (dynamo and AOT lift them to inputs) by its
    qualified name, ``lin.weight``."""
    if node.op == "placeholder":
        return node.meta.get("qualified_name") or str(node.target)
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
    if value.__class__ is Node or isinstance(value, Node):  # the first test: most arguments, a third of the time
        return value.name
    if isinstance(value, (tuple, list)):
        kind = tuple if isinstance(value, tuple) else list
        if all(v.__class__ in _OWN_REPR for v in value):  # sizes, dims: written as Python writes them
            return kind.__repr__(value)
        text = ", ".join([v.name if v.__class__ is Node else _format(v) for v in value])
        return f"[{text}]" if kind is list else f"({text},)" if len(value) == 1 else f"({text})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_format(v)}" for k, v in value.items()) + "}"
    if isinstance(value, torch.Tensor):
        return f"tensor(shape={list(value.shape)}, dtype={str(value.dtype).removeprefix('torch.')})"
    return repr(value)


_OWN_REPR = frozenset({int, float, bool, str, type(None)})  # neither nodes nor containers: as repr() writes them


class _Shared:
    """One object per distinct value (shape fields, use positions, targets): 100,000
    nodes of a few shapes hold a few tuples, not 100,000 copies."""

    def __init__(self) -> None:
        self._seen: dict[Any, Any] = {}

    def __call__(self, value: Any) -> Any:
        try:
            return self._seen.setdefault(value, value)
        except TypeError:  # unhashable (a symbolic size): kept as it is
            return value

    def fields(self, meta: Any) -> dict[str, Any]:
        """:func:`_tensor_fields` of ``meta``, computed once per distinct tensor layout."""
        if not isinstance(meta, TensorMetadata):
            return _tensor_fields(meta, self)
        key = (meta.shape, meta.dtype, meta.stride, meta.memory_format)
        try:
            found = self._seen.get(key)
        except TypeError:  # a symbolic size
            return _tensor_fields(meta, self)
        if found is None:
            found = self._seen[key] = _tensor_fields(meta, self)
        return found


def _tensor_fields(meta: Any, shared: _Shared) -> dict[str, Any]:
    """Shape fields of a node; tuple outputs give tuples of per-output values."""
    if isinstance(meta, TensorMetadata):
        return {"shape": shared(tuple(meta.shape)), "dtype": shared(str(meta.dtype).removeprefix("torch.")),
                "stride": shared(tuple(meta.stride)), "memory_format": memory_format_name(meta.memory_format)}
    leaves = [m for m in (meta if isinstance(meta, (tuple, list)) else ()) if isinstance(m, TensorMetadata)]
    if not leaves:
        return _NO_TENSOR
    parts = [_tensor_fields(m, shared) for m in leaves]
    return {key: shared(tuple(p[key] for p in parts)) for key in parts[0]}


_NO_TENSOR = {"shape": None, "dtype": None, "stride": None, "memory_format": None}


def shape_text(shape: Any) -> str:
    """``1×64×32×32``; a tuple output as ``(3), (3)``; ``''`` when unknown."""
    try:
        return _shape_text(shape)
    except TypeError:  # unhashable (a symbolic size): not cached
        return _shape_text.__wrapped__(shape)


@functools.lru_cache(maxsize=4096)  # a graph has few distinct shapes, listed once per node
def _shape_text(shape: Any) -> str:
    if shape is None:
        return ""
    if shape and all(isinstance(s, tuple) for s in shape):
        return ", ".join(f"({shape_text(s)})" for s in shape)
    return "×".join(str(d) for d in shape) if shape else "scalar"


def to_networkx(gm: torch.fx.GraphModule, notes: Mapping[str, Mapping[str, Any]] | None = None) -> nx.DiGraph:
    """A DiGraph keyed by node name, nodes in graph order.

    Graph attribute ``module_types``: module path -> class name. Node attributes: ``index, op, target, args, kwargs, num_users, users, module_path,
    source (``file:line`` of the model's code, when the front-end recorded it),
    shape, dtype, stride, memory_format, flops, macs, bytes`` (shape fields and costs
    are None until :func:`fxviz.annotate` has run, and where it could not count them;
    ``notes``, a dict of node name -> a dict of those ``meta`` keys as
    :func:`fxviz.annotation.shapes.annotated_run` returns them, stand in for ``node.meta``'s).
    ``weight``: the node is a parameter, buffer or constant (:func:`is_weight`);
    ``weights``: what the node reads of them, ``(qualified name, shape text, dtype,
    bytes)`` each (a module call: its module's own tensors); drawings show weights so.
    The output node's ``about``: what it holds ("loss, gradients ×142"), "" when unsaid.
    Edge attribute ``uses``: the argument positions, e.g. ``("args[0]", "args[1]")`` for ``x + x``.
    """
    require_graph_module(gm, "Drawing (to_networkx)")
    with gc_paused():
        return _to_networkx(gm, notes)


def _to_networkx(gm: torch.fx.GraphModule, notes: Mapping[str, Mapping[str, Any]] | None) -> nx.DiGraph:
    graph = nx.DiGraph(
        name=type(gm).__name__,
        module_types=graph_info(gm).module_types
        or {path: type(m).__name__ for path, m in gm.named_modules() if path},
    )
    shared = _Shared()
    # What nodes of one target, layout and count share (most of a record), made once and
    # copied: a dict's copy costs a third of building it anew.
    templates: dict[Any, dict[str, Any]] = {}
    records: dict[str, dict[str, Any]] = {}
    succ: dict[str, dict[str, dict[str, Any]]] = {}
    pred: dict[str, dict[str, dict[str, Any]]] = {}
    for index, node in enumerate(gm.graph.nodes):
        name, meta, args, kwargs = node.name, node.meta, node.args, node.kwargs  # args, kwargs: properties
        costs = meta if notes is None else notes.get(name, _NO_COSTS)
        try:  # the notes by identity: the annotated run shares one dict among nodes with equal notes
            key = (node.op, node.target, id(costs) if notes is not None else
                   (id(meta.get("tensor_meta")), meta.get("flops"), meta.get("macs"), meta.get("bytes")))
            template = templates.get(key)
        except TypeError:  # an unhashable target or count
            key = template = None
        if template is None:
            template = {
                "index": index, "op": node.op, "target": readable_target(node, gm), "args": "", "kwargs": "{}",
                "num_users": 0, "users": (), "module_path": None, "source": None, "flops": costs.get("flops"),
                "macs": costs.get("macs"), "bytes": costs.get("bytes"), **shared.fields(costs.get("tensor_meta")),
                "weight": False, "weights": (),
            }
            if key is not None:
                templates[key] = template
        records[name] = record = template.copy()
        users = node.users
        record["index"], record["num_users"], record["users"] = index, len(users), tuple([u.name for u in users])
        record["module_path"], record["source"] = meta.get("module_path"), meta.get("source")
        if "kernel" in meta:  # the inductor kernel computing it (fxviz.compiler.kernels.mark)
            record["kernel"] = meta["kernel"]
        succ[name] = {}
        producers = pred[name] = {}
        if not kwargs and len(args) == 1 and args[0].__class__ is Node:  # most nodes: one input, nothing else
            producer = args[0].name  # format_arg's text, written directly when it needs no cut
            record["args"] = f"({producer},)" if len(producer) + 3 <= MAX_ARG_TEXT else format_arg(args)
            producers[producer] = succ[producer][name] = {"uses": _ARG_POSITIONS[0]}
            continue
        record["args"] = format_arg(args)
        if kwargs:
            record["kwargs"] = format_arg(kwargs)
        for position, producer in _uses(args, kwargs):
            edge = producers.get(producer.name)
            if edge is None:  # FX graphs are in topological order: the producer's entry exists
                producers[producer.name] = succ[producer.name][name] = {"uses": position}
            else:  # x + x: one edge, both positions
                edge["uses"] = shared(edge["uses"] + position)
    _note_weights(gm, records, succ)
    for node in gm.graph.find_nodes(op="output"):  # what it holds, said by capture: "loss, gradients ×142"
        records[node.name]["about"] = node.meta.get("outputs_about") or ""
    # networkx's own dict-of-dicts, filled in bulk: add_nodes_from and add_edges_from
    # cost a third of the conversion at 100k nodes (a caught TypeError per node).
    graph._node.update(records)
    graph._succ.update(succ)
    graph._pred.update(pred)
    return graph


_NO_COSTS: Mapping[str, Any] = {}

Weight = tuple[str, str, str | None, int | None]  # (qualified name, shape text, dtype, bytes)


def is_weight(node: Node) -> bool:
    """A parameter, buffer or constant: a get_attr, or an input that dynamo, AOT or a
    training step lifted from the model (its qualified name recorded by capture)."""
    return node.op == "get_attr" or (node.op == "placeholder" and "qualified_name" in node.meta)


def _note_weights(gm: torch.fx.GraphModule, records: dict[str, dict[str, Any]],
                  succ: dict[str, dict[str, Any]]) -> None:
    """Mark weight nodes (``weight``) and list on each op what it reads (``weights``): the
    drawing shows weights as attributes of their ops, as Netron and Model Explorer do,
    whichever front-end made the graph. A module call lists its module's own tensors."""
    weights = [*gm.graph.find_nodes(op="get_attr"),
               *(n for n in gm.graph.find_nodes(op="placeholder") if "qualified_name" in n.meta)]
    for node in weights:
        record = records[node.name]
        record["weight"] = True
        info = _weight_info(readable_target(node), record, lambda: get_attr(gm, str(node.target)))
        for user in succ[node.name]:
            records[user]["weights"] += (info,)
    for node in gm.graph.find_nodes(op="call_module"):
        try:
            module = gm.get_submodule(str(node.target))
        except AttributeError:
            continue
        records[node.name]["weights"] += tuple(_tensor_info(f"{node.target}.{name}", t) for name, t in
                                               (*module.named_parameters(), *module.named_buffers()))


def _weight_info(name: str, record: Mapping[str, Any], value: Any) -> Weight:
    """``name`` with its shape, dtype and size: the record's (after annotation), else the tensor's."""
    shape, dtype = record.get("shape"), record.get("dtype")
    if shape is None:
        try:
            return _tensor_info(name, value())
        except AttributeError:  # a get_attr of something torch.export did not keep
            return (name, "", None, None)
    try:
        size = int(torch.Size(shape).numel()) * getattr(torch, dtype).itemsize
    except (TypeError, AttributeError):  # a tuple of outputs, a symbolic size
        size = None
    return (name, shape_text(shape), dtype, size)


def _tensor_info(name: str, tensor: Any) -> Weight:
    """:func:`_weight_info` of a tensor in hand."""
    if not isinstance(tensor, torch.Tensor):
        return (name, "", None, None)
    try:
        size = int(tensor.numel()) * tensor.element_size()
    except TypeError:  # a symbolic size
        size = None
    return (name, shape_text(tuple(tensor.shape)), str(tensor.dtype).removeprefix("torch."), size)


_ARG_POSITIONS = tuple((f"args[{i}]",) for i in range(16))  # shared by every edge with one use
_CONTAINERS = (tuple, list, dict, slice)  # FX's immutable_list and immutable_dict among them


def _uses(args: tuple, kwargs: dict) -> list[tuple[tuple[str, ...], Node]]:
    """(argument position, as a 1-tuple; producer) for each node among a node's arguments."""
    if not kwargs and len(args) <= len(_ARG_POSITIONS):  # most nodes: nodes and constants, one pass
        found = []
        for i, arg in enumerate(args):
            if arg.__class__ is Node or isinstance(arg, Node):
                found.append((_ARG_POSITIONS[i], arg))
            elif isinstance(arg, _CONTAINERS) and not (isinstance(arg, (tuple, list)) and
                                                       all(v.__class__ in _OWN_REPR for v in arg)):
                break  # a container that may hold nodes (a view's sizes do not)
        else:
            return found
    found: list[tuple[tuple[str, ...], Node]] = []
    for i, arg in enumerate(args):
        _walk(arg, f"args[{i}]", found)
    for key, arg in kwargs.items():
        _walk(arg, f"kwargs[{key!r}]", found)
    return found


def _walk(value: Any, where: str, found: list) -> None:
    if isinstance(value, Node):
        found.append(((where,), value))
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _walk(v, f"{where}[{i}]", found)
    elif isinstance(value, dict):
        for k, v in value.items():
            _walk(v, f"{where}[{k!r}]", found)
    elif isinstance(value, slice):  # x[:, :n] with n computed: FX keeps the node in the slice
        for part in ("start", "stop", "step"):
            _walk(getattr(value, part), f"{where}.{part}", found)

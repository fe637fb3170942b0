"""A graph's inputs renamed and its outputs' structure read: torch.fx has no public API
for either (``Node._rename``; the pytree output spec of export's and make_fx's code)."""
from __future__ import annotations

from typing import Any

import torch.fx

from fxviz._torch_internals import _child


def rename_inputs(graph: torch.fx.Graph, names: dict[torch.fx.Node, str]) -> None:
    """Name each placeholder of ``names`` as given, in the generated code's signature too
    (legal in Python: not a builtin's name, as FX names any node); the caller recompiles.
    A node that has the name already (dynamo names nodes after the user's variables: ``x =
    self.lin(x)``) gives it up for another, so the input gets the very name."""
    held = {node.name: node for node in graph.nodes}
    for node, name in names.items():
        holder = held.get(name)
        if holder is node:
            continue
        if holder is not None:
            holder._rename(f"{name}_1")  # made unique by the namespace
            held[holder.name] = holder
        graph._graph_namespace._used_names.discard(name)  # held by no node now
        del held[node.name]
        node._rename(name)
        node.target = node.name
        held[node.name] = node


def output_structure(graph: torch.fx.Graph) -> Any:
    """What ``graph`` returns, as nested dicts (a dict, a ModelOutput: anything flattened
    with its keys) and tuples of nodes: the output node's argument, rebuilt from the
    pytree spec where the code unflattens a flat tuple (export's graphs)."""
    returned = graph.output_node().args[0]
    info = getattr(graph._codegen, "pytree_info", None)
    spec = getattr(info, "out_spec", None)
    if spec is None or not isinstance(returned, (tuple, list)):
        return returned
    return _rebuild(spec, iter(returned))


def _rebuild(spec: Any, leaves: Any) -> Any:
    if spec.is_leaf():
        return next(leaves, None)
    children = [_rebuild(_child(spec, i), leaves) for i in range(spec.num_children)]
    keys = spec.context
    if isinstance(keys, (list, tuple)) and len(keys) == len(children) and all(isinstance(k, str) for k in keys):
        return dict(zip(keys, children))
    return tuple(children)

"""A graph's inputs renamed and its outputs' structure read: torch.fx has no public API
for either (``Node._rename``; the pytree output spec of export's and make_fx's code)."""
from __future__ import annotations

from typing import Any

import torch.fx

from fxviz._torch_internals import _child


def rename_input(node: torch.fx.Node, name: str) -> None:
    """Name placeholder ``node`` ``name`` (made unique and legal in its graph, as FX names
    any node), in the generated code's signature too; the caller recompiles."""
    node._rename(name)
    node.target = node.name


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

"""What stands for what between two steps, for :mod:`fxviz.checks.numerics`: a node of the later
step for a node of the earlier one (by the structural match, then by provenance), and a
training step's returned gradients for their parameters."""
from __future__ import annotations

from typing import Any

import pandas as pd
import torch
import torch.fx

from fxviz.capture.info import graph_info


def stands_for(structure: pd.DataFrame, gm_a: torch.fx.GraphModule,
               gm_b: torch.fx.GraphModule | None = None) -> dict[str, str]:
    """Node of b -> the node of a whose value it stands for, from the structural match:
    what it took over (a fused conv: the BatchNorm it absorbed; of several, the last in
    a's order, whose value it now gives), else the node of a it is (``node_a``: its own name,
    but across a pass that traces the graph again, the node torch's trace made it from). With ``gm_b``
    also, for a's nodes left without one: a renamed graph input, by its position among
    the inputs; a node rewritten into several (a decomposition: ``layer_norm`` into
    ``native_layer_norm`` and ``getitem``), from b's provenance (``meta["from_node"]``),
    by the one of them that the rest of b reads. A node the pass added has none."""
    order = {n.name: i for i, n in enumerate(gm_a.graph.nodes)}
    found = {}
    for node, mark, took, was in zip(*(structure[c].tolist() for c in ("node", "mark", "counterpart", "node_a"))):
        absorbed = [name for name in took.split(", ") if name in order] if took else ()
        if mark != "removed" and absorbed:
            found[node] = max(absorbed, key=order.__getitem__)
        elif mark == "changed" or mark == "unchanged":
            found[node] = was
    if gm_b is not None:
        _by_provenance(found, gm_a, gm_b)
    return found


def _by_provenance(found: dict[str, str], gm_a: torch.fx.GraphModule, gm_b: torch.fx.GraphModule) -> None:
    """Add to ``found`` the inputs matched by position and the nodes that give a rewritten node's value."""
    taken = set(found.values())
    inputs = [[n.name for n in gm.graph.find_nodes(op="placeholder")] for gm in (gm_a, gm_b)]
    if len(inputs[0]) == len(inputs[1]):
        for name_a, name_b in zip(*inputs):
            if name_a not in taken and name_b not in found:
                found[name_b] = name_a
    left = {n.name for n in gm_a.graph.nodes} - taken
    for node in gm_b.graph.nodes:
        if node.name in found or node.op in ("placeholder", "output"):
            continue
        sources = {source.name for source in node.meta.get("from_node", ())} & left
        if len(sources) != 1:
            continue
        (source,) = sources
        outside = [user for user in node.users if source not in {s.name for s in user.meta.get("from_node", ())}]
        if outside:  # what the rest of the graph reads of the rewritten node: its value
            found[node.name] = source


def gradient_items(gm: torch.fx.GraphModule) -> list[tuple[tuple[int, ...], Any, torch.fx.Node]]:
    """The gradients a training graph returns: (path of their tuple or dict in the output,
    index or parameter name there, the node that gives it)."""
    outputs = gm.graph.find_nodes(op="output")
    if not outputs:
        return []
    found, returned = [], gm.graph.process_outputs(outputs[0].args[0])  # as forward returns it (export flattens)
    for path in graph_info(gm).gradient_outputs:
        try:
            container = follow(returned, path)
        except (IndexError, KeyError, TypeError):  # the output is no longer as recorded
            continue
        if not isinstance(container, (tuple, list, dict)):
            continue
        items = container.items() if isinstance(container, dict) else enumerate(container)
        found.extend((path, key, node) for key, node in items if isinstance(node, torch.fx.Node))
    return found


def follow(value: Any, path: tuple[int, ...]) -> Any:
    for index in path:
        value = value[index]
    return value


def parameter_of(gm: torch.fx.GraphModule, node: torch.fx.Node, shape: torch.Size | None, used: set[str]) -> str:
    """The parameter a returned gradient is for: of the module it is the backward of
    (``meta["backward_of"]``), the first not yet named whose shape it has; else the node's name."""
    module = node.meta.get("backward_of")
    try:
        params = gm.get_submodule(module).named_parameters(prefix=module, recurse=False) if module else ()
    except AttributeError:  # the graph reads its weights as inputs (export's joint graph): no module
        params = ()
    for name, param in params:
        if name not in used and param.shape == shape:
            used.add(name)
            return name
    return node.name

"""Backward nodes of a traced training step, attributed to the forward module they
differentiate, so they draw as "layer3.0 · backward" clusters beside the forward ones.

make_fx records no ``seq_nr`` for ops the autograd engine runs, but every backward op
reads what its forward op saved: a parameter (conv, BatchNorm), the forward op's own
output or saved statistics (ReLU, max-pool indices). So a backward node belongs to the
module of the parameter it reads, else of the latest forward tensor it reads, else to
its first backward input's module (sums of gradients, views).
"""
from __future__ import annotations

import torch.fx

MARK = " · backward"


def attribute_backward(gm: torch.fx.GraphModule) -> int:
    """Set ``module_path`` (forward path + ``MARK``) and ``meta["backward_of"]`` on the
    backward nodes of ``gm``; returns how many were attributed."""
    order = {node: i for i, node in enumerate(gm.graph.nodes)}
    backward = {n for n in gm.graph.nodes if n.op == "call_function" and "stack_trace" not in n.meta}
    if not any("stack_trace" in n.meta for n in gm.graph.nodes if n.op == "call_function"):
        return 0  # no forward recorded with source: nothing to tell forward from backward
    types = gm.meta.get("fxviz", {}).get("module_types", {})
    count = 0
    for node in gm.graph.nodes:
        if node not in backward:
            continue
        inputs = [a for a in node.all_input_nodes]
        params = [a.meta["module_path"] for a in inputs if a.op == "get_attr" and a.meta.get("module_path")]
        forward = [a for a in inputs if a not in backward and a.op == "call_function" and a.meta.get("module_path")]
        earlier = [a.meta["backward_of"] for a in inputs if a in backward and a.meta.get("backward_of") is not None]
        if params:
            path = params[0]
        elif forward:
            path = max(forward, key=order.__getitem__).meta["module_path"]
        elif earlier:
            path = earlier[0]
        else:
            continue
        node.meta["backward_of"] = path
        node.meta["module_path"] = path + MARK if path else "backward"
        if path in types:
            types.setdefault(path + MARK, types[path])
        count += 1
    return count

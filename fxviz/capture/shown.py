"""Which of dynamo's graphs a Session opens first: the largest, where the model's layers
are, not graph 0 (often setup a model does before its layers: Hugging Face DBRX's graph 0
builds the attention mask, its layers run in graph 2 of 9). The others stay listed.

>>> import torch, fxviz
>>> def masked(x, w):
...     mask = torch.ones(3).bool()
...     if x.sum() > 0:  # data-dependent: a graph break
...         x = x + 1
...     return (x * w).relu().sum()
>>> c = fxviz.capture.capture(masked, (torch.ones(3), torch.nn.Parameter(torch.ones(3))), tracer="dynamo")
>>> c.shown, graph_size(c.graphs[0]), graph_size(c.graphs[1])
(1, (0, 4), (1, 4))
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

import torch.fx
from torch import nn

from fxviz.capture.info import graph_info


def graph_size(gm: torch.fx.GraphModule) -> tuple[int, int]:
    """``(parameters, operations)``: the model's parameters ``gm`` reads (dynamo lifts them to
    inputs, or holds them) and its calls (``getitem``, which computes nothing, aside)."""
    params = {id(v) for v in graph_info(gm).graph_inputs or () if isinstance(v, nn.Parameter)}
    params.update(id(p) for p in gm.parameters())
    ops = sum(n.op.startswith("call_") and n.target is not operator.getitem for n in gm.graph.nodes)
    return len(params), ops


def shown_graph(graphs: Sequence[torch.fx.GraphModule]) -> int:
    """The index of the graph to open first: the one reading the most parameters, then
    running the most operations; on a tie the earliest."""
    sizes = [graph_size(gm) for gm in graphs]
    return max(range(len(sizes)), key=lambda i: (sizes[i], -i))


def shown_note(graphs: Sequence[torch.fx.GraphModule], shown: int) -> str:
    """Which graph opens first and why, worded as a check's scope ("graph 3 of 9"), and how
    to open the others; "" for one graph."""
    count = len(graphs)
    if count < 2:
        return ""
    params, ops = graph_size(graphs[shown])
    tied = sum(graph_size(gm) == (params, ops) for gm in graphs)
    size = f"it reads {params} of the model's parameters and runs {ops} operations" if params else (
        f"it runs {ops} operations and reads no parameter")
    which = f"the earliest of the {tied} largest" if tied > 1 else "the largest"
    return (f"Shown first: graph {shown + 1} of {count} (listed as graph {shown}), {which}: {size}. "
            "Pick another in explore()'s list of graphs, or open the one listed as graph i with "
            "fxviz.compiled(model, x).session(i).")

"""What a graph's ends are, in the user's words: inputs named after the parameters of
the forward (or step function) they feed, not ``args_0`` or ``arg0_1``; and a short
text of what the output holds (``node.meta["outputs_about"]``: "loss, gradients ×142")."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

from fxviz._torch_internals import tree_leaves
from fxviz._torch_internals.fx_io import output_structure, rename_inputs
from fxviz.capture.info import graph_info
from fxviz.capture.keywords import input_names


def name_ends(graphs: Sequence[torch.fx.GraphModule], model: Any, inputs: tuple, keywords: Sequence[str]) -> None:
    """Name the inputs of ``graphs`` (and of the AOT graphs dynamo's carry) after ``model``'s
    parameters (``inputs`` as fxviz passes them, the last ``len(keywords)`` the keyword ones)
    and describe their outputs. Running it again changes nothing."""
    names = input_names(model, inputs, keywords)
    for gm in graphs:
        info = graph_info(gm)
        for part in (gm, info.aot_forward, info.aot_backward):
            if part is not None:
                name_inputs(part, inputs, names)
                describe_outputs(part)


def name_inputs(gm: torch.fx.GraphModule, inputs: tuple, names: Sequence[str | None]) -> None:
    """Rename ``gm``'s placeholders fed by ``inputs`` after ``names`` (one per input; an
    input holding several tensors gives ``name_0``, ``name_1``, …). Parameters and buffers
    lifted to inputs (``qualified_name``) keep their names. A graph that records the inputs
    it ran on (dynamo's) is matched by identity, any other in order, by kind and shape."""
    leaves = [(f"{name}_{j}" if len(held) > 1 else name, value)
              for name, value in zip(names, inputs) if name
              for held in [_leaves(value)] for j, value in enumerate(held)]
    placeholders = [n for n in gm.graph.find_nodes(op="placeholder") if "qualified_name" not in n.meta]
    ran = graph_info(gm).graph_inputs
    if ran is not None:
        by_id = {id(value): name for name, value in leaves if isinstance(value, torch.Tensor)}
        pairs = [(node, by_id.get(id(value))) for node, value in
                 zip(gm.graph.find_nodes(op="placeholder"), ran) if node in placeholders]
    else:
        pairs = list(_in_order(placeholders, leaves))
    renamed = {node: name for node, name in pairs if name and node.name != name}
    if renamed:
        rename_inputs(gm.graph, renamed)
        gm.recompile()


def _leaves(value: Any) -> list[Any]:
    return tree_leaves(value) if isinstance(value, (tuple, list, dict)) else [value]


def _in_order(placeholders: list[torch.fx.Node], leaves: list[tuple[str, Any]]):
    """Each placeholder with the next input leaf that fits its recorded value (a tensor
    of its shape, None, another value): tracers drop some inputs (export: None, ints)."""
    at = 0
    for node in placeholders:
        if "val" not in node.meta:  # symbolic tracing: named after forward's parameters already
            return
        for k in range(at, len(leaves)):
            if _fits(node.meta["val"], leaves[k][1]):
                yield node, leaves[k][0]
                at = k + 1
                break


def _fits(val: Any, value: Any) -> bool:
    if isinstance(val, torch.Tensor):
        return isinstance(value, torch.Tensor) and val.dim() == value.dim() and val.dtype == value.dtype
    if val is None:
        return value is None
    return not isinstance(value, torch.Tensor)


def describe_outputs(gm: torch.fx.GraphModule) -> str:
    """Set and return ``meta["outputs_about"]`` of ``gm``'s output node: "" for one
    tensor, "logits, past_key_values ×8" for a dict (a ModelOutput), "3 outputs" for a
    tuple, and for a training step "loss, gradients ×142" (the gradients being the
    outputs ``gradient_outputs`` marks)."""
    gradients = {tuple(p) for p in graph_info(gm).gradient_outputs}
    about = _about(output_structure(gm.graph), (), gradients)
    gm.graph.output_node().meta["outputs_about"] = about
    return about


def _about(value: Any, path: tuple[int, ...], gradients: set[tuple[int, ...]]) -> str:
    if path in gradients:
        return f"gradients ×{len(value)}"
    if isinstance(value, dict):
        return ", ".join(f"{key} ×{len(v)}" if isinstance(v, (tuple, list, dict)) else str(key)
                         for key, v in value.items())
    if not isinstance(value, (tuple, list)):
        return ""
    if any((*path, i) in gradients for i in range(len(value))):  # a step: its loss (or outputs) and gradients
        return ", ".join(_about(v, (*path, i), gradients) or _leaf(v) for i, v in enumerate(value))
    return f"{len(value)} output{'s' * (len(value) != 1)}"


def _leaf(value: Any) -> str:
    val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    return "loss" if isinstance(val, torch.Tensor) and val.dim() == 0 else "output"

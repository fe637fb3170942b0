"""torch.export's ``run_decompositions`` as a step: watch torch IR turn into core ATen."""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Literal

import torch
import torch.fx
from torch.fx.passes.infra.pass_base import PassResult

from fxviz._torch_internals import FLASH_CPU, OpOverload, as_called
from fxviz.capture.info import graph_info, set_graph_info
from fxviz.passes.registry import NothingToDo, register


def _in_core_aten(gm: torch.fx.GraphModule) -> str | None:
    """Why lowering would change nothing: every operator is core ATen, none in the table. An
    operator outside core ATen may or may not be rewritten (export turns native_batch_norm
    into another), which only exporting tells: the pass is offered."""
    ops = {n.target for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, OpOverload)}
    if any(torch.Tag.core not in op.tags for op in ops) or not ops.isdisjoint(_decomposed()):
        return None
    return "the graph is in core aten already"


@functools.cache
def _decomposed() -> frozenset:
    """The operators the core ATen table rewrites (the table takes 0.1 s to make: the Passes
    tab asks on every step)."""
    return frozenset(torch.export.default_decompositions().keys())


@register(order=80, name="run_decompositions", preserves_semantics=True, level="aten", nothing_to_do=_in_core_aten)
def run_decompositions(gm: torch.fx.GraphModule, *, table: Literal["core_aten"] = "core_aten") -> PassResult:
    """Lower an ATen graph to core ATen operators (torch.export's run_decompositions)."""
    from fxviz.capture.export import from_program

    # Called as the graph before it (make_fx of a detector takes a list of images), not flat.
    flat = tuple(_stand_in(n.meta.get("val")) for n in gm.graph.find_nodes(op="placeholder"))
    args, kwargs = as_called(gm.graph, flat)
    before = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    program = torch.export.export(gm, args, kwargs, strict=False).run_decompositions(_table(gm))
    before_info = graph_info(gm)
    lowered = from_program(program, before_info.tracer or "export")
    set_graph_info(lowered, dataclasses.replace(before_info, tracer=graph_info(lowered).tracer))
    after = {str(n.target) for n in lowered.graph.nodes if n.op == "call_function"}
    if after == before:
        raise NothingToDo(f"the graph is in {table.replace('_', ' ')} already")
    return PassResult(lowered, True)


def _table(gm: torch.fx.GraphModule) -> Any:
    """The core ATen table, less the CPU flash-attention forward where the graph holds its
    backward (see :data:`fxviz._torch_internals.FLASH_CPU`)."""
    table = torch.export.default_decompositions()
    if any(str(n.target) == f"aten.{FLASH_CPU}_backward.default" for n in gm.graph.nodes):
        table.pop(getattr(torch.ops.aten, FLASH_CPU).default)
    return table


def _stand_in(value: Any) -> Any:
    """A real tensor of a placeholder's recorded shape, dtype, strides and device (values
    unused); a dynamic size (an exported program's ``Dim``) at the size it was exported
    with, its hint: the lowered graph is for that size. An input that is no tensor (None,
    a number; make_fx records nothing for None) is itself."""
    if not isinstance(value, torch.Tensor):
        return value
    shape, stride = ([int(d) for d in sizes] for sizes in (value.shape, value.stride()))
    return torch.empty_strided(shape, stride, dtype=value.dtype, device=value.device).zero_()

"""Shape, dtype, stride and memory-format propagation, with FLOPs and MACs per node."""
from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch.fx.node import map_aggregate
from torch.fx.passes.shape_prop import TensorMetadata

from fxviz._runtime import preserved_buffers
from fxviz._torch_internals import FlopCounter, extract_tensor_metadata, tree_leaves
from fxviz.errors import RunError
from fxviz.capture import as_inputs


class _Annotator(torch.fx.Interpreter):
    """Runs each node once, recording its output metadata, the FLOPs it issued and
    the bytes it reads and writes."""

    def __init__(self, gm: torch.fx.GraphModule, counter: FlopCounter):
        super().__init__(gm)
        self.counter = counter

    def run_node(self, n: torch.fx.Node) -> Any:
        before = self.counter.get_total_flops()
        self.counter.counted = False
        try:
            result = super().run_node(n)
        except Exception as exc:
            raise RunError(
                f"Running node '{n.name}' ({n.op} {n.target}) on the example inputs failed: "
                f"{type(exc).__name__}: {exc}. Check that the example inputs have the shapes "
                "and dtypes the model expects.", node=n.name
            ) from exc
        meta = map_aggregate(result, lambda v: extract_tensor_metadata(v) if isinstance(v, torch.Tensor) else v)
        if _has_tensor(meta):
            n.meta["tensor_meta"] = meta
        flops = self.counter.get_total_flops() - before if self.counter.counted else None
        n.meta["flops"] = flops
        # flop_counter counts a multiply-add as 2 FLOPs in matmul/conv, the ops that own MACs.
        n.meta["macs"] = None if flops is None else flops // 2
        n.meta["bytes"] = self._bytes_moved(n, result)
        return result

    def _bytes_moved(self, n: torch.fx.Node, result: Any) -> int | None:
        """Bytes of the tensors a computing node reads (its inputs and, for a module,
        its parameters and buffers) and writes (its outputs), each tensor once: what a
        memory-bound op costs. An upper bound for views, which move nothing."""
        if not n.op.startswith("call_"):
            return None
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        tensors = [*tree_leaves((args, kwargs)), *tree_leaves(result)]
        if n.op == "call_module":
            module = self.fetch_attr(n.target)
            tensors += [*module.parameters(), *module.buffers()]
        unique = {id(t): t for t in tensors if isinstance(t, torch.Tensor)}
        return sum(t.numel() * t.element_size() for t in unique.values())


def _has_tensor(meta: Any) -> bool:
    if isinstance(meta, TensorMetadata):
        return True
    if isinstance(meta, (tuple, list)):
        return any(_has_tensor(m) for m in meta)
    if isinstance(meta, dict):
        return any(_has_tensor(m) for m in meta.values())
    return False


def annotate(gm: torch.fx.GraphModule, example_inputs: Any) -> torch.fx.GraphModule:
    """Run ``gm`` once on ``example_inputs`` and record, per node, ``meta["tensor_meta"]``
    (shape, dtype, stride, memory format; nested for tuple outputs), ``meta["flops"]``
    and ``meta["macs"]`` (None where ``torch.utils.flop_counter`` has no formula for
    any operator the node ran: not counted is not zero) and ``meta["bytes"]`` (bytes
    read and written by a call node; None for others). Buffers are restored
    afterwards, so the model is unchanged."""
    annotated_run(gm, example_inputs)
    return gm


def annotated_run(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    """:func:`annotate`, returning the outputs of the run: one forward then serves
    both the drawing and a numeric check, and proves the graph runs at all."""
    with torch.no_grad(), preserved_buffers(gm), FlopCounter(display=False) as counter:
        return _Annotator(gm, counter).run(*as_inputs(example_inputs))


def memory_format_name(fmt: torch.memory_format | None) -> str:
    """'contiguous', 'channels_last', 'channels_last_3d' or 'strided' (none of these)."""
    names = {
        torch.contiguous_format: "contiguous",
        torch.channels_last: "channels_last",
        torch.channels_last_3d: "channels_last_3d",
    }
    return names.get(fmt, "strided")

"""Which IR a graph is at: what decides whether a pass applies to it."""
from __future__ import annotations

import operator
from collections.abc import Callable, Iterator

import torch.fx
from torch import nn

from fxviz._torch_internals import HigherOrderOperator, OpOverload


def ir_level(gm: torch.fx.GraphModule) -> str:
    """"aten" when every call is an ATen operator (export, make_fx; getitem aside, and the
    higher-order operators export wraps regions in: HF's rotary embedding runs under
    ``wrap_with_set_grad_enabled``) and the inputs it reads carry recorded values (make_fx
    records none for a None input); else "torch"."""
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    aten = all(n.op == "call_function" and (isinstance(n.target, (OpOverload, HigherOrderOperator))
                                            or n.target is operator.getitem or _on_sizes(n)) for n in calls)
    recorded = all("val" in n.meta or not n.users for n in gm.graph.find_nodes(op="placeholder"))
    return "aten" if aten and recorded else "torch"


def _on_sizes(node: torch.fx.Node) -> bool:
    """Arithmetic on symbolic sizes (``operator.mul``, ``torch.sym_max``), which export and
    make_fx write between ATen ops for a dynamic or data-dependent size (a program exported
    with a dynamic batch, VITS's predicted lengths): not a tensor op."""
    python = getattr(node.target, "__module__", None) == "_operator" or getattr(node.target, "__name__", "").startswith("sym_")
    return python and isinstance(node.meta.get("val"), (torch.SymInt, torch.SymBool, torch.SymFloat, int, float, bool))


def computes_gradients(gm: torch.fx.GraphModule) -> bool:
    """A training graph: forward and backward in one (make_fx of a training step, export's
    joint graph), whose backward nodes capture attributed to forward modules."""
    return any("backward_of" in n.meta for n in gm.graph.nodes)


def module_calls(gm: torch.fx.GraphModule, wanted: Callable[[nn.Module], bool]) -> Iterator[torch.fx.Node]:
    """The call_module nodes whose module ``wanted`` accepts, in graph order: one walk of the
    module tree, not a ``get_submodule`` per node (90 ms for 10k calls, on every step the
    Passes tab shows)."""
    paths = {path for path, module in gm.named_modules(remove_duplicate=False) if wanted(module)}
    return (n for n in gm.graph.find_nodes(op="call_module") if n.target in paths)

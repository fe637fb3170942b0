"""Dead-code elimination that keeps calls with side effects."""
from __future__ import annotations

import torch.fx
from torch.fx.passes.infra.pass_base import PassResult

from fxviz.passes.registry import NothingToDo, register


@register(order=50, name="eliminate_dead_code", preserves_semantics=True)
def eliminate_dead_code(gm: torch.fx.GraphModule) -> PassResult:
    """Remove nodes whose results are never used."""
    if not gm.graph.eliminate_dead_code(is_impure_node=lambda node: _writes_in_place(gm, node)):
        raise NothingToDo("no dead code found: every node's result is used")
    gm.delete_all_unused_submodules()
    return PassResult(gm, True)


def _writes_in_place(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    """torch's purity test, plus what it misses: ``x.add_(y)``, ``inplace=True``
    calls and in-place modules such as ``nn.ReLU(inplace=True)`` change their input
    even when nobody uses their result."""
    if node.op == "call_method" and str(node.target).endswith("_"):
        return True
    if node.kwargs.get("inplace"):
        return True
    if node.op == "call_module" and getattr(gm.get_submodule(node.target), "inplace", False):
        return True
    return node.is_impure()

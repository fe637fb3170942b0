"""Dead-code elimination that keeps calls with side effects."""
from __future__ import annotations

import torch.fx
from torch.fx.passes.infra.pass_base import PassResult

from fxviz.passes.registry import NothingToDo, register

NO_DEAD_CODE = "no dead code found: every node's result is used"


def _no_dead_code(gm: torch.fx.GraphModule) -> str | None:
    dead = (n for n in gm.graph.nodes if not n.users and n.op not in ("placeholder", "output"))
    return None if any(not _writes_in_place(gm, n) for n in dead) else NO_DEAD_CODE


@register(order=50, name="eliminate_dead_code", preserves_semantics=True, nothing_to_do=_no_dead_code)
def eliminate_dead_code(gm: torch.fx.GraphModule) -> PassResult:
    """Remove nodes whose results are never used."""
    if not gm.graph.eliminate_dead_code(is_impure_node=lambda node: _writes_in_place(gm, node)):
        raise NothingToDo(NO_DEAD_CODE)
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

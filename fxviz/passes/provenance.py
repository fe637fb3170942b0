"""Provenance while a pass runs, recorded as torch's GraphTransformObserver records it
(without needing inductor's config switched on): ``node.meta["from_node"]`` gets a
``NodeSource`` per created node (action CREATE) and per replacement (REPLACE: the node
whose uses it took over), so a diff can show a replaced op as replaced."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch.fx
from torch.fx.traceback import NodeSource, NodeSourceAction


@contextlib.contextmanager
def recording(gm: torch.fx.GraphModule, pass_name: str) -> Iterator[dict[str, set[str]]]:
    """Hooks on ``gm`` for the duration; yields ``{"created", "erased"}`` node names."""
    changes: dict[str, set[str]] = {"created": set(), "erased": set()}
    by_name: dict[str, torch.fx.Node] = {}

    def created(node: torch.fx.Node) -> None:
        changes["created"].add(node.name)
        by_name[node.name] = node
        node.meta.setdefault("from_node", []).append(NodeSource(None, pass_name, NodeSourceAction.CREATE))

    def erased(node: torch.fx.Node) -> None:
        changes["erased"].add(node.name)

    def replaced(old: torch.fx.Node, new: str, user: torch.fx.Node) -> None:
        node = by_name.get(new) or next((n for n in gm.graph.nodes if n.name == new), None)
        if node is None or any(getattr(s, "name", None) == old.name for s in node.meta.get("from_node", [])):
            return
        action = [NodeSourceAction.REPLACE] + ([NodeSourceAction.CREATE] if new in changes["created"] else [])
        sources = [s for s in node.meta.get("from_node", [])
                   if not (s.pass_name == pass_name and s.action == [NodeSourceAction.CREATE])]
        node.meta["from_node"] = [*sources, NodeSource(old, pass_name, action)]

    gm._register_create_node_hook(created)
    gm._register_erase_node_hook(erased)
    gm._register_replace_node_hook(replaced)
    try:
        yield changes
    finally:
        gm._unregister_create_node_hook(created)
        gm._unregister_erase_node_hook(erased)
        gm._unregister_replace_node_hook(replaced)

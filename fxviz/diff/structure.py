"""What changed between two graphs, node by node, before anything is timed.

Nodes are matched by name, then through what the passes recorded
(``node.meta["from_node"]``, :mod:`fxviz.passes.provenance`): a node that took over a
removed node's uses absorbed it (a fused conv absorbed its BatchNorm). Where nothing was
recorded (a graph rewritten by other tools), a removed node whose users now read
another node in its place is taken as replaced by that node. Either way a user whose
only difference is reading the replacement is unchanged: the data it computes on is the
same, which a plain comparison of argument names would call a change.
"""
from __future__ import annotations

from typing import Any

import pandas as pd
import torch
import torch.fx
from torch.fx.traceback import NodeSourceAction

from fxviz.annotation.graph import readable_target

__all__ = ["structure", "changes", "MARKS"]

MARKS = ("added", "removed", "changed", "unchanged")
DETAIL_WORDS = {"op": "op", "target": "target", "inputs": "inputs or arguments", "module": "module (weights or settings)",
                "attribute": "attribute value"}


def structure(gm_a: torch.fx.GraphModule, gm_b: torch.fx.GraphModule) -> pd.DataFrame:
    """One row per node of either graph: ``node``, ``mark`` (:data:`MARKS`: ``added``
    only in b, ``removed`` only in a), ``counterpart`` (the nodes it took over, or the one
    that took it over; "" for none) and ``why`` (words). Rows: b's order, then removed nodes in
    a's order."""
    nodes_a = {n.name: n for n in gm_a.graph.nodes}
    nodes_b = {n.name: n for n in gm_b.graph.nodes}
    recorded = _recorded(nodes_a, nodes_b)
    inferred = _inferred(nodes_a, nodes_b)
    into = {**inferred, **{old: new for old, (new, _) in recorded.items()}}
    took: dict[str, list[str]] = {}
    for old, new in into.items():
        took.setdefault(new, []).append(old)
    rows = []
    for name, b in nodes_b.items():
        a = nodes_a.get(name)
        absorbed = took.get(name, [])
        why = [f"took over {old}" + _by(recorded, old) for old in absorbed]
        if a is None:
            mark = "added"
            why.insert(0, _created(b))
        else:
            found = changes(a, gm_a, b, gm_b, into)
            mark = "changed" if found else "unchanged"
            why[:0] = [_detail(f, a, gm_a, b, gm_b) for f in found]
        rows.append((name, mark, ", ".join(absorbed), "; ".join(w for w in why if w)))
    for name in nodes_a.keys() - nodes_b.keys():
        new = into.get(name)
        if new is None:
            why = "not in the second graph"
        elif name in recorded:
            why = f"absorbed into {new}" + _by(recorded, name)
        else:
            why = f"its users now read {new}"
        rows.append((name, "removed", new or "", why))
    order = {name: i for i, name in enumerate(nodes_a)}
    removed = sorted(rows[len(nodes_b):], key=lambda row: order[row[0]])
    return pd.DataFrame(rows[:len(nodes_b)] + removed, columns=["node", "mark", "counterpart", "why"])


def changes(a: torch.fx.Node, gm_a, b: torch.fx.Node, gm_b, into: dict[str, str] | None = None) -> list[str]:
    """What differs between two nodes of the same name: ``op``, ``target``, ``inputs``
    (a's inputs read through ``into``: removed node -> the node in its place), else
    ``module`` (type, settings or tensors) or ``attribute``."""
    found = []
    if a.op != b.op:
        found.append("op")
    if readable_target(a, gm_a) != readable_target(b, gm_b):
        found.append("target")
    if _inputs(a, into or {}) != _inputs(b, {}):
        found.append("inputs")
    if found:
        return found
    if a.op == "call_module" and not _same_module(gm_a.get_submodule(a.target), gm_b.get_submodule(b.target)):
        found.append("module")
    if a.op == "get_attr" and not _same_value(_attr(gm_a, a.target), _attr(gm_b, b.target)):
        found.append("attribute")
    return found


def _inputs(node: torch.fx.Node, into: dict[str, str]) -> str:
    """The node's arguments as text, each input node by name (renamed through ``into``)."""
    named = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: _Name(into.get(n.name, n.name)))
    return repr(named)


class _Name(str):
    def __repr__(self) -> str:
        return str(self)


def _recorded(nodes_a: dict, nodes_b: dict) -> dict[str, tuple[str, str]]:
    """Removed node -> (the b node that took over its uses, the pass), from provenance."""
    found = {}
    for name, node in nodes_b.items():
        for source in node.meta.get("from_node", ()):
            action = source.action if isinstance(source.action, list) else [source.action]
            old = source.name
            if NodeSourceAction.REPLACE in action and old in nodes_a and old not in nodes_b:
                found[old] = (name, source.pass_name)
    return found


def _inferred(nodes_a: dict, nodes_b: dict) -> dict[str, str]:
    """Removed node -> the node its users (kept, same name) read in its place, where all agree."""
    seen: dict[str, set[str]] = {}
    for name, a in nodes_a.items():
        b = nodes_b.get(name)
        if b is None or b.op != a.op or b.target != a.target:
            continue
        ins_a, ins_b = a.all_input_nodes, b.all_input_nodes
        if len(ins_a) != len(ins_b):
            continue
        for x, y in zip(ins_a, ins_b):
            if x.name not in nodes_b and y.name != x.name:
                seen.setdefault(x.name, set()).add(y.name)
    return {old: news.pop() for old, news in seen.items() if len(news) == 1}


def _by(recorded: dict, old: str) -> str:
    return f" ({recorded[old][1]})" if old in recorded else ""


def _created(node: torch.fx.Node) -> str:
    passes = [s.pass_name for s in node.meta.get("from_node", ()) if s.pass_name]
    return f"created by {passes[-1]}" if passes else "not in the first graph"


def _detail(found: str, a: torch.fx.Node, gm_a, b: torch.fx.Node, gm_b) -> str:
    if found in ("op", "target"):
        before, after = (a.op, b.op) if found == "op" else (readable_target(a, gm_a), readable_target(b, gm_b))
        return f"{found}: {before} → {after}"
    return DETAIL_WORDS[found]


def _same_module(m_a: torch.nn.Module, m_b: torch.nn.Module) -> bool:
    """Same type, settings and tensors (by identity, else by value): a pass that folds
    weights into a new module shows up here even though the node looks the same."""
    if m_a is m_b:
        return True
    if type(m_a) is not type(m_b) or repr(m_a) != repr(m_b):
        return False
    state_a, state_b = m_a.state_dict(keep_vars=True), m_b.state_dict(keep_vars=True)
    return state_a.keys() == state_b.keys() and all(_same_value(state_a[k], state_b[k]) for k in state_a)


def _same_value(x: Any, y: Any) -> bool:
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        return x is y or (x.shape == y.shape and x.dtype == y.dtype and x.device == y.device and torch.equal(x, y))
    return x is y


def _attr(gm: torch.nn.Module, target: str) -> Any:
    module, _, name = target.rpartition(".")
    return getattr(gm.get_submodule(module), name)

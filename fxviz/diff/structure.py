"""What changed between two graphs, node by node, before anything is timed.

Nodes are matched by name, then through what the passes recorded
(``node.meta["from_node"]``, :mod:`fxviz.passes.provenance`): a node that took over a
removed node's uses absorbed it (a fused conv absorbed its BatchNorm). Where nothing was
recorded (a graph rewritten by other tools), a removed node whose users now read
another node in its place is taken as replaced by that node. A pass that traces the graph
again (``run_decompositions``) names its nodes anew, so a name means nothing across it:
there each node stands for the node of a that torch's trace records it was made from
(:func:`_paired`). Either way a user whose
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
    that took it over; "" for none), ``why`` (words) and ``node_a`` (the node of a it is, its
    own name but across a pass that traces the graph again; "" for an added node). Rows: b's
    order, then removed nodes in a's order."""
    nodes_a = {n.name: n for n in gm_a.graph.nodes}
    nodes_b = {n.name: n for n in gm_b.graph.nodes}
    paired = _paired(nodes_a, nodes_b)
    recorded = _recorded(nodes_a, nodes_b, paired)
    inferred = _inferred(nodes_a, nodes_b, paired)
    into = {**inferred, **{old: new for old, (new, _) in recorded.items()}}
    took: dict[str, list[str]] = {}
    for old, new in into.items():
        took.setdefault(new, []).append(old)
    as_b = {**into, **{name_a: name for name, name_a in paired.items()}}
    rows = []
    for name, b in nodes_b.items():
        a = nodes_a[paired[name]] if name in paired else None
        absorbed = took.get(name, [])
        why = [f"took over {old}" + _by(recorded, old) for old in absorbed]
        if a is None:
            mark = "added"
            why.insert(0, _created(b))
        else:
            found = changes(a, gm_a, b, gm_b, as_b)
            mark = "changed" if found else "unchanged"
            why[:0] = [_detail(f, a, gm_a, b, gm_b) for f in found]
            if a.name != name:
                why.insert(0, f"{a.name} traced again")
        rows.append((name, mark, ", ".join(absorbed), "; ".join(w for w in why if w), paired.get(name, "")))
    for name in nodes_a.keys() - set(paired.values()):
        new = into.get(name)
        if new is None:
            why = "not in the second graph"
        elif name in recorded:
            why = f"absorbed into {new}" + _by(recorded, name)
        else:
            why = f"its users now read {new}"
        rows.append((name, "removed", new or "", why, name))
    order = {name: i for i, name in enumerate(nodes_a)}
    removed = sorted(rows[len(nodes_b):], key=lambda row: order[row[0]])
    return pd.DataFrame(rows[:len(nodes_b)] + removed, columns=["node", "mark", "counterpart", "why", "node_a"])


def _paired(nodes_a: dict, nodes_b: dict) -> dict[str, str]:
    """Node of b -> the node of a it is: the one of the same name, but across a pass that
    traces the graph again names mean nothing (b's ``view_6`` is a's ``view_4``). Such a trace
    records for each node the node of a it was made from (``from_node``, action CREATE alone;
    a pass's replacements are :func:`_recorded`'s): a node made from another node of a, of
    its op, is that node, unless b keeps that node under its own name (a node inserted next
    to it, a ``getitem`` of it); of several made from one (``t`` into ``permute``), the one
    of its op and target, else the last. Then a node whose name another took is added, and
    the inputs, named anew too (``x``: ``args_0``), pair by position."""
    made = {name: _made_from(b, nodes_a) for name, b in nodes_b.items()}
    kept = {name for name in nodes_b if name in nodes_a and (not made[name] or name in made[name])}
    candidates: dict[str, list[str]] = {}
    for name, b in nodes_b.items():
        if len(made[name]) == 1 and name not in made[name] and b.op == "call_function":
            (source,) = made[name]
            if source not in kept and nodes_a[source].op == b.op:
                candidates.setdefault(source, []).append(name)
    paired = {}
    for source, names in candidates.items():
        same = [n for n in names if nodes_b[n].target == nodes_a[source].target]
        paired[(same or names)[-1]] = source
    inputs = [[name for name, n in nodes.items() if n.op == "placeholder"] for nodes in (nodes_a, nodes_b)]
    if paired and len(inputs[0]) == len(inputs[1]):
        paired.update(zip(inputs[1], inputs[0]))
    taken = set(paired.values())
    paired.update({name: name for name in nodes_b if name in nodes_a and name not in paired and name not in taken})
    return {name: paired[name] for name in nodes_b if name in paired}


def _made_from(node: torch.fx.Node, nodes_a: dict) -> set[str]:
    """The nodes of a that a trace records ``node`` was made from (action CREATE alone, named),
    less what a's node of the same name records already (provenance from earlier steps)."""
    earlier = nodes_a.get(node.name)
    old = {(s.name, s.pass_name) for s in earlier.meta.get("from_node", ())} if earlier is not None else set()
    return {s.name for s in node.meta.get("from_node", ()) if s.name in nodes_a and (s.name, s.pass_name) not in old
            and (s.action if isinstance(s.action, list) else [s.action]) == [NodeSourceAction.CREATE]}


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


def _recorded(nodes_a: dict, nodes_b: dict, paired: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Removed node -> (the b node that took over its uses, the pass), from provenance."""
    found, kept = {}, set(paired.values())
    for name, node in nodes_b.items():
        for source in node.meta.get("from_node", ()):
            action = source.action if isinstance(source.action, list) else [source.action]
            old = source.name
            if NodeSourceAction.REPLACE in action and old in nodes_a and old not in kept:
                found[old] = (name, source.pass_name)
    return found


def _inferred(nodes_a: dict, nodes_b: dict, paired: dict[str, str]) -> dict[str, str]:
    """Removed node -> the node its users (kept, paired) read in its place, where all agree."""
    seen: dict[str, set[str]] = {}
    kept = set(paired.values())
    for name, b in nodes_b.items():
        a = nodes_a.get(paired.get(name, ""))
        if a is None or b.op != a.op or b.target != a.target:
            continue
        ins_a, ins_b = a.all_input_nodes, b.all_input_nodes
        if len(ins_a) != len(ins_b):
            continue
        for x, y in zip(ins_a, ins_b):
            if x.name not in kept and y.name != x.name:
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

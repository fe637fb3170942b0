"""Where each node is drawn: its module's box, after rules that keep modules from
becoming noise (:func:`node_paths`), and the setup box of its module for setup plumbing:
the ops a model runs to build what its layers read (attention masks, position ids,
rotary tables, shape checks), folded into one collapsed box named for what they build
instead of opening the drawing on them (:func:`setup_paths`).

A plain op (``call_function``/``call_method``) of a box is setup when its value

- depends on no input and no weight (``arange``, ``full``, shape arithmetic, a dead op),
- is a check with no users (``_assert_tensor_metadata``),
- feeds the same place in several repeated layers (``layers.0.self_attn`` …
  ``layers.3.self_attn``: a mask), or
- feeds nothing but other setup ops of its box (the mask's making).

The box's own trunk (an embedding feeding the first layer) is none of these. A box keeps
its setup ops in the open when they are fewer than ``MIN_OPS``; a module that is all
setup (a rotary embedding) keeps its own name and is drawn collapsed like a setup box.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import networkx as nx

MIN_OPS = 3  # fewer setup ops than this stay where they are: one box would hide as much as it shows
MIN_CHECKS = 8  # from this many, ops that feed nothing outside (checks) make a setup box; fewer are not drawn
FAN_OUT = 3  # a value read by this many repeated layers is built for them
MIN_CALL = 3  # a call of a module called several times with fewer nodes draws them in its parent (a shared ReLU)
SETUP = "⟨setup⟩"  # the last part of a setup box's path
_CALL = re.compile(r"@\d+(?=\.|$)")  # a later call's mark in a box path
_LAYER = re.compile(r"(.*?)\.(\d+)(?:\.|$)")  # a stack's path and a layer's index in it
_OPS = ("call_function", "call_method")
_SOURCES = ("placeholder", "get_attr", "call_module")  # what makes a value depend on an input or a weight
# What a setup box builds, by the words of its ops' targets (``aten.tril.default``, ``operator.gt``).
_BUILDS = (
    ("masks", {"tril", "triu", "masked_fill", "where", "le", "lt", "ge", "gt", "eq", "ne", "logical_and",
               "logical_or", "logical_not", "bitwise_and", "bitwise_or", "bitwise_not", "and_", "or_"}),
    ("positions", {"arange", "cumsum"}),
    ("rotary tables", {"cos", "sin", "outer"}),
    ("checks", {"_assert", "_assert_async", "_assert_scalar", "_assert_tensor_metadata", "_check", "_check_is_size"}),
    ("shape arithmetic", {"sym_size", "sym_numel", "size", "getattr", "floordiv", "getitem"}),
    ("device and dtype moves", {"_to_copy", "to", "type_as", "float", "device"}),
)
_WORD = re.compile(r"[a-z0-9_]+")
_CHECKS = _BUILDS[3][1]


def effective_path(attrs: dict) -> str:
    """The cluster a node is drawn in: a leaf module's own call sits in its parent module."""
    path = attrs.get("module_path") or ""
    if attrs["op"] == "call_module" and path and attrs.get("target", "").split(" ")[0] == path:
        return path.rpartition(".")[0]
    return path


def module_of(path: str) -> str:
    """The module a box of :func:`node_paths` draws: ``update_block@3.flow_head`` -> ``update_block.flow_head``."""
    return _CALL.sub("", path) if "@" in path else path


def _prefixes(path: str) -> list[str]:
    parts = path.split(".") if path else []
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def node_paths(graph: nx.DiGraph, hidden: set[str]) -> dict[str, str]:
    """Each node's box: its module path, after rules that keep modules from becoming noise.
    A module called several times (RAFT's update block, once per refinement step; Gemma 3n's
    ``altup``, by ``predict`` then ``correct``) has a box per call: ``path``, ``path@1``, ...
    (as torch numbers calls); one box over all would hold what runs between them and,
    collapsed, take its own output back in. Calls are told apart by the module's own ops
    (:func:`_calls`): a container (a ``ModuleList``) stays one box, and so does a module with
    its backward in a training step. A module (or call) with a single node draws it in its
    parent, as do small calls of a module called several times: a lowered ReLU shared by a
    block is a node, not a one-node cluster. Placeholders do not count: dynamo and AOT lift
    every parameter to an input, first in the graph."""
    paths: dict[str, str] = {}
    order: list[str] = []  # the nodes drawn, placeholders left out, in graph order
    starts: list[tuple[str, int]] = []  # (path, place in order) where each run of nodes sharing a path starts
    own: dict[str, list[int]] = {}  # path -> [first place, last place, node count] of its own nodes
    span: list[int] = []
    last_path = None
    at = -1  # place in order
    for name, attrs in graph.nodes(data=True):  # in graph order; neighbours mostly share a path
        if hidden and name in hidden:
            continue
        path = paths[name] = effective_path(attrs)
        if attrs["op"] == "placeholder":
            continue
        at += 1
        order.append(name)
        if path != last_path:
            starts.append((path, at))
            span = own.get(path)
            if span is None:
                span = own[path] = [at, at, 0]
            last_path = path
        span[1], span[2] = at, span[2] + 1
    spans: dict[str, list[int]] = {}  # the same over each module's whole subtree
    for path, (first, last, count) in own.items():
        for prefix in _prefixes(path):
            span = spans.setdefault(prefix, [first, last, 0])
            span[0], span[1], span[2] = min(span[0], first), max(span[1], last), span[2] + count
    broken = {p for p, (first, last, count) in spans.items() if last - first + 1 != count}  # not one stretch
    single = {p for p, span in spans.items() if span[2] == 1}
    if not broken and not single:
        return paths  # every module one stretch of nodes (one call), as in most models
    kept, cut = {}, False  # path -> its box, where no module on the path is cut into calls
    for path in set(paths.values()):
        kept[path] = path
        for prefix in _prefixes(path):  # the outermost rule decides
            if prefix in broken or prefix in single:
                kept[path] = prefix.rpartition(".")[0]
                cut = cut or prefix in broken
                break
    found: dict[str, str] = {}
    if cut:  # the modules not in one stretch are cut into calls among their parents' runs
        parents = {p.rpartition(".")[0] for p in broken if not broken.intersection(_prefixes(p)[:-1])}
        region = {path: "" if "" in parents else next((p for p in _prefixes(path) if p in parents), None)
                  for path in own}
        nodes = graph._node  # networkx's own dict: its views cost more than this pass
        runs, ids = [], {}  # (path parts, names, all weights) of each run; parent -> its runs
        for i, (path, start) in enumerate(starts):
            names = order[start : starts[i + 1][1] if i + 1 < len(starts) else len(order)]
            runs.append((path.split(".") if path else [], names, all(nodes[n].get("weight") for n in names)))
            if region[path] is not None:
                ids.setdefault(region[path], []).append(i)
        for parent, inside in ids.items():
            _place(runs, inside, parent, len(_prefixes(parent)), found)
    for name, path in paths.items():
        paths[name] = found.get(name, kept[path])
    return paths


def _place(runs: list[tuple], ids: Sequence[int], box: str, depth: int, found: dict[str, str]) -> None:
    """Box the nodes of ``runs[ids]`` (the runs of one call of the module drawn as ``box``,
    their paths at least ``depth`` parts deep): the module's own nodes in ``box``, and a box
    per call of each submodule (:func:`_calls`); a call of one node (or of fewer than
    ``MIN_CALL`` among several) draws its nodes in ``box``."""
    children: dict[str, list[tuple[int, int]]] = {}
    position = 0
    for i in ids:
        parts, names, weights = runs[i]
        position += not weights  # a weight read in between ends no stretch
        if len(parts) == depth:
            found.update(dict.fromkeys(names, box))
        else:
            children.setdefault(parts[depth], []).append((position, i))
    for part, inner in children.items():
        calls = _calls(runs, inner, depth + 1)
        number = 0
        for call in calls:
            names = [name for i in call for name in runs[i][1]]
            if len(names) == 1 or (len(calls) > 1 and len(names) < MIN_CALL):
                found.update(dict.fromkeys(names, box))
                continue
            child = (f"{box}.{part}" if box else part) + (f"@{number}" if number else "")
            number += 1
            _place(runs, call, child, depth + 1, found)


def _calls(runs: list[tuple], inner: list[tuple[int, int]], depth: int) -> list[list[int]]:
    """One submodule's runs (``(position, index)`` among its parent call's) as its calls: a
    stretch of runs with none of the parent call's others between them starts a call where
    it has ops of the module's own (paths ``depth`` parts deep) and the call before has too.
    A stretch without (its backward's clusters in a training step, a container's layers
    with the model's own ops between them) belongs to the call before it."""
    stretches: list[list[int]] = []
    last = -2
    for position, i in inner:
        if position > last + 1:
            stretches.append([])
        stretches[-1].append(i)
        last = position
    calls: list[list[int]] = []
    own = False  # the last call has ops of the module's own
    for stretch in stretches:
        mine = any(len(runs[i][0]) == depth and not runs[i][2] for i in stretch)
        if calls and not (own and mine):
            calls[-1].extend(stretch)
            own = own or mine
        else:
            calls.append(stretch)
            own = mine
    return calls


def setup_paths(graph: nx.DiGraph, paths: dict[str, str]) -> tuple[dict[str, str], set[str]]:
    """FX node -> the setup box it belongs in (``<its box>.⟨setup⟩``, or its own module's
    path when the module is all setup), for the setup ops of every box that has at least
    ``MIN_OPS`` of them; and the checks of boxes with fewer than ``MIN_CHECKS`` setup ops
    that feed nothing outside them (``getattr``, ``eq``, ``_assert`` on an input's shape),
    which a drawing leaves out as it does weights. ``paths``: each drawn node's box."""
    # networkx's own dicts (graph.py fills them): its views cost more than this whole pass at 100k nodes
    nodes, pred, succ = graph._node, graph._pred, graph._succ
    fed: set[str] = set()  # nodes whose value depends on an input or a weight
    for name, attrs in nodes.items():
        if attrs["op"] in _SOURCES or not fed.isdisjoint(pred[name]):
            fed.add(name)
    setup: set[str] = set()
    for name in reversed(paths):  # users before producers
        attrs = nodes[name]
        if attrs["op"] not in _OPS:
            continue
        users = succ[name]
        if name not in fed:
            setup.add(name)
        elif not users:
            if _CHECKS.intersection(_WORD.findall(attrs["target"])):
                setup.add(name)
        elif (setup.issuperset(users) and all(paths.get(u) == paths[name] for u in users)) \
                or (len(users) >= FAN_OUT and _feeds_layers(users, paths)):
            setup.add(name)
    per_box: dict[str, list[str]] = {}
    for name in setup:
        per_box.setdefault(paths[name], []).append(name)
    checks = set()
    for box, names in list(per_box.items()):  # a module's few input checks: not drawn, as weights are not
        if len(names) < MIN_CHECKS and all(u in setup for n in names for u in succ[n]):  # nothing read outside
            checks.update(per_box.pop(box))
    own = Counter(paths.values())
    parents = {path.rpartition(".")[0] for path in own if path}
    found = {}
    for box, names in per_box.items():
        if len(names) >= MIN_OPS:  # a whole module of setup (rotary_emb) is itself the box, named already
            whole = box and len(names) == own[box] and box not in parents
            found.update((name, box if whole else f"{box}.{SETUP}" if box else SETUP) for name in names)
    return found, checks


def _feeds_layers(users: dict, paths: dict[str, str]) -> bool:
    """Read in ``FAN_OUT`` or more layers of one stack (``layers.0…``, ``layers.1…``)."""
    layers: dict[str, set[str]] = {}
    for user in users:
        found = _LAYER.match(paths.get(user, ""))
        if found:
            layers.setdefault(found[1], set()).add(found[2])
    return any(len(indices) >= FAN_OUT for indices in layers.values())


def setup_label(graph: nx.DiGraph, names: list[str]) -> str:
    """``setup · masks, positions``: what the box's ops build, in the order of ``_BUILDS``."""
    builds = _builds(graph, names)
    return "setup · " + ", ".join(builds) if builds else "setup"


def _builds(graph: nx.DiGraph, names: list[str]) -> list[str]:
    words = {w for n in names for w in _WORD.findall(graph.nodes[n]["target"].lower())}
    return [what for what, kind in _BUILDS if kind & words]

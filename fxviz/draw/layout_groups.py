"""Synthetic boxes that keep a box's list of children short (``MAX_ITEMS``): segments of its
own nodes ("nodes 120–151"), ranges of sibling modules ("layers 0–31 · Block"), the passes
of a loop over module calls ("iteration 3 of 12 · corr_block, update_block") or over its own
ops (told by a recurring source line, else by a repeating sequence of ops) and, where those
are not enough, chunks of whatever is there.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from fxviz.draw.layout_paths import module_of

MAX_ITEMS = 48  # a box with more children than this has them grouped
CHUNK = 32  # children per synthetic group
REPEAT_RUN = 3  # this many identical sibling modules in a row start collapsed
LOOPS = 32  # loops found one after another in a run of nodes; past them, segments (no deep recursion)
PERIOD = 512  # the longest pass of a loop told by its ops alone (each length tried costs a pass over the run)

Item = tuple[str, str]  # ("node", FX name) | ("box", path)


@dataclass
class Box:
    """A module (``synthetic=False``) or a group of consecutive children of one."""

    path: str
    parent: str | None
    label: str
    synthetic: bool = False
    items: list[Item] = field(default_factory=list)
    size: int = 0  # FX nodes inside
    depth: int = 0
    repeated: bool = False  # one of a run of identical sibling modules, or a range of them
    edges: int = 0  # distinct edges between its children, drawn when it opens
    nodes_only: bool = False  # a segment: a synthetic group of plain nodes (least informative)
    setup: bool = False  # the setup plumbing of its parent (layout_paths), drawn collapsed
    iteration: tuple[int, int, str] | None = None  # a loop's pass: (its number, the passes, where the loop is)


def group(boxes: dict[str, Box], owner: Box, graph: nx.DiGraph) -> None:
    """Bound ``owner``'s children: group long runs of one kind first (nodes into segments,
    modules into ranges); when that is not enough, every run of nodes into a segment, so
    that its modules stay in view (RT-DETR's top level: 152 ops of query selection between
    7 modules drew as two "nodes" boxes); then each pass of a loop over module calls into a
    box; then whatever is still too long."""
    if len(owner.items) <= MAX_ITEMS:
        return
    runs: list[list[Item]] = []
    for item in owner.items:
        if runs and runs[-1][0][0] == item[0] and _plain(runs[-1][-1], graph) and _plain(item, graph):
            runs[-1].append(item)
        else:
            runs.append([item])
    pieces = [_passes(boxes, owner, run, graph) if len(run) > MAX_ITEMS else run for run in runs]
    if sum(map(len, pieces)) > MAX_ITEMS:
        pieces = [[("box", _make_group(boxes, owner, piece, piece, graph))]
                  if len(piece) > 1 and all(kind == "node" for kind, _ in piece) else piece for piece in pieces]
    items = [item for piece in pieces for item in piece]
    if len(items) > MAX_ITEMS:
        items = _iterations(boxes, owner, items, graph)
    owner.items = chunk(boxes, owner, items, graph) if len(items) > MAX_ITEMS else items


def _plain(item: Item, graph: nx.DiGraph) -> bool:
    """A box, or a node a segment may hold: the graph's inputs and output stay in view."""
    return item[0] == "box" or graph.nodes[item[1]]["op"] not in ("placeholder", "output")


def _passes(boxes: dict[str, Box], owner: Box, run: list[Item], graph: nx.DiGraph) -> list[Item]:
    """A long run of plain nodes as the passes of the loop that made it, chunked into segments
    if still too many (a run of modules: into ranges): told by the ops' own sequence repeating
    (:func:`_periodic`: what a source line cannot tell, where none is recorded or one line ran
    a scan's every step), else by one source line recurring at a fixed stride (a recurrence
    unrolled in a module's own code, whose passes differ)."""
    if run[0][0] != "node":  # a run of modules: ranges of them
        return chunk(boxes, owner, run, graph)
    starts = _periodic(run, graph)
    if starts:
        passes = _iterations(boxes, owner, run, graph, lambda _, key: "pass" if key in starts else None)
    else:
        lines = [graph.nodes[key].get("source") for _, key in run]
        firsts = {key: line for at, ((_, key), line) in enumerate(zip(run, lines))
                  if line and (at == 0 or line != lines[at - 1])}  # each line's first op: a line makes several
        passes = _iterations(boxes, owner, run, graph, lambda _, key: firsts.get(key))
    if len(passes) <= MAX_ITEMS:
        return passes
    pieces: list[list[Item]] = []  # each loop's passes apart from the nodes before and after it
    for item in passes:
        if pieces and _loop_of(pieces[-1][-1], boxes) == _loop_of(item, boxes):
            pieces[-1].append(item)
        else:
            pieces.append([item])
    passes = [item for piece in pieces for item in (chunk(boxes, owner, piece, graph) if len(piece) > CHUNK else piece)]
    return chunk(boxes, owner, passes, graph) if len(passes) > MAX_ITEMS else passes


def _loop_of(item: Item, boxes: dict[str, Box]) -> tuple[int, str] | None:
    """The loop a pass box belongs to (its passes, where it is); None for anything else."""
    iteration = boxes[item[1]].iteration if item[0] == "box" else None
    return None if iteration is None else iteration[1:]


def _periodic(run: list[Item], graph: nx.DiGraph) -> set[str]:
    """The first node of each pass of the longest stretch of ``run`` that repeats one sequence of
    ops, where no source line tells the passes apart (symbolic tracing records none; one line made
    all of a scan's steps: Kimi-Linear's chunked attention under export): the shortest period (3 to
    :data:`PERIOD` ops) whose stretch holds 3 passes or more and half the run; none when there is none."""
    codes: dict[tuple, int] = {}
    ops = np.array([codes.setdefault((graph.nodes[key]["op"], graph.nodes[key].get("target")), len(codes))
                    for _, key in run])
    for period in range(1, min(len(ops) // 3, PERIOD) + 1):
        differs = np.flatnonzero(ops[:-period] != ops[period:])
        edges = np.concatenate(([-1], differs, [len(ops) - period]))
        at = int(np.argmax(np.diff(edges)))
        start, length = int(edges[at]) + 1, int(edges[at + 1] - edges[at]) - 1 + period  # the stretch, ops
        if length >= 3 * period and 2 * length >= len(ops):  # a run of one or two ops over and over: no passes
            return {run[start + k * period][1] for k in range(length // period)} if period >= 3 else set()
    return set()


def _call_of(boxes: dict[str, Box]):
    """An item's anchor for :func:`_iterations` over module calls: the module a call box calls."""
    return lambda kind, key: module_of(key) if kind == "box" and not boxes[key].synthetic else None


def _iterations(boxes: dict[str, Box], owner: Box, items: list[Item], graph: nx.DiGraph,
                anchor=None, depth: int = 0) -> list[Item]:
    """``items`` with each pass of a loop as one box ("iteration 3 of 12 · corr_block,
    update_block"): the stretches that start at the items of one ``anchor`` (by default the
    calls of one module; see :func:`_passes` for source lines), where they recur at a fixed
    stride (RAFT's refinement steps), so that the loop's modules stay in view. By source line,
    the stretches before and after hold other loops (a scan per head), a pass another (its steps)."""
    # by source line, the stretches around a loop are searched too, at most LOOPS deep: each search reads them all
    by_line, anchor = anchor is not None, anchor or _call_of(boxes)
    around = by_line and depth < LOOPS
    calls: dict[str, list[int]] = defaultdict(list)
    for at, (kind, key) in enumerate(items):
        if (found := anchor(kind, key)) is not None:
            calls[found].append(at)
    best = (1, 0, 0, 0)  # (calls, -start, start, stride) of the longest run of calls at one stride
    for places in calls.values():
        first = 0
        for end in range(1, len(places) + 1):
            if end == len(places) or places[end] - places[end - 1] != places[first + 1] - places[first]:
                stride = places[first + 1] - places[first] if end > first + 1 else 0
                if stride > 1 and (end - first, -places[first]) > best[:2]:
                    best = (end - first, -places[first], places[first], stride)
                first = end - 1
    count, _, start, stride = best
    if count < 2:
        return items
    out, end = items[:start], start + count * stride
    out = _iterations(boxes, owner, out, graph, anchor, depth + 1) if around else out
    ends = [at for at, (kind, key) in enumerate(items[start:end], start) if kind == "node"
            and graph.nodes[key]["op"] == "output"]  # the graph's output ends the loop
    end = ends[0] if ends else end
    for k in range(count):
        part = items[start + k * stride: min(start + (k + 1) * stride, end)]
        names = dict.fromkeys(module_of(key).rpartition(".")[2] for kind, key in part
                              if kind == "box" and not boxes[key].synthetic)
        lines = [graph.nodes[key].get("source") for kind, key in part if kind == "node"]
        where = ", ".join(names) or next((line.rpartition("/")[2] for line in lines if line), "")
        label = f"iteration {k + 1} of {count} · {where}" if where else f"iteration {k + 1} of {count}"
        inner = _passes(boxes, owner, part, graph) if by_line and len(part) > MAX_ITEMS else part
        path = _make_group(boxes, owner, part, inner, graph, label)
        boxes[path].repeated = count >= REPEAT_RUN  # as a run of identical layers: they start collapsed
        boxes[path].iteration = (k + 1, count, where)
        out.append(("box", path))
    return out + (_iterations(boxes, owner, items[end:], graph, anchor, depth + 1) if around else items[end:])


def chunk(boxes: dict[str, Box], owner: Box, items: list[Item], graph: nx.DiGraph,
          per: int = CHUNK) -> list[Item]:
    """``items`` as at most ``MAX_ITEMS`` groups of ``per`` consecutive items, nested as needed."""
    size = per
    while -(-len(items) // size) > MAX_ITEMS:
        size *= per
    out: list[Item] = []
    for start in range(0, len(items), size):
        part = items[start : start + size]
        if len(part) == 1:
            out.append(part[0])
            continue
        # nested only when the part makes several groups: one group of it would have the
        # part's own span, so its path, and replace this one (which would then list itself)
        inner = chunk(boxes, owner, part, graph, per) if len(part) > per else part
        out.append(("box", _make_group(boxes, owner, part, inner, graph)))
    return out


def _span(boxes: dict[str, Box], items: list[Item], graph: nx.DiGraph) -> tuple[int, int, int]:
    """First and last FX index under ``items``, and their node count."""
    first_item, last_item = items[0], items[-1]
    while first_item[0] == "box":
        first_item = boxes[first_item[1]].items[0]
    while last_item[0] == "box":
        last_item = boxes[last_item[1]].items[-1]
    count = sum(boxes[k].size if kind == "box" else 1 for kind, k in items)
    return graph.nodes[first_item[1]]["index"], graph.nodes[last_item[1]]["index"], count


def _lines(part: list[Item], graph: nx.DiGraph) -> str:
    """`` · rpn.py:250–274``: the lines of the model's code that made most of ``part``'s nodes
    (a segment's own words: where to read what it does); "" where none is recorded."""
    lines = defaultdict(list)
    for kind, key in part:
        path, _, line = str(graph.nodes[key].get("source") or "").rpartition(":") if kind == "node" else ("", "", "")
        if path and line.isdigit():
            lines[path.rpartition("/")[2]].append(int(line))
    if not lines:
        return ""
    name, numbers = max(lines.items(), key=lambda item: len(item[1]))
    low, high = min(numbers), max(numbers)
    return f" · {name}:{low}" + (f"–{high}" if high > low else "")


def _make_group(boxes: dict[str, Box], owner: Box, part: list[Item], inner: list[Item], graph: nx.DiGraph,
                label: str = "") -> str:
    """A synthetic box of ``part`` listing ``inner``; ``label``: its own (an iteration), else
    the range of modules or nodes it spans."""
    first, last, count = _span(boxes, part, graph)
    path = f"{owner.path}.⟨{first}–{last}⟩" if owner.path else f"⟨{first}–{last}⟩"
    modules = [boxes[k] for kind, k in part if kind == "box" and not boxes[k].synthetic]
    nodes_only = all(kind == "node" or boxes[k].nodes_only for kind, k in part)
    if len(modules) == len(part) and not label:  # a range of sibling modules: "layers 0–31 · Block"
        names = [m.label.partition(" · ")[0] for m in modules]
        kinds = {m.label.partition(" · ")[2] for m in modules}
        prefix = owner.path.rpartition(".")[2]
        kind = kinds.pop() if len(kinds) == 1 else ""
        label = f"{prefix} {names[0]}–{names[-1]}".strip() + (f" · {kind}" if kind else "")
    passes = [boxes[k].iteration for kind, k in part if kind == "box" and boxes[k].iteration]
    if not label and len(passes) == len(part) and len({p[1:] for p in passes}) == 1:  # a run of one loop's passes
        label = f"iterations {passes[0][0]}–{passes[-1][0]} of {passes[0][1]}" + (f" · {passes[0][2]}" if passes[0][2] else "")
    label = label or f"nodes {first}–{last}{_lines(part, graph)}"
    for _kind, key in inner:
        if _kind == "box":
            boxes[key].parent = path
    # A range of mostly identical blocks (a stack's first or last layer may differ) is as
    # uninformative opened as they are; a range of such ranges is not (it shows how many).
    modules_only = all(kind == "box" and not boxes[k].synthetic for kind, k in inner)
    repeated = modules_only and 2 * sum(boxes[k].repeated for _, k in inner) > len(inner)
    boxes[path] = Box(path, owner.path, label, synthetic=True, items=inner, size=count,
                      nodes_only=nodes_only, repeated=repeated)
    return path

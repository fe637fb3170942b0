"""Backward nodes of a traced training step, attributed to the forward module they
differentiate, so they draw as "layer3.0 · backward" clusters beside the forward ones.

From autograd's own record where it exists: :func:`sequence_numbers` marks, while
make_fx traces, each op the autograd engine runs (``meta["autograd_backward"]``) with the
sequence number of the autograd node running it, which is the ``seq_nr`` of the forward
op that created that node (torch's ``_get_seq_nr`` convention, as AOT autograd records
it). A backward node then belongs to the module of the forward nodes with its ``seq_nr``.

Fallback (graphs without that record, e.g. ``torch.func.grad``, and backward ops whose
forward op has no module): every backward op reads what its forward op saved: a
parameter (conv, BatchNorm), the forward op's own output or saved statistics (ReLU,
max-pool indices). So such a node belongs to the module of the parameter it reads, else
of the latest forward tensor it reads, else to its first backward input's module (sums
of gradients, views).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import get_proxy_mode

from fxviz._torch_internals import TorchDispatchMode, current_autograd_node
from fxviz.capture.info import graph_info, own_graph_info

MARK = " · backward"
#: the cluster of a training step's loss: the step's own ops after the model's last one
LOSS = "loss"


class _AutogradMarks(TorchDispatchMode):
    """Above make_fx's proxy mode: while the autograd engine runs an autograd node, every
    node the op adds to the graph gets that node's sequence number and the backward mark."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        running = current_autograd_node()
        proxy = get_proxy_mode()
        if running is None or proxy is None:
            return func(*args, **(kwargs or {}))
        graph = proxy.tracer.graph
        last = graph._root.prev  # nodes added after this one come from this op
        meta = fx_traceback.current_meta
        meta["grad_fn_seq_nr"], meta["in_grad_fn"] = [running._sequence_nr()], 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            del meta["grad_fn_seq_nr"], meta["in_grad_fn"]
            node = last.next
            while node is not graph._root:
                node.meta["autograd_backward"] = True
                node = node.next


@contextlib.contextmanager
def sequence_numbers() -> Iterator[None]:
    """Enter inside the function make_fx traces (so the mode sits above make_fx's own):
    forward nodes get ``seq_nr`` (torch records it while node meta is preserved), backward
    nodes the ``seq_nr`` of their forward op and ``autograd_backward``."""
    with fx_traceback.preserve_node_meta(), _AutogradMarks():
        yield


def loss_cluster(gm: torch.fx.GraphModule) -> int:
    """Put the loss a training step computes after calling its model (``cross_entropy``
    on the logits: ops of the step itself, outside every module, after the model's last
    op) in a ``"loss"`` cluster, so its backward is drawn as ``"loss · backward"`` beside
    it rather than at the top level; autograd's seed (``ones_like(loss)``) starts that
    backward. Only ops that feed the returned values or the backward; returns their count."""
    nodes = list(gm.graph.nodes)
    first_backward = next((i for i, n in enumerate(nodes) if n.meta.get("autograd_backward")), None)
    if first_backward is None:
        return 0
    last_model = max((i for i, n in enumerate(nodes[:first_backward]) if n.meta.get("nn_module_stack")), default=None)
    if last_model is None:
        return 0
    tail = [n for n in nodes[last_model + 1 : first_backward]
            if n.op == "call_function" and not n.meta.get("nn_module_stack") and not n.meta.get("module_path")]
    feeding: set[torch.fx.Node] = set()
    for node in reversed(tail):
        if any(u.op == "output" or u.meta.get("autograd_backward") or u in feeding for u in node.users):
            feeding.add(node)
    seeds = {n for n in feeding if n.target is torch.ops.aten.ones_like.default}  # autograd's ones_like(loss)
    loss = [n for n in tail if n in feeding and n not in seeds]
    for node in loss:
        node.meta["module_path"] = LOSS
    for node in seeds:
        if node.all_input_nodes and set(node.all_input_nodes) <= set(loss):
            _mark(gm, node, LOSS)
    return len(loss)


def attribute_backward(gm: torch.fx.GraphModule, backward: set[torch.fx.Node] | None = None,
                       known: dict[torch.fx.Node, str] | None = None) -> int:
    """Set ``module_path`` (forward path + ``MARK``) and ``meta["backward_of"]`` on the
    backward nodes of ``gm`` (``backward``, when the caller knows them, with the module
    ``known`` for some), the step's loss first (:func:`loss_cluster`); returns how many
    were attributed. Its :class:`GraphInfo`'s ``backward_attribution`` says how: "seq_nr",
    "seq_nr (aligned)" or "heuristic"; ``gradient_outputs``: :func:`gradient_outputs`."""
    marked = {n for n in gm.graph.nodes if n.meta.get("autograd_backward")}
    if marked:
        loss_cluster(gm)
    guessed = backward is None and not marked
    known = known or {}
    if backward is not None:
        how = "seq_nr (aligned)" if known else "heuristic"
    elif marked:
        backward, how = marked, "seq_nr"
    elif any("stack_trace" in n.meta for n in gm.graph.nodes if n.op == "call_function"):
        backward = {n for n in gm.graph.nodes if n.op == "call_function" and "stack_trace" not in n.meta}
        how = "heuristic"
    else:
        return 0  # no forward recorded with source: nothing to tell forward from backward
    forward_paths: dict[int, str] = {}
    for node in gm.graph.nodes:
        if node not in backward and node.op == "call_function" and node.meta.get("module_path") is not None:
            forward_paths.setdefault(node.meta.get("seq_nr", -1), node.meta["module_path"])
    forward_paths.pop(-1, None)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    count = 0
    for node in gm.graph.nodes:
        if node not in backward:
            continue
        path = forward_paths.get(node.meta.get("seq_nr", -1)) if how == "seq_nr" else known.get(node)
        if path is None:
            path = _from_inputs(node, backward, order)
        if path is None and guessed:
            continue  # told from the forward only by a missing stack trace: maybe the loss
        _mark(gm, node, path or "")  # nothing to go by: at the top level
        count += 1
    info = own_graph_info(gm)
    info.backward_attribution, info.gradient_outputs = how, gradient_outputs(gm)
    return count


def _from_inputs(node: torch.fx.Node, backward: set[torch.fx.Node], order: dict[torch.fx.Node, int]) -> str | None:
    """The heuristic: the module of a parameter read, else of the latest forward tensor
    read, else of the first attributed backward input."""
    inputs = node.all_input_nodes
    params = [a.meta["module_path"] for a in inputs if a.op == "get_attr" and a.meta.get("module_path")]
    if params:
        return params[0]
    forward = [a for a in inputs if a not in backward and a.op == "call_function" and a.meta.get("module_path")]
    if forward:
        return max(forward, key=order.__getitem__).meta["module_path"]
    earlier = [a.meta["backward_of"] for a in inputs if a in backward and a.meta.get("backward_of") is not None]
    return earlier[0] if earlier else None


def _mark(gm: torch.fx.GraphModule, node: torch.fx.Node, path: str) -> None:
    node.meta["backward_of"] = path
    node.meta["module_path"] = path + MARK if path else "backward"
    types = graph_info(gm).module_types
    if path in types:
        types.setdefault(path + MARK, types[path])


def gradient_outputs(gm: torch.fx.GraphModule) -> list[tuple[int, ...]]:
    """Index paths of the output tuples, lists and dicts made only of backward nodes (the
    gradients a step returns, ``autograd.grad``'s tuple or a ``{name: gradient}`` dict),
    which the check and a comparison of two steps judge as gradients."""
    return list(_gradient_paths(gm.graph.output_node().args[0]))


def _gradient_paths(value: Any, path: tuple[int, ...] = ()) -> Iterator[tuple[int, ...]]:
    items = list(value.values()) if isinstance(value, dict) else value
    if not isinstance(items, (tuple, list)):
        return
    if items and all(isinstance(v, torch.fx.Node) and "backward_of" in v.meta for v in items):
        yield path
        return
    if isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from _gradient_paths(item, (*path, i))

"""A graph run node by node at close to its generated code's speed, for runs that must
stop between nodes (:mod:`fxviz.checks.numerics` runs two graphs in lockstep), and what every
node-by-node run needs (:func:`last_uses`, :func:`may_write_inputs`; :mod:`fxviz.annotation.shapes`'
annotated run imports them from here).

A function of one or two nodes becomes (function, their slots in one list of values),
which the caller's loop calls inline; other calls a closure over that list: a call and
a list lookup per argument. FX's Interpreter maps every argument through its
environment and enters a context per node (about 20 µs), many times a small op's own
time; generating and compiling code instead costs about 0.5 s at 30k nodes. Nodes whose
arguments nest other nodes (a list for ``cat``) go through the Interpreter.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.fx.node import map_arg

from fxviz._runtime import fresh_containers
from fxviz._torch_internals import OpOverload, op_schema

_SCALARS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


class NodeRunner:
    """``values[i]`` is node i's value once run (None once freed);
    ``plan[i]``: ``(fn, x, y)``, node i is ``fn(values[x], values[y])``, ``fn(values[x])``
    when y < 0, ``fn()`` when x < 0 (a closure: nodes of other forms);
    ``inputs[i]``: the positions of node i's inputs; ``dies[i]``: the nodes whose values
    nothing needs after node i; ``writes[i]``: whether node i may change its inputs in place."""

    def __init__(self, gm: torch.fx.GraphModule, inputs: tuple):
        self.gm, self.nodes = gm, list(gm.graph.nodes)
        slot = self.slot = {node: i for i, node in enumerate(self.nodes)}
        self.values: list[Any] = [None] * len(self.nodes)
        self.interpreter = torch.fx.Interpreter(gm, garbage_collect_values=False)
        self.interpreter.args_iter = iter(gm.graph.process_inputs(*inputs))
        inputs, plan, writes, users, node_type = [], [], [], [], torch.fx.Node
        # node -> the last node that reads it: last_uses, but in this pass (a walk of its own made
        # this planning 4x slower at 30k nodes, its allocations waking the garbage collector)
        last = [-1] * len(self.nodes)
        writes_of: dict[Any, bool] = {}  # function -> whether it may write its inputs
        for i, node in enumerate(self.nodes):  # one pass: at 30k nodes every call per node shows
            ins = [slot[p] for p in node.all_input_nodes]
            for p in ins:
                last[p] = i
            inputs.append(ins)
            args, target = node.args, node.target
            if node.op == "call_function" and 0 < len(args) <= 2 and not node.kwargs and all(
                    type(a) is node_type for a in args):  # the commonest nodes, planned at once
                plan.append((target, slot[args[0]], slot[args[1]] if len(args) == 2 else -1))
                if target not in writes_of:
                    writes_of[target] = may_write_inputs(node)
                writes.append(writes_of[target])
            else:
                plan.append((self._step(node), -1, -1))
                writes.append(node.op.startswith("call_") and self._writes(node))
            users.append(bool(node.users))
        self.inputs, self.plan, self.writes = inputs, plan, writes
        self.dies: list[list[int]] = [[] if used else [i] for i, used in enumerate(users)]
        for p, i in enumerate(last):
            if i >= 0:
                self.dies[i].append(p)

    def call(self, node: torch.fx.Node, value_of: Callable[[torch.fx.Node], Any]) -> Any:
        """``node`` run on its inputs' values as ``value_of(input node)`` gives them."""
        if node.op == "placeholder":
            return self.interpreter.placeholder(node.target, node.args, {})
        args = map_arg(node.args, value_of)
        if node.op == "output":
            return args[0]
        kwargs = map_arg(node.kwargs, value_of) if node.kwargs else {}
        return getattr(self.interpreter, node.op)(node.target, fresh_containers(args), fresh_containers(kwargs))

    def _step(self, node: torch.fx.Node) -> Callable[[], Any]:
        values, slot, args, node_type = self.values, self.slot, node.args, torch.fx.Node
        if node.op == "get_attr":
            attribute = self.interpreter.fetch_attr(node.target)
            return lambda: attribute
        if not node.op.startswith("call_") or not _flat(node):
            return lambda: self.call(node, lambda n: values[slot[n]])
        fn = _callable(node, self.gm)
        if not node.kwargs and len(args) == 1 and type(args[0]) is node_type:
            x = slot[args[0]]
            return lambda: fn(values[x])
        if not node.kwargs and len(args) == 2 and type(args[0]) is node_type and type(args[1]) is node_type:
            x, y = slot[args[0]], slot[args[1]]
            return lambda: fn(values[x], values[y])
        kwargs = dict(node.kwargs)
        sources = [(True, slot[a]) if isinstance(a, node_type) else (False, a) for a in args]
        return lambda: fn(*[values[s] if is_node else s for is_node, s in sources], **kwargs)

    def _writes(self, node: torch.fx.Node) -> bool:
        """Whether running ``node`` may change its inputs in place (``add_``, an in-place ReLU,
        a module of the user's own, whose forward could do anything)."""
        if node.op != "call_module":
            return may_write_inputs(node) or node.kwargs.get("inplace") is True  # F.relu(x, inplace=True)
        module = self.gm.get_submodule(str(node.target))
        return bool(getattr(module, "inplace", False)) or not type(module).__module__.startswith("torch.nn")


def _flat(node: torch.fx.Node) -> bool:
    """Whether every argument is a node or a constant passed as it is."""
    for value in node.args:
        if type(value) is not torch.fx.Node and not isinstance(value, torch.fx.Node) and not _constant(value):
            return False
    return not node.kwargs or all(map(_constant, node.kwargs.values()))


def _constant(value: Any) -> bool:
    """Whether an argument is passed as it is: a scalar, or a tuple of them (no list to fill in)."""
    return isinstance(value, _SCALARS) or type(value) is tuple and all(isinstance(v, _SCALARS) for v in value)


def _callable(node: torch.fx.Node, gm: torch.fx.GraphModule) -> Callable[..., Any]:
    if node.op == "call_module":
        return gm.get_submodule(str(node.target))
    if node.op == "call_method":
        name = str(node.target)
        return lambda this, *args, **kwargs: getattr(this, name)(*args, **kwargs)
    return node.target


def last_uses(graph: torch.fx.Graph) -> dict[torch.fx.Node, list[torch.fx.Node]]:
    """Node -> the nodes whose values are not needed after it runs."""
    seen: set[torch.fx.Node] = set()
    last: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for node in reversed(graph.nodes):
        for producer in node.all_input_nodes:
            if producer not in seen:
                seen.add(producer)
                last.setdefault(node, []).append(producer)
    return last


def may_write_inputs(n: torch.fx.Node) -> bool:
    """Whether a call may change its inputs in place: a method or function named with a
    trailing underscore (``add_``, ``torch.relu_``), an ATen op whose schema writes, or
    a module (``ReLU(inplace=True)``, or anything its forward does)."""
    if n.op == "call_module":
        return True
    if isinstance(n.target, OpOverload):
        return op_schema(n.target).is_mutable
    name = n.target if n.op == "call_method" else getattr(n.target, "__name__", "")
    return isinstance(name, str) and name.endswith("_") and not name.endswith("__")

"""Shape, dtype, stride and memory-format propagation, with FLOPs and MACs per node."""
from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch.fx.node import Node, map_aggregate, map_arg
from torch.fx.passes.shape_prop import TensorMetadata

from fxviz._runtime import preserved_buffers
from fxviz._torch_internals import FlopCounter, OpOverload, extract_tensor_metadata, op_schema, tree_leaves
from fxviz.errors import RunError
from fxviz.capture import as_inputs


class _Annotator(torch.fx.Interpreter):
    """Runs each node once, noting its output metadata, the FLOPs it issued and the
    bytes it reads and writes in ``notes`` (node name -> the ``meta`` keys of
    :func:`annotate`), never in the graph itself.

    Linear and cheap on graphs of 100,000 nodes, a few µs of Python per node over the op
    itself: its own loop rather than ``Interpreter.run``'s (whose per-node dispatch cost
    10x the ops of a small graph), each output described once (a tensor layout seen
    before reuses its record), and FLOPs counted (under torch's ``FlopCounterMode``,
    about 30 µs per operator) once per distinct call, meaning the same target on inputs
    of the same shapes, dtypes and constant arguments (every layer of a stack repeats
    its first), and reused for the others."""

    def __init__(self, gm: torch.fx.GraphModule):
        super().__init__(gm, garbage_collect_values=False)  # run() drops values itself
        self.notes: dict[str, dict[str, Any]] = {}
        self._flops: dict[Any, int | None] = {}  # call signature -> FLOPs (None: not counted)
        self._calls: dict[tuple[str, Any], tuple[Any, bool]] = {}  # (op, target) -> :meth:`_call`
        self._layouts: dict[Any, tuple[Any, Any, int]] = {}  # tensor layout -> (signature, metadata, bytes)
        self._described: dict[torch.fx.Node, tuple[Any, dict[int, int]]] = {}  # live node -> (signature, tensor bytes)

    def run(self, *args: Any) -> Any:
        """The graph's outputs on ``args``; each value is dropped after its last use."""
        self.args_iter = iter(self.graph.process_inputs(*args))
        env, described = self.env, self._described = {}, {}
        last_uses = _last_uses(self.graph)
        for node in self.graph.nodes:
            try:
                value = env[node] = self._run_node(node)
            except Exception as exc:
                raise RunError(
                    f"Running node '{node.name}' ({node.op} {node.target}) on the example inputs failed: "
                    f"{type(exc).__name__}: {exc}. Check that the example inputs have the shapes "
                    "and dtypes the model expects.", node=node.name
                ) from exc
            if node.op == "output":
                return self.graph.process_outputs(value)
            for done in last_uses.get(node, ()):
                del env[done], described[done]
        raise RunError("The graph has no output node.")

    def _run_node(self, n: torch.fx.Node) -> Any:
        args = map_arg(n.args, self.env.__getitem__)
        kwargs = map_arg(n.kwargs, self.env.__getitem__) if n.kwargs else {}
        run, may_write = self._call(n)
        if run is None:
            flops, result = None, getattr(self, n.op)(n.target, args, kwargs)
        else:
            flops, result = self._counted(n, run, args, kwargs)
        signature, tensors, meta = self._describe(result)
        self._described[n] = (signature, tensors)
        if may_write:  # x.unsqueeze_(0), x.resize_(...): its inputs change shape
            for producer in n.all_input_nodes:
                if producer in self.env:
                    self._described[producer] = self._describe(self.env[producer])[:2]
        note: dict[str, Any] = {
            # flop_counter counts a multiply-add as 2 FLOPs in matmul/conv, the ops that own MACs.
            "flops": flops, "macs": None if flops is None else flops // 2,
            "bytes": None if run is None else self._bytes_moved(n, tensors),
        }
        if meta.__class__ is TensorMetadata or _has_tensor(meta):
            note["tensor_meta"] = meta
        self.notes[n.name] = note
        return result

    def _call(self, n: torch.fx.Node) -> tuple[Any, bool]:
        """How a node is run (None: not a call, run by the Interpreter's method of its op)
        and whether it may write its inputs, once per op and target."""
        try:
            return self._calls[n.op, n.target]
        except KeyError:
            pass
        except TypeError:  # an unhashable target
            return self._call_of(n)
        found = self._calls[n.op, n.target] = self._call_of(n)
        return found

    def _call_of(self, n: torch.fx.Node) -> tuple[Any, bool]:
        if not n.op.startswith("call_"):
            return None, False
        # The first: Interpreter's, less a check.
        return (_call_function if n.op == "call_function" else getattr(self, n.op)), _may_write_inputs(n)

    def _counted(self, n: torch.fx.Node, run: Any, args: tuple, kwargs: dict) -> tuple[int | None, Any]:
        """FLOPs of the node (None where no operator it ran has a formula) and its result."""
        try:
            described = self._described  # args are a tuple: its parts, most of them nodes, inline
            key = (n.op, n.target, *[described[a][0] if a.__class__ is Node else self._signature(a) for a in n.args],
                   self._signature(n.kwargs) if n.kwargs else ())
            known = self._flops.get(key, _UNCOUNTED)
        except TypeError:  # an unhashable target or constant: count this call
            key, known = None, _UNCOUNTED
        if known is not _UNCOUNTED:
            return known, (n.target(*args, **kwargs) if run is _call_function else run(n.target, args, kwargs))
        with FlopCounter(display=False) as counter:
            result = run(n.target, args, kwargs)
        flops = counter.get_total_flops() if counter.counted else None
        if key is not None:
            self._flops[key] = flops
        return flops, result

    def _signature(self, arg: Any) -> Any:
        """:func:`_signature` of an argument's value, its nodes' from their descriptions."""
        if arg.__class__ is Node:
            return self._described[arg][0]
        if isinstance(arg, tuple | list):
            return (type(arg), *map(self._signature, arg))
        if isinstance(arg, dict):
            return (dict, *((k, self._signature(v)) for k, v in arg.items()))
        return _signature(arg)

    def _describe(self, value: Any) -> tuple[Any, dict[int, int], Any]:
        """A value's call signature part (:func:`_signature`), the bytes of each tensor in
        it by id, and its metadata (:func:`tensor_metadata`)."""
        if isinstance(value, torch.Tensor) and value.layout == torch.strided and not value.is_quantized:
            try:
                layout = (value.shape, value.dtype, value.device, value.stride(), value.requires_grad)
                known = self._layouts.get(layout)
            except TypeError:  # symbolic sizes: not cached
                layout = known = None
            if known is None:
                known = ((value.shape, value.dtype, value.device, value.layout), tensor_metadata(value),
                         value.numel() * value.element_size())
                if layout is not None:
                    self._layouts[layout] = known
            signature, meta, size = known
            return signature, {id(value): size}, meta
        try:
            signature = _signature(value)
        except TypeError:  # a value with no signature gets one of its own: calls on it are counted each time
            signature = object()
        return signature, {id(t): t.numel() * t.element_size() for t in _tensors((value,))}, tensor_metadata(value)

    def _bytes_moved(self, n: torch.fx.Node, tensors: dict[int, int]) -> int:
        """Bytes of the tensors a computing node reads (its inputs and, for a module,
        its parameters and buffers) and writes (its outputs), each tensor once: what a
        memory-bound op costs. An upper bound for views, which move nothing."""
        moved = dict(tensors)
        for producer in n.all_input_nodes:
            moved.update(self._described[producer][1])
        if n.op == "call_module":
            module = self.fetch_attr(n.target)
            moved.update((id(t), t.numel() * t.element_size()) for t in (*module.parameters(), *module.buffers()))
        return sum(moved.values())


def _may_write_inputs(n: torch.fx.Node) -> bool:
    """Whether a call may change its inputs in place: a method or function named with a
    trailing underscore (``add_``, ``torch.relu_``), an ATen op whose schema writes, or
    a module (``ReLU(inplace=True)``, or anything its forward does)."""
    if n.op == "call_module":
        return True
    if isinstance(n.target, OpOverload):
        return op_schema(n.target).is_mutable
    name = n.target if n.op == "call_method" else getattr(n.target, "__name__", "")
    return isinstance(name, str) and name.endswith("_") and not name.endswith("__")


_UNCOUNTED = object()  # a call whose FLOPs are not known yet (None: known to have none)


def _call_function(target: Any, args: tuple, kwargs: dict) -> Any:
    return target(*args, **kwargs)


def _last_uses(graph: torch.fx.Graph) -> dict[torch.fx.Node, list[torch.fx.Node]]:
    """Node -> the nodes whose values are not needed after it runs."""
    seen: set[torch.fx.Node] = set()
    last: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for node in reversed(graph.nodes):
        for producer in node.all_input_nodes:
            if producer not in seen:
                seen.add(producer)
                last.setdefault(node, []).append(producer)
    return last


def _tensors(values: Any) -> list[torch.Tensor]:
    """The tensors among ``values`` and inside their containers (pytree leaves)."""
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif not isinstance(value, (int, float, bool, str, type(None))):
            found += [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]
    return found


def _signature(value: Any) -> Any:
    """What a call's operators and their FLOPs depend on: tensors by shape, dtype and
    device, everything else by value (raises TypeError when that is unhashable)."""
    if isinstance(value, torch.Tensor):
        return (value.shape, value.dtype, value.device, value.layout)
    if isinstance(value, (tuple, list)):
        return (type(value), *map(_signature, value))
    if isinstance(value, dict):
        return (dict, *((k, _signature(v)) for k, v in value.items()))
    if isinstance(value, slice):  # unhashable before Python 3.12
        return (slice, _signature(value.start), _signature(value.stop), _signature(value.step))
    hash(value)
    return (type(value), value)  # type too: 1 == 1.0 == True, yet they dispatch differently


def tensor_metadata(value: Any) -> Any:
    """torch's ``TensorMetadata`` of a tensor, or the same structure with one for each
    tensor of a container; other values as they are. A contiguous dense tensor (most
    of them) takes a fast path to the same record."""
    if isinstance(value, torch.Tensor):
        if value.layout == torch.strided and not value.is_quantized and value.is_contiguous():
            return TensorMetadata(value.shape, value.dtype, value.requires_grad, value.stride(),
                                  torch.contiguous_format, False, {})
        return extract_tensor_metadata(value)
    if isinstance(value, (tuple, list, dict)):
        return map_aggregate(value, lambda v: extract_tensor_metadata(v) if isinstance(v, torch.Tensor) else v)
    return value


def _has_tensor(meta: Any) -> bool:
    if isinstance(meta, TensorMetadata):
        return True
    if isinstance(meta, (tuple, list)):
        return any(_has_tensor(m) for m in meta)
    if isinstance(meta, dict):
        return any(_has_tensor(m) for m in meta.values())
    return False


def annotate(gm: torch.fx.GraphModule, example_inputs: Any) -> torch.fx.GraphModule:
    """Run ``gm`` once on ``example_inputs`` and record, per node, ``meta["tensor_meta"]``
    (shape, dtype, stride, memory format; nested for tuple outputs), ``meta["flops"]``
    and ``meta["macs"]`` (None where ``torch.utils.flop_counter`` has no formula for
    any operator the node ran: not counted is not zero) and ``meta["bytes"]`` (bytes
    read and written by a call node; None for others). Buffers are restored
    afterwards, so the model is unchanged."""
    _, notes = annotated_run(gm, example_inputs)
    for node in gm.graph.nodes:
        node.meta.update(notes[node.name])
    return gm


def annotated_run(gm: torch.fx.GraphModule, example_inputs: Any) -> tuple[Any, dict[str, dict[str, Any]]]:
    """The outputs of one run of ``gm`` and what :func:`annotate` would record, per node
    name, without touching ``gm``: one forward then serves both the drawing
    (``to_networkx(gm, notes)``) and a numeric check, and proves the graph runs at all."""
    annotator = _Annotator(gm)
    with torch.no_grad(), preserved_buffers(gm):
        outputs = annotator.run(*as_inputs(example_inputs))
    return outputs, annotator.notes


def memory_format_name(fmt: torch.memory_format | None) -> str:
    """'contiguous', 'channels_last', 'channels_last_3d' or 'strided' (none of these)."""
    names = {
        torch.contiguous_format: "contiguous",
        torch.channels_last: "channels_last",
        torch.channels_last_3d: "channels_last_3d",
    }
    return names.get(fmt, "strided")

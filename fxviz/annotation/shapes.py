"""Shape, dtype, stride and memory-format propagation, with FLOPs and MACs per node."""
from __future__ import annotations

from collections.abc import Callable
from types import BuiltinFunctionType
from typing import Any

import torch
import torch.fx
from torch.fx.node import Node, map_arg
from torch.fx.passes.shape_prop import TensorMetadata

from fxviz.annotation._node_runner import last_uses, may_write_inputs
from fxviz._runtime import fresh_containers, preserved_buffers
from fxviz.annotation._values import Unknown, has_tensor, module_signature, module_tensors, reads_metadata_only, \
    signature as _signature, tensor_metadata, tensors as _tensors
from fxviz import _torch_internals
from fxviz._torch_internals import OpOverload
from fxviz.errors import RunError
from fxviz.capture._common import as_inputs, first_line


class _Annotator(torch.fx.Interpreter):
    """Runs each node once, noting its output metadata, the FLOPs it issued and the
    bytes it reads and writes in ``notes`` (node name -> the ``meta`` keys of
    :func:`annotate`), never in the graph itself.

    Linear and cheap on graphs of 100,000 nodes, a few µs of Python per node over the op
    itself: one loop rather than ``Interpreter.run``'s (whose per-node dispatch cost 10x
    the ops of a small graph), nothing kept per node but its note, one dict for all nodes
    whose notes are equal (keeping more costs memory traffic: a table of input lists made
    the run 6 % slower at 100k nodes, a dict per note 0.02 s), each
    output described once (a tensor layout seen before reuses its record), and FLOPs
    counted (under torch's ``FlopCounterMode``, about 30 µs per operator) once per
    distinct call, meaning the same target (for a module: an equal one,
    :func:`~fxviz.annotation._values.module_signature`) on inputs of the same shapes, dtypes and
    constant arguments (every layer of a stack repeats its first), and reused for the
    others."""

    def __init__(self, gm: torch.fx.GraphModule):
        super().__init__(gm, garbage_collect_values=False)  # run() drops values itself
        self.notes: dict[str, dict[str, Any]] = {}
        self._flops: dict[Any, int | str | None] = {}  # call signature -> FLOPs (None: not counted; str: why)
        self._calls: dict[tuple[str, Any], tuple[Any, bool, Any]] = {}  # (op, target) -> :meth:`_call`
        self._modules: dict[Any, int] = {}  # module signature -> its head in a FLOPs key
        self._layouts: dict[Any, tuple[Any, Any, int]] = {}  # tensor layout -> (signature, metadata, bytes)
        self._described: dict[torch.fx.Node, tuple[Any, dict[int, int]]] = {}  # live node -> (signature, tensor bytes)
        self._counter: Any = None  # one FlopCounter for the run: making one costs more than counting a conv
        self._formula_free: set[tuple] = set()  # (torch.nn class, input dims) that ran no operator with a formula

    def run(self, *args: Any) -> Any:
        """The graph's outputs on ``args``; each value is dropped after its last use."""
        self.args_iter = iter(self.graph.process_inputs(*args))
        env, described = self.env, self._described = {}, {}
        notes, counted, calls = self.notes, self._flops, self._calls
        shared = {}  # (FLOPs, bytes, id of the metadata noted, whys) -> the note of every node with them
        value_of, signature_of = env.__getitem__, self._signature
        dies = last_uses(self.graph)
        for node in self.graph.nodes:
            op, target, node_args, node_kwargs = node.op, node.target, node.args, node.kwargs  # args: properties
            try:
                try:
                    run, may_write, head, owned, own_module = calls[op, target]
                except KeyError:
                    run, may_write, head, owned, own_module = calls[op, target] = self._call(node)
                except TypeError:  # an unhashable target
                    run, may_write, head, owned, own_module = self._call(node)
                args = map_arg(node_args, value_of)
                kwargs = map_arg(node_kwargs, value_of) if node_kwargs else {}
                if run is None:
                    flops, result = None, getattr(self, op)(target, args, kwargs)
                else:
                    try:  # args are a tuple: its parts, most of them nodes, inline
                        key = (op, head,
                               *[described[a][0] if a.__class__ is Node else signature_of(a) for a in node_args],
                               signature_of(node_kwargs) if node_kwargs else ())
                        flops = counted.get(key, _UNCOUNTED)
                    except TypeError:  # an unhashable target or constant: count this call
                        key, flops = None, _UNCOUNTED
                    if flops is _UNCOUNTED:
                        flops, result = self._count(key, run, target, args, kwargs, owned if may_write else None,
                                                    own_module)
                    else:
                        result = (run(target, args, kwargs) if run is not _call_function or kwargs
                                  else target(*args))
                env[node] = result
                signature, tensors, meta = self._describe(result)
                described[node] = (signature, tensors)
                why = ()  # (annotate's "..._why" key, reason) of what could not be computed
                if flops.__class__ is str:
                    why, flops = (("flops_why", flops),), None
                if meta.__class__ is Unknown:
                    why, meta = (*why, ("shape_why", meta.why)), None
                if may_write:  # x.unsqueeze_(0), x.resize_(...): its inputs change shape
                    for producer in node.all_input_nodes:
                        if producer in env:
                            described[producer] = self._describe(env[producer])[:2]
                moved = None
                if run is not None:  # bytes read and written, each tensor once
                    try:
                        none = reads_metadata_only(node, env.get(node_args[0]) if node_args and node_args[0].__class__
                                                   is Node else None)  # x.shape, out[0]: no element read or written
                        moved = {} if none else dict(tensors)
                        for producer in () if none else node.all_input_nodes:
                            moved.update(described[producer][1])
                        moved.update(owned[0])
                        moved = sum(moved.values())
                    except TypeError:  # None: a tensor it reads or writes has no known size
                        moved, why = None, (*why, ("bytes_why", "a tensor it reads or writes has an unknown size"))
                # Metadata by identity (equal layouts share one record: _describe), kept alive by
                # the note that holds it; no other value is kept past its last use.
                described_as = meta if meta.__class__ is TensorMetadata or has_tensor(meta) else None
                try:
                    note_key = (flops, moved, id(described_as), why)
                    note = shared.get(note_key)
                except TypeError:  # symbolic FLOPs or bytes
                    note_key = note = None
                if note is None:
                    # flop_counter counts a multiply-add as 2 FLOPs in matmul/conv, the ops that own MACs.
                    note = {"flops": flops, "macs": None if flops is None else flops // 2, "bytes": moved, **dict(why)}
                    if described_as is not None:
                        note["tensor_meta"] = described_as
                    if note_key is not None:
                        shared[note_key] = note
                notes[node.name] = note
            except Exception as exc:
                raise RunError(
                    f"Running node '{node.name}' ({op} {target}) on the example inputs failed: "
                    f"{type(exc).__name__}: {exc}. Check that the example inputs have the shapes "
                    "and dtypes the model expects.", node=node.name
                ) from exc
            if op == "output":
                return self.graph.process_outputs(result)
            for done in dies.get(node, ()):
                del env[done], described[done]
        raise RunError("The graph has no output node.")

    def _call(self, n: torch.fx.Node) -> tuple[Any, bool, Any, tuple[dict[int, int], list[torch.Tensor]], Any]:
        """How a node is run (None: not a call, run by the Interpreter's method of its op),
        whether it may write its inputs, what its FLOPs key holds for its target, for a
        module its parameters' and buffers' bytes by id and the tensors (a call reads them
        and may write them) and, for one of torch.nn's own, the module (see :meth:`_count`):
        a module is looked up and walked once per target, not per use."""
        if not n.op.startswith("call_"):
            return None, False, n.target, ({}, []), None
        own_module = None
        owned: tuple[dict[int, int], list[torch.Tensor]] = ({}, [])
        if n.op == "call_module":
            module = self.fetch_attr(n.target)
            tensors = module_tensors(module)
            owned = ({id(t): t.numel() * t.element_size() for t in tensors}, tensors)
            found = module_signature(module)
            head = module if found is None else self._modules.setdefault(found, len(self._modules))
            run = _module_call(module)
            own_module = module if type(module).__module__.startswith("torch.nn.modules.") else None
        else:  # the first: Interpreter's, less a check
            head, run = n.target, _call_function if n.op == "call_function" else self.call_method
        if n.op != "call_method" and not isinstance(n.target, BuiltinFunctionType | OpOverload):
            run = _with_fresh_containers(run)  # Python code (a function, a module), which may fill in a list
        return run, may_write_inputs(n), head, owned, own_module

    def _count(self, key: Any, run: Any, target: Any, args: tuple, kwargs: dict,
               owned: tuple[dict[int, int], list[torch.Tensor]] | None,
               own_module: torch.nn.Module | None) -> tuple[int | str | None, Any]:
        """The FLOPs of a call (None where no operator it ran has a formula; a str saying
        why where counting failed), noted under ``key`` (None: not noted), and its result.
        Counting never stops the run: a call that fails under torch's counter runs again
        without it, unless it wrote into a tensor first (then the failure is the call's).
        ``owned``: None where the call cannot write its inputs, else its module's tensors.
        ``own_module``: one of torch.nn's modules. A Linear or a convolution is counted by its
        formula (:func:`~fxviz._torch_internals.flops.by_formula`). One whose class
        (BatchNorm2d, ReLU) ran no operator with a formula on inputs of the same dimensions
        before is not counted again: whether one of torch.nn's own runs a matmul or a
        convolution follows from its class and its inputs' dimensions (a Linear on a vector
        runs none), not their sizes or settings (most calls of mobilenet_v3's 168 modules)."""
        kin = None if own_module is None else (type(own_module), *[t.dim() for t in _tensors(args)])
        if kin in self._formula_free:
            if key is not None:
                self._flops[key] = None
            return None, run(target, args, kwargs)
        if own_module is not None:
            from fxviz._torch_internals.flops import by_formula, module_flops  # they import triton: on first count

            if by_formula(own_module, args, kwargs):
                result = run(target, args, kwargs)
                flops = module_flops(own_module, args[0], result)
                if key is not None:
                    self._flops[key] = flops
                return flops, result
        written = _versions(args, kwargs, owned) if owned is not None else None
        # The shim loads torch's counter on this first read: it imports triton.
        counter = self._counter = self._counter or _torch_internals.FlopCounter(display=False)
        counter.counted, counter.failed = False, ""
        try:
            with counter:
                result = run(target, args, kwargs)
            flops = (f"torch's FLOP formula for {counter.failed}" if counter.failed
                     else counter.get_total_flops() if counter.counted else None)
        except Exception as exc:
            if written is not None and written != _versions(args, kwargs, owned):
                raise
            result = run(target, args, kwargs)  # where the call itself fails, it fails here
            flops = f"counting its FLOPs failed: {first_line(exc)}"
        if key is not None:
            self._flops[key] = flops
        if flops is None and kin is not None:
            self._formula_free.add(kin)
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

    def _describe(self, value: Any) -> tuple[Any, dict[int, int] | None, Any]:
        """A value's call signature part (:func:`_signature`), the bytes of each tensor in
        it by id, and its metadata (:func:`tensor_metadata`); None and :class:`Unknown`
        where a tensor's size or layout cannot be read (a strided nested tensor)."""
        try:
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
        except Exception as exc:  # unknown, not a failed run; calls on it are counted each time
            return object(), None, Unknown(f"its output's layout cannot be read: {first_line(exc)}")


def _with_fresh_containers(run: Callable[[Any, tuple, dict], Any]) -> Callable[[Any, tuple, dict], Any]:
    """``run`` given its arguments' lists and dicts anew, as the GraphModule's code gives them."""
    return lambda target, args, kwargs: run(target, fresh_containers(args), fresh_containers(kwargs))


def _versions(args: tuple, kwargs: dict, owned: tuple[dict[int, int], list[torch.Tensor]]) -> list[int]:
    """The version counter of each tensor a call could write: its arguments', its module's."""
    tensors = [*_tensors((args, kwargs)), *owned[1]]
    return [0 if t.is_inference() else t._version for t in tensors]  # inference tensors have none


def _module_call(module: torch.nn.Module) -> Callable[[Any, tuple, dict], Any]:
    return lambda target, args, kwargs: module(*args, **kwargs)


_UNCOUNTED = object()  # a call whose FLOPs are not known yet (None: known to have none)


def _call_function(target: Any, args: tuple, kwargs: dict) -> Any:
    return target(*args, **kwargs)


def annotate(gm: torch.fx.GraphModule, example_inputs: Any) -> torch.fx.GraphModule:
    """Run ``gm`` once on ``example_inputs`` and record, per node, ``meta["tensor_meta"]``
    (shape, dtype, stride, memory format; nested for tuple outputs), ``meta["flops"]``
    and ``meta["macs"]`` (None where ``torch.utils.flop_counter`` has no formula for
    any operator the node ran: not counted is not zero) and ``meta["bytes"]`` (bytes
    read and written by a call node; None for others). What cannot be computed is None
    with the reason in ``meta["flops_why"]``, ``["shape_why"]`` or ``["bytes_why"]``:
    annotation never stops a graph that runs. Buffers are restored afterwards, so the
    model is unchanged."""
    _, notes = annotated_run(gm, example_inputs)
    for node in gm.graph.nodes:
        node.meta.update(notes[node.name])
    return gm


def annotated_run(gm: torch.fx.GraphModule, example_inputs: Any) -> tuple[Any, dict[str, dict[str, Any]]]:
    """The outputs of one run of ``gm`` and what :func:`annotate` would record, per node
    name, without touching ``gm``: one forward then serves both the drawing
    (``to_networkx(gm, notes)``) and a numeric check, and proves the graph runs at all.
    Nodes with equal notes share one dict (a stack of 2,000 identical blocks keeps 3, a
    10-layer training step 143 for 1,364 nodes): read them, do not write them."""
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

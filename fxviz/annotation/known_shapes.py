"""What the annotated run notes per node (:func:`fxviz.annotation.shapes.annotated_run`), read from a
graph that carries it: export and make_fx leave each ATen node's output as a fake tensor
in ``meta["val"]``, so an exported program is drawn without running the model (which
Model Explorer never does either); the run comes with the check."""
from __future__ import annotations

import functools
import operator
from typing import Any

import torch
import torch.fx

from fxviz import _torch_internals
from fxviz._torch_internals import OpOverload, op_schema, tree_leaves
from fxviz.annotation._values import reads_metadata_only, signature, tensor_metadata, tensors
from fxviz.capture._common import first_line


#: The output of a graph drawn from its shapes (:func:`unrun`): not known until the check runs it.
NOT_RUN = object()


def unrun(gm: torch.fx.GraphModule, inputs: tuple) -> tuple[Any, dict[str, dict[str, Any]]] | None:
    """``(NOT_RUN, notes)`` in place of :func:`~fxviz.annotation.shapes.annotated_run`'s ``(outputs,
    notes)`` where :func:`known_notes` reads them, else None."""
    notes = known_notes(gm, inputs)
    return None if notes is None else (NOT_RUN, notes)


def known_notes(gm: torch.fx.GraphModule, inputs: tuple) -> dict[str, dict[str, Any]] | None:
    """Per node name, the note :func:`~fxviz.annotation.shapes.annotated_run` would make on ``inputs``
    (shapes, FLOPs, bytes moved), from ``meta["val"]`` alone; None where the graph does not
    carry it all: a node without it, a size that is symbolic, an operator other than ATen's,
    or inputs of other shapes than those it was captured on (then the graph must run)."""
    vals = {}
    layouts: dict[Any, Any] = {}  # a tensor's layout -> (its metadata, its bytes): fake tensors are slow to ask
    laid_out: dict[torch.fx.Node, Any] = {}  # a node whose output is a tensor -> its layout's (metadata, bytes)
    for node in gm.graph.nodes:
        val = _val(node, vals, layouts, laid_out)
        if val is _MISSING or node.op in ("call_module", "call_method") or \
                (node.op == "call_function" and not _readable(node.target)):
            return None
        vals[node] = val
    placeholders = [vals[n] for n in gm.graph.find_nodes(op="placeholder")]
    given = [v for v in tree_leaves(inputs) if v is not None]
    if len(placeholders) != len(given) or not all(map(_same, placeholders, given)):
        return None
    signatures, countable = _Signatures(vals), _Countable()
    sizes: dict[torch.fx.Node, dict[int, int]] = {}  # node -> its output's bytes per tensor
    notes = {}
    # Nodes with equal notes share one dict, as the annotated run's do: a stack of equal layers
    # keeps a few, and the networkx graph builds one record template per shared note.
    shared: dict[Any, dict[str, Any]] = {}  # (FLOPs, bytes, id of the metadata, why) -> the note
    for node, val in vals.items():
        if node in laid_out:
            metadata, size = laid_out[node]
            sizes[node] = {id(val): size}
        else:
            sizes[node] = {id(t): t.numel() * t.element_size() for t in tensors((val,))}
            metadata = tensor_metadata(val) if sizes[node] else None
        flops = why = moved = None
        if node.op == "call_function":
            counted = _flops(node, vals, signatures, countable)
            if isinstance(counted, str):
                why = counted
            else:
                flops = counted
            first = vals.get(node.args[0]) if node.args and isinstance(node.args[0], torch.fx.Node) else None
            none = reads_metadata_only(node, first)  # aten.sym_size, out[0]: no element read or written
            moved = {} if none or _writes_in_place(node.target) else dict(sizes[node])  # add_: its input, counted
            for producer in () if none else node.all_input_nodes:
                moved.update(sizes[producer])
            moved = sum(moved.values())
        key = (flops, moved, id(metadata), why)
        note = shared.get(key)
        if note is None:
            note = shared[key] = {"flops": flops, "macs": None if flops is None else flops // 2, "bytes": moved}
            if metadata is not None:
                note["tensor_meta"] = metadata
            if why is not None:
                note["flops_why"] = why
        notes[node.name] = note
    return notes


_MISSING = object()


def _val(node: torch.fx.Node, vals: dict[torch.fx.Node, Any], layouts: dict[Any, Any],
         laid_out: dict[torch.fx.Node, Any]) -> Any:
    """A node's output as its meta holds it (the output node's: its inputs'), or _MISSING
    where it is absent or a size is symbolic. A tensor's metadata and bytes are made once
    per distinct layout, into ``layouts``, and noted for its node in ``laid_out``."""
    if node.op == "output":
        return torch.fx.node.map_arg(node.args[0], vals.__getitem__)
    val = node.meta.get("val", _MISSING)
    if val is _MISSING:
        # an operator that returns nothing (``_assert_tensor_metadata``): a loaded .pt2 keeps no val for it
        returns_nothing = node.op == "call_function" and isinstance(node.target, OpOverload) and \
            not op_schema(node.target).returns
        return None if returns_nothing else _MISSING
    if isinstance(val, torch.Tensor):
        layout = (val.shape, val.dtype, val.stride(), val.requires_grad)
        try:
            known = layouts.get(layout)
        except TypeError:  # unhashable: a symbolic size
            return _MISSING
        if known is None:
            if not _concrete(val):
                return _MISSING
            known = layouts[layout] = (tensor_metadata(val), val.numel() * val.element_size())
        laid_out[node] = known
        return val
    return val if all(map(_concrete, tensors((val,)))) else _MISSING


def _concrete(t: torch.Tensor) -> bool:
    return all(isinstance(size, int) for size in (*t.shape, *t.stride()))


@functools.cache
def _writes_in_place(target: Any) -> bool:
    """An op returning the input it wrote (``add_``): the run counts that tensor once, as its input."""
    return isinstance(target, OpOverload) and any(r.alias_info is not None and r.alias_info.is_write
                                                   for r in op_schema(target).returns)


def _readable(target: Any) -> bool:
    return isinstance(target, OpOverload) or target is operator.getitem


def _same(val: Any, given: Any) -> bool:
    if isinstance(val, torch.Tensor):
        return isinstance(given, torch.Tensor) and val.shape == given.shape and val.dtype == given.dtype
    return not isinstance(given, torch.Tensor) and val == given


class _Signatures(dict):
    """Node -> :func:`signature` of its value, each made once (a value feeds several calls)."""

    def __init__(self, vals: dict[torch.fx.Node, Any]):
        super().__init__()
        self.vals = vals

    def __missing__(self, node: torch.fx.Node) -> Any:
        found = self[node] = signature(self.vals[node])
        return found


class _Countable(dict):
    """Operator -> whether torch's counter may count it (:func:`may_count`), asked once per operator."""

    def __missing__(self, op: Any) -> bool:
        from fxviz._torch_internals.flops import may_count  # it imports triton: here

        found = self[op] = may_count(op)
        return found


#: (operator, its arguments' signatures) -> its FLOPs (:func:`_flops`), for every graph drawn
#: from its shapes: a count depends on nothing else, and running composite operators on meta
#: tensors (linear, attention) was most of the time to read a transformer's notes, each time a
#: model of the same sizes is opened again (RoBERTa's, 4 layers: 7.7 ms, 1.7 with its counts
#: known). Emptied when full.
_COUNTED: dict[Any, int | str | None] = {}
_COUNTED_LIMIT = 4096


def _flops(node: torch.fx.Node, vals: dict[torch.fx.Node, Any], signatures: _Signatures,
           countable: _Countable) -> Any:
    """The FLOPs of an ATen call, counted as the annotated run counts them (torch's counter:
    an operator with a formula by it on the noted shapes, another run on ``meta`` tensors
    of them), once per signature in this process (:data:`_COUNTED`)."""
    if node.target is operator.getitem or not countable[node.target]:
        return None
    try:
        key = (node.target, *torch.fx.node.map_arg((node.args, node.kwargs), signatures.__getitem__))
        found = _COUNTED.get(key, _MISSING)
    except TypeError:
        key, found = None, _MISSING
    if found is not _MISSING:
        return found
    from fxviz._torch_internals.flops import formula_flops, has_formula  # they import triton: here

    if has_formula(node.target):  # a matmul, a convolution: its formula on the noted shapes, nothing run
        found = formula_flops(node.target, vals[node],
                              *torch.fx.node.map_arg((node.args, node.kwargs), vals.__getitem__))
    else:
        found = _run_on_meta(node, vals)
    if key is not None:
        if len(_COUNTED) >= _COUNTED_LIMIT:
            _COUNTED.clear()
        _COUNTED[key] = found
    return found


def _run_on_meta(node: torch.fx.Node, vals: dict[torch.fx.Node, Any]) -> int | str | None:
    """The FLOPs the counter counts running the node's operator on ``meta`` tensors of its shapes."""
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: _on_meta(vals[n]))
    if "device" in kwargs:  # a factory (arange, full): made on meta too, never allocated
        kwargs = {**kwargs, "device": torch.device("meta")}
    try:
        with _torch_internals.FlopCounter(display=False) as counter:
            node.target(*args, **kwargs)
        return (f"torch's FLOP formula for {counter.failed}" if counter.failed
                else counter.get_total_flops() if counter.counted else None)
    except Exception as exc:  # an operator with no meta kernel: not counted, not a failure to draw
        return f"counting its FLOPs from its shapes failed: {first_line(exc)}"


def _on_meta(val: Any) -> Any:
    """``val`` with each fake tensor an empty ``meta`` one of its sizes, strides and dtype."""
    if isinstance(val, torch.Tensor):
        return torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device="meta")
    if isinstance(val, (tuple, list)):
        return type(val)(map(_on_meta, val))
    return val

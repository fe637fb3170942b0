"""make_fx: an ATen-level graph of whatever runs, for modules and plain functions
(training steps, torch.func transforms)."""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch import nn

from fxviz._torch_internals import TRACES_AS_COMPILING, assign_attr, make_fx_on_fakes
from fxviz._torch_internals.real_trace import lazy_code, one_fake_mode
from fxviz.capture import data_dependent
from fxviz.capture._common import finish, first_line, front_end
from fxviz.capture.places import where
from fxviz.capture.backward import attribute_backward, sequence_numbers
from fxviz._runtime import untouched
from fxviz.capture.closure import closed_over_module
from fxviz.capture.keywords import keywords_last
from fxviz.errors import TraceError


def capture(fn: Callable[..., Any], inputs: tuple, module: nn.Module | None = None,
            decompositions: dict | None = None) -> torch.fx.GraphModule:
    """Trace ``fn(*inputs)`` with make_fx; ``module``: the model a plain function calls
    (found among the function's closure and globals when not given); ``decompositions``:
    a decomposition table (default none: the ATen ops as called)."""
    if not inputs:
        raise TraceError("make_fx traces by running the function: pass example_inputs.")
    root = fn if isinstance(fn, nn.Module) else module or getattr(fn, "_orig_mod", None) or closed_over_module(fn)
    def target(*args):
        with sequence_numbers():  # inside: above make_fx's own dispatch mode
            return fn(*args)

    if root is not None:  # make_fx records nn.Module paths only for callables that expose `_orig_mod`
        target._orig_mod = root
    try:
        # make_fx runs real ops (a training-mode BN would advance its statistics); the fake copies of their
        # values share one mode, and the graph's code is made once, when first used (bench/heavy_open.py)
        with untouched(fn), one_fake_mode(), lazy_code():
            gm, how = _traced(target, decompositions, root is not None, inputs)
    except Exception as exc:
        on_values = getattr(exc, "fxviz_on_values", None)  # the real trace's stop, where the fakes' was elsewhere
        earlier = (f"\n  (on fake inputs, where code that asks whether it is traced takes its traceable path; "
                   f"on the real ones it stopped before, reading a value{where(on_values)})") if on_values else ""
        as_export = getattr(exc, "fxviz_as_export", None)
        if as_export is not None:
            earlier += ("\n  (not retried as torch.export traces: torch.export stopped at a branch on a "
                        f"tensor's value{as_export})")
        raise TraceError(
            f"make_fx could not trace {getattr(fn, '__name__', type(fn).__name__)}{where(exc)}\n"
            f"  {first_line(exc)}{earlier}\n"
            "  What to do: make the function run on the example inputs as given, and avoid "
            "Python branches and loops on tensor values (use torch.where / torch.cond)."
        ) from exc
    # make_fx names the graph's class "<lambda>" (its own wrapper): name it as the user did.
    gm.__class__.__name__ = type(fn).__name__ if isinstance(fn, nn.Module) else getattr(fn, "__name__", "step")
    _unreturned_vals(gm)
    finish(gm, "make_fx", root, how=how)
    if root is not None:
        _name_parameters(gm, root)
        attribute_backward(gm)
    return gm


def _traced(target: Callable[..., Any], decompositions: dict | None, record: bool,
            inputs: tuple) -> tuple[torch.fx.GraphModule, str]:
    """The graph, and how it was traced when not on the real inputs (a sentence; ""):
    make_fx on the real inputs or, where the code reads a tensor's value (``if mask.all()``),
    again on fake ones: code that checks whether it is traced (Hugging Face's ``is_tracing``, in
    every decoder's mask) then takes its traceable path. Where that fails too, once more as
    torch.export traces (``torch.compiler.is_compiling()``): Hugging Face's experts then use
    their custom op with a fake kernel rather than ``aten._grouped_mm``, whose fake kernel
    refuses float32 (its CPU kernel takes it). Each retry is tried only where the one before
    failed, so a graph keeps as close to what runs eagerly as it can. A branch that needs the
    value all the same fails throughout; the last trace's error is the one told: it got past
    what traced code skips, so it names what stops a graph (the real trace's place is kept on
    it as ``fxviz_on_values`` where that differs). Where torch.export stopped at a data-dependent
    guard just before (``tracer="auto"``), the retry as it traces is not made: it would stop there
    too (:mod:`.data_dependent`; the place kept on the error as ``fxviz_as_export``)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        return make_fx(target, decompositions, record_module_stack=record)(*inputs), ""
    except RuntimeError as exc:
        if "_local_scalar_dense" not in str(exc):  # torch's op for reading a value (.item(), bool())
            raise
        on_values = exc
    how = (f"on fake tensors: on the real ones the trace stopped reading a tensor's value{where(on_values)}; "
           "code that asks whether it is traced then takes its traceable path")
    for compiling in (False, True) if TRACES_AS_COMPILING else (False,):
        if compiling and data_dependent.stopped() is not None:  # tracer="auto": it would stop where export did
            on_fakes.fxviz_as_export = data_dependent.stopped()
            break
        try:
            return make_fx_on_fakes(target, decompositions, record, compiling)(*inputs), how
        except Exception as exc:
            on_fakes = exc
            how = (f"{how}; and as torch.export traces (torch.compiler.is_compiling() true), since on fake "
                   f"tensors alone it failed{where(exc)}: {first_line(exc)}")
    if where(on_fakes) != where(on_values):
        on_fakes.fxviz_on_values = on_values
    raise on_fakes


def _unreturned_vals(gm: torch.fx.GraphModule) -> None:
    """make_fx keeps no ``meta["val"]`` on a ``getitem`` of an output an op did not compute
    (``convolution_backward``'s bias gradient, None): read from the op's tuple, so a training
    step is drawn from its shapes, its run left to the check, as a forward is."""
    for node in gm.graph.find_nodes(op="call_function", target=operator.getitem):
        held = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
        if "val" not in node.meta and isinstance(held, (tuple, list)) and isinstance(node.args[1], int) \
                and -len(held) <= node.args[1] < len(held) and held[node.args[1]] is None:
            node.meta["val"] = None


def _name_parameters(gm: torch.fx.GraphModule, root: nn.Module) -> None:
    """make_fx stores the parameters it met as ``_param_constant57``: store each under
    the qualified name of the tensor it holds (``layer3.0.conv1.weight``, the get_attr
    target, as in an exported program) with the module path of its owner, so the
    drawing, details, search and node table name it as the model does."""
    moved: set[str] = set()
    names = {id(t): n for n, t in (*root.named_parameters(remove_duplicate=False),
                                   *root.named_buffers(remove_duplicate=False))}
    for node in gm.graph.find_nodes(op="get_attr"):
        tensor = getattr(gm, node.target, None)
        qualified = names.get(id(tensor))
        movable = qualified is not None  # a view of a parameter keeps its own attribute
        if qualified is None and isinstance(tensor, torch.Tensor):
            base = getattr(tensor, "_base", None)
            qualified = names.get(id(base)) if base is not None else None
        if qualified is None:
            continue
        node.meta["qualified_name"] = qualified
        node.meta["module_path"] = qualified.rpartition(".")[0]
        node._rename(qualified.replace(".", "_"))
        if movable and node.target != qualified:
            if _get_attr(gm, qualified) is None:
                assign_attr(tensor, gm, qualified)
            if _get_attr(gm, qualified) is tensor:
                moved.add(node.target)
                node.target = qualified
    for name in moved:
        delattr(gm, name)
    gm.recompile()


def _get_attr(gm: torch.fx.GraphModule, qualified: str) -> Any:
    owner: Any = gm
    for part in qualified.split("."):
        owner = getattr(owner, part, None)
    return owner


front_end("make_fx", auto=40, options=("module",),
          about="make_fx: every ATen operator the call ran (a training step: its backward too)")(
    lambda r: capture(keywords_last(r.plain, r.keywords), r.inputs, r.options["module"]))

"""torch's FLOP counter (``torch.utils.flop_counter``), made to count what fxviz meets:
attention on CPU and flex attention, modules fed views made under no_grad, formulas that
fail. Its hooks (``_count_flops``, ``mod_tracker``, the ``_FlopCounterMode`` dispatch mode)
have no public equivalent."""
from __future__ import annotations

import functools
import math
import sys
from typing import Any

import torch
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

from fxviz._torch_internals import FLASH_CPU


def _handle_higher_order_ops(self, func, types, args, kwargs):
    """Flex attention (a higher-order operator with a formula) run as it is and counted:
    torch's mode counts it only when compiled, and refuses it in eager code."""
    if func in self.counter.flop_registry:
        return self.counter._count_flops(func, func(*args, **kwargs), args, kwargs)
    return super(_COUNTING_MODE, self)._handle_higher_order_ops(func, types, args, kwargs)


def _counting_modes() -> tuple[type | None, type | None]:
    """FlopCounterMode's dispatch mode class that also counts flex attention
    (:func:`_handle_higher_order_ops`), and the same with its own ``__torch_dispatch__``
    (which torch wraps in ``_disable_dynamo``, keeping the original as ``__wrapped__``);
    None where this torch has no such class or no wrapper."""
    mode = getattr(flop_counter, "_FlopCounterMode", None)
    if mode is None:
        return None, None
    counting = type("_CountingMode", (mode,), {"_handle_higher_order_ops": _handle_higher_order_ops})
    raw = getattr(getattr(mode, "__torch_dispatch__", None), "__wrapped__", None)
    if raw is None:
        return counting, None
    unwrapped = type("_UnwrappedFlopCounterMode", (counting,), {})  # a body without __torch_dispatch__: not wrapped
    unwrapped.__torch_dispatch__ = raw
    return counting, unwrapped


_COUNTING_MODE, _UNWRAPPED_MODE = _counting_modes()


def _attention_formulas() -> dict:
    """FLOP formulas for the attention kernels torch's registry lacks (raw: given the
    tensors): CPU's flash kernel, which every ``scaled_dot_product_attention`` on CPU
    dispatches to (its CUDA kernels have formulas), and the "overrideable" one of other
    backends, forward and backward, as torch counts its CUDA ones (``sdpa_flop_count``:
    the QK^T and AV matmuls, 4*B*H*L*S*E, the mask ignored)."""
    def forward(query, key, value, *args, out_val=None, **kwargs):
        return flop_counter.sdpa_flop_count(query.shape, key.shape, value.shape)

    def backward(grad_out, query, key, value, *args, out_val=None, **kwargs):
        return flop_counter.sdpa_backward_flop_count(grad_out.shape, query.shape, key.shape, value.shape)

    forward._get_raw = backward._get_raw = True  # FlopCounterMode passes tensors, not shapes
    names = {FLASH_CPU: forward, f"{FLASH_CPU}_backward": backward,
             "_scaled_dot_product_fused_attention_overrideable": forward,
             "_scaled_dot_product_fused_attention_overrideable_backward": backward}
    return {getattr(torch.ops.aten, name): formula for name, formula in names.items()
            if hasattr(torch.ops.aten, name) and getattr(torch.ops.aten, name) not in flop_counter.flop_registry}


class _Global:
    """A ModuleTracker that tracks nothing: every count goes to the total, the only one
    read. torch's installs hooks on every module call, whose backward hook fails on a
    module fed a view of a Parameter made under no_grad ("Expected gradient function
    to be set": timm's attention pools)."""

    parents = frozenset({"Global"})

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class FlopCounter(FlopCounterMode):
    """A FlopCounterMode that also says whether any operator it has a formula for ran:
    FLOPs of an operator without one (BatchNorm, ReLU, add) are unknown, not zero;
    ``failed`` says why a formula that raised left the total incomplete. It counts
    attention on CPU (:func:`_attention_formulas`) and tracks no modules (:class:`_Global`).
    ``_count_flops`` is the hook torch calls once per operator, ``mod_tracker`` its module
    tracker (no public ones)."""

    counted = False
    failed = ""  # "operator: error" of the first formula that raised

    def __init__(self, **kwargs: Any):
        super().__init__(custom_mapping=_ATTENTION_FORMULAS, **kwargs)
        if hasattr(self, "mod_tracker"):
            self.mod_tracker = _Global()

    def __enter__(self):
        """The mode also counts flex attention; outside torch.compile, it skips the wrapper
        torch puts around every dispatch mode to keep dynamo out of it: that wrapper's first call imports
        torch._dynamo, which cost the first Session of a kernel 0.65 s, on a model as
        small as Linear + ReLU. Nothing can be compiling while torch._dynamo is not
        imported, and then the wrapper has nothing to do."""
        entered = super().__enter__()
        if _COUNTING_MODE is not None and type(self.mode) is _COUNTING_MODE.__base__:
            dynamo_free = _UNWRAPPED_MODE is not None and "torch._dynamo" not in sys.modules
            self.mode.__class__ = _UNWRAPPED_MODE if dynamo_free else _COUNTING_MODE
        return entered

    def _count_flops(self, func_packet, out, args, kwargs):
        """torch's, with the shapes a formula takes made by :func:`_shapes` (torch's
        ``tree_map`` was two thirds of the time of a counted operator)."""
        formula = self.flop_registry.get(func_packet)
        if formula is None:
            return out
        self.counted = True
        try:
            count = _apply(formula, out, args, kwargs)
            for parent in set(self.mod_tracker.parents):
                self.flop_counts[parent][func_packet] += count
        except Exception as exc:  # the op ran: its count is unknown, not its result
            self.failed = self.failed or f"{func_packet}: {type(exc).__name__}: {exc}"
        return out


def _apply(formula: Any, out: Any, args: tuple, kwargs: dict) -> int:
    """What a formula of the counter's registry counts for one call."""
    if getattr(formula, "__code__", None) is _SHAPE_WRAPPER:  # shape_wrapper(f): f on shapes
        return formula.__wrapped__(*_shapes(args), out_shape=_shapes(out), **_shapes(kwargs))
    return formula(*args, **kwargs, out_val=out)


@functools.cache
def has_formula(op: Any) -> bool:
    """Whether :class:`FlopCounter` counts ATen operator ``op`` itself by a formula (not the
    operators it decomposes into): then :func:`formula_flops` counts it from shapes alone."""
    return op.overloadpacket in _registry() and \
        not op.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd)


def formula_flops(op: Any, out: Any, args: tuple, kwargs: dict) -> int | str:
    """The FLOPs :class:`FlopCounter` counts for a call of ``op`` (:func:`has_formula`) that
    gave ``out``, read from the values' shapes (fake tensors will do: nothing is run); a str
    saying why where the formula failed, as the counter says it."""
    try:
        return _apply(_registry()[op.overloadpacket], out, args, kwargs)
    except Exception as exc:
        return f"torch's FLOP formula for {op.overloadpacket}: {type(exc).__name__}: {exc}"


@functools.cache
def _registry() -> dict:
    return FlopCounter(display=False).flop_registry  # torch's formulas and fxviz's, as the counter holds them


#: The code of the function torch's ``shape_wrapper`` makes of a formula (``__wrapped__``:
#: the formula), which maps its arguments to shapes with ``tree_map(get_shape, ...)``.
_SHAPE_WRAPPER = flop_counter.shape_wrapper(lambda: 0).__code__


def _shapes(value: Any) -> Any:
    """``tree_map(flop_counter.get_shape, value)`` for what operators take and return:
    tensors by shape, in tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        return value.shape
    if value.__class__ in (tuple, list):
        return value.__class__(map(_shapes, value))
    if value.__class__ is dict:
        return {k: _shapes(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return value.__class__(*map(_shapes, value))
    return value


_ATTENTION_FORMULAS = _attention_formulas()


@functools.cache
def may_count(op: Any) -> bool:
    """Whether :class:`FlopCounter` may count FLOPs of ATen operator ``op`` run under it: it
    has a formula for it, or ``op`` decomposes (CompositeImplicitAutograd) into operators
    before the counter sees them. Any other operator counts as nothing: reading FLOPs from
    shapes need not run it on meta tensors (half the operators of a transformer)."""
    return op.overloadpacket in _registry() or \
        op.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd)


#: torch.nn's modules whose forward runs one operator the counter has a formula for
#: (a Linear's on a batch: one mm or addmm; a convolution's, also after padding)
_CONVOLUTIONS = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d,
                 torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)
_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_forward_hooks_always_called")


def by_formula(module: torch.nn.Module, args: tuple, kwargs: dict) -> bool:
    """Whether :func:`module_flops` counts ``module(*args, **kwargs)``: ``module`` is a
    Linear or a convolution itself (no subclass: it may run more) with no hooks, called on
    a batch (an unbatched input is reshaped first, a Linear's vector runs no mm)."""
    kind = type(module)
    if (kind is not torch.nn.Linear and kind not in _CONVOLUTIONS) or kwargs or len(args) != 1 \
            or not isinstance(args[0], torch.Tensor) or module._forward_hooks or module._forward_pre_hooks \
            or any(getattr(torch.nn.modules.module, hooks, None) for hooks in _GLOBAL_HOOKS):
        return False
    return args[0].dim() >= 2 if kind is torch.nn.Linear else args[0].dim() == module.weight.dim()


def module_flops(module: torch.nn.Module, x: torch.Tensor, out: torch.Tensor) -> int | str:
    """What :class:`FlopCounter` counts for ``module(x)`` (:func:`by_formula`) that gave
    ``out``, read from shapes by its formula with no dispatch mode: under the counter, 30 µs
    an operator and its entry were most of a convolutional net's annotated run."""
    weight = module.weight
    if type(module) is torch.nn.Linear:
        rows = math.prod(x.shape[:-1])  # not Size.numel(), which makes a symbolic size a number
        return formula_flops(torch.ops.aten.mm.default, (rows, weight.shape[0]),
                             ((rows, weight.shape[1]), tuple(weight.shape[::-1])), {})
    transposed = type(module).__name__.startswith("ConvTranspose")
    return formula_flops(torch.ops.aten.convolution.default, out,
                         (x, weight, module.bias, module.stride, module.padding, module.dilation, transposed,
                          getattr(module, "output_padding", (0,)), module.groups), {})

"""Running a GraphModule without leaving a trace on it."""
from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn


@contextlib.contextmanager
def preserved_buffers(module: nn.Module) -> Iterator[None]:
    """Restore every buffer afterwards: a training-mode BatchNorm updates its running
    statistics in place, and those buffers may be shared with the user's model."""
    saved = [(buf, buf.detach().clone()) for buf in module.buffers() if has_values(buf)]
    try:
        yield
    finally:
        with torch.no_grad():
            for buf, value in saved:
                if not torch.equal(buf, value):
                    buf.copy_(value)


def has_values(tensor: torch.Tensor) -> bool:
    """False for meta and fake tensors: shapes and dtypes only, nothing to save or compare."""
    from torch._subclasses.fake_tensor import FakeTensor

    return not (tensor.is_meta or isinstance(tensor, FakeTensor))


def closed_over_modules(fn: Callable[..., Any]) -> list[nn.Module]:
    """The nn.Modules a plain function reads from its closure or globals (a training
    step's model, its loss module): running the function runs them."""
    try:
        variables = inspect.getclosurevars(inspect.unwrap(fn))  # through functools.wraps
    except TypeError:  # builtins, functools.partial, callables without code
        return []
    return [v for v in (*variables.nonlocals.values(), *variables.globals.values()) if isinstance(v, nn.Module)]


@contextlib.contextmanager
def untouched(model: Any) -> Iterator[None]:
    """Run ``model`` (a module, or a plain function over the modules it closes over)
    and leave their buffers as they were: capturing or checking a training step must
    not advance the user's BatchNorm statistics."""
    modules = [model] if isinstance(model, nn.Module) else closed_over_modules(model)
    with contextlib.ExitStack() as stack:
        for module in modules:
            stack.enter_context(preserved_buffers(module))
        yield

"""The model a plain function (a training step) calls without saying so."""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from torch import nn


def closed_over_module(fn: Callable[..., Any]) -> nn.Module | None:
    """The nn.Module ``fn`` reads from its closure or globals (the one with the most
    parameters, when it reads several: an optimizer's model, not its loss module)."""
    try:
        variables = inspect.getclosurevars(fn)
    except TypeError:  # builtins, functools.partial, callables without code
        return None
    found = [v for v in (*variables.nonlocals.values(), *variables.globals.values()) if isinstance(v, nn.Module)]
    return max(found, key=lambda m: sum(p.numel() for p in m.parameters()), default=None)

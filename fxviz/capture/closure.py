"""The model a plain function (a training step) calls without saying so."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from fxviz._runtime import closed_over_modules


def closed_over_module(fn: Callable[..., Any]) -> nn.Module | None:
    """The nn.Module ``fn`` reads from its closure or globals (the one with the most
    parameters, when it reads several: an optimizer's model, not its loss module)."""
    return max(closed_over_modules(fn), key=lambda m: sum(p.numel() for p in m.parameters()), default=None)

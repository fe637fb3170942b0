"""A training step that leaves its gradients in ``.grad`` (``loss.backward()``) rather
than returning them: captured and checked as a step that returns them too."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torch import nn

from fxviz.capture.closure import closed_over_module
from fxviz.checks.check import Gradients


def with_gradients(fn: Callable[..., Any], module: nn.Module | None = None) -> Callable[..., Any]:
    """``fn`` returning ``(its output, {parameter name: gradient})`` when it fills
    ``.grad`` of the parameters of ``module`` (the model it closes over when not
    given), else its output alone. Each call starts from no gradients and puts the
    user's ``.grad`` back afterwards, so the graph is the same whatever the user had
    accumulated, its gradients are graph outputs the check compares with the eager
    step's, and neither capture nor check leaves gradients on the user's model."""
    root = module or closed_over_module(fn)
    if root is None:
        return fn
    params = [(name, p) for name, p in root.named_parameters() if p.requires_grad]

    @functools.wraps(fn)  # __wrapped__: closed_over_modules still finds the model
    def step(*args: Any, **kwargs: Any) -> Any:
        saved = [p.grad for _, p in params]
        for _, p in params:
            p.grad = None
        try:
            out = fn(*args, **kwargs)
            grads = {name: p.grad for name, p in params if p.grad is not None}
        finally:
            for (_, p), grad in zip(params, saved):
                p.grad = grad
        return (out, Gradients(grads)) if grads else out

    return step

"""The model failing on its example inputs by itself, without fxviz: that, with its line,
is the error to show rather than each capture method's, with what to do about it."""
from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from fxviz.capture._common import first_line
from fxviz.capture.places import caller
from fxviz.capture.places import where
from fxviz.capture.model_config import config_advice
from fxviz.errors import TraceError


def own_failure(model: Any, inputs: tuple, listed: bool = False) -> TraceError | None:
    """When capture failed (every method, or the one named), the model itself may not run
    on these inputs: say that (with its line) rather than the capture errors. ``listed``:
    the example inputs were given as a list (taken as the arguments, one per item)."""
    from fxviz._runtime import preserved_buffers, untouched

    if not inputs:
        return None
    kept = preserved_buffers(model) if isinstance(model, nn.Module) else untouched(model)
    try:  # a plain function may be a training step: it needs autograd
        with torch.set_grad_enabled(not isinstance(model, nn.Module)), kept:
            model(*inputs)
    except Exception as exc:
        name = getattr(model, "__name__", type(model).__name__)
        error = TraceError(f"{caller()}(...): {name} itself fails on the example inputs{where(exc)}\n"
                           f"  {first_line(exc)}\n  What to do: {_device_advice(model, inputs, exc, listed)}")
        error.__cause__ = exc
        return error
    return None


def _device_advice(model: Any, inputs: tuple, exc: Exception, listed: bool = False) -> str:
    """What to do when a model fails on its inputs: where the model's tensors and the
    inputs live apart (a meta or fake model given real inputs, a GPU model CPU ones),
    say so, the likeliest cause; where all are on meta and an operator has no meta
    version (torch.nonzero: its size needs values), that no meta model can do better."""
    from fxviz._runtime import closed_over_modules
    from fxviz._torch_internals import is_fake, tree_leaves

    def where_(t: torch.Tensor) -> str:
        return "meta" if t.is_meta else "fake" if is_fake(t) else str(t.device)

    modules = [model] if isinstance(model, nn.Module) else closed_over_modules(model)
    held = {where_(t) for m in modules for t in [*m.parameters(), *m.buffers()]}
    given = {where_(t) for t in tree_leaves(inputs) if isinstance(t, torch.Tensor)}
    if held and given and not held & given:
        home = sorted(held)[0]
        make = ("under the model's FakeTensorMode" if home == "fake"
                else f"where the model is (e.g. torch.randn(..., device={home!r}))")
        return (f"the model's tensors are on {', '.join(sorted(held))} but the example inputs on "
                f"{', '.join(sorted(given))}: make the inputs {make}, or move the model.")
    if held | given == {"meta"} and (isinstance(exc, NotImplementedError) or "meta" in str(exc).lower()):
        return ("the model cannot run on the meta device (an operator it calls has no meta version, often one whose "
                "output size depends on values, as torch.nonzero): build the model and inputs on a real device "
                "(the CPU) to open it.")
    return (config_advice(modules) or _keywords_advice(model, inputs) or _packed_advice(inputs)
            or _listed_advice(listed) or "this fails without fxviz too (call the model on these inputs to see): pass inputs the model "
               "accepts, or build it with a configuration it can run.")


def _packed_advice(inputs: tuple) -> str | None:
    """explore() takes the inputs one by one, Session as one tuple: a tuple given to explore
    reaches the model as its one argument."""
    if caller() == "explore" and len(inputs) == 1 and isinstance(inputs[0], (tuple, list)):
        return ("if the model takes these as separate arguments, give them one by one, as the model is called: "
                "explore(model, *inputs), not explore(model, inputs) (Session(model, inputs) takes one tuple); "
                "else pass inputs the model accepts.")
    return None


def _listed_advice(listed: bool) -> str | None:
    """A list of example inputs is taken as the arguments, one per item; a model whose one
    argument is a list (torchvision's detection models: a list of images) gets a bare tensor."""
    if not listed:
        return None
    return (f"the example inputs were a list, which {caller()} takes as the model's arguments, one per item; if the "
            f"model takes the list itself as one argument (torchvision's detection models take a list of images), "
            f"wrap it in a tuple: {caller()}(model, ([image, ...],)).")


def _keywords_advice(model: Any, inputs: tuple) -> str | None:
    """A dict of forward's parameters (a tokenizer's batch, meant as ``model(**batch)``)
    reaches forward as its first argument: the tuple that passes its values instead."""
    try:
        params = list(inspect.signature(model.forward if isinstance(model, nn.Module) else model).parameters.values())
    except (TypeError, ValueError):
        return None
    batch = inputs[0] if len(inputs) == 1 and isinstance(inputs[0], Mapping) else {}  # a BatchEncoding is no dict
    if not batch or not set(batch) <= {p.name for p in params}:
        return None
    upto = params[:max(i for i, p in enumerate(params) if p.name in batch) + 1]
    if any(p.name not in batch and p.default is p.empty for p in upto):
        return None
    values = ", ".join(f"batch[{p.name!r}]" if p.name in batch else repr(p.default) for p in upto)
    return (f"the example inputs are one dict, given to forward as its first argument (fxviz passes no keyword "
            f"arguments): pass a tuple in forward's order instead, ({values}{',' * (len(upto) == 1)}).")

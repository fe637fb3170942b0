"""Keyword inputs and the names of a model's inputs.

fxviz passes a graph its inputs as one tuple, the keyword ones last (as an
ExportedProgram's graph takes them): every later run (the check, random inputs, timing)
is then one positional call, whatever the model's signature. The model itself is called
with them as keywords (:func:`keywords_last`). Graph inputs are named after the
parameters of the forward (or step function) they feed (:func:`input_names`).
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from torch import nn

from fxviz._cow import module_copy
from fxviz.capture.places import caller
from fxviz.errors import UsageError

_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def flat(args: tuple, kwargs: Mapping[str, Any] | None) -> tuple:
    """The inputs as fxviz passes them: positional ones, then keyword ones in their order."""
    return (*args, *(kwargs or {}).values())


def signature(model: Any) -> inspect.Signature | None:
    """The signature the user's inputs bind to: a module's forward, a function's own
    (through ``functools.wraps``); None where Python cannot tell (builtins)."""
    try:
        return inspect.signature(model.forward if isinstance(model, nn.Module) else model)
    except (TypeError, ValueError):
        return None


def _what(model: Any) -> str:
    return f"{type(model).__name__}.forward" if isinstance(model, nn.Module) else getattr(model, "__name__", "the model")


def check(model: Any, args: tuple, kwargs: Mapping[str, Any], options: Sequence[str] = ()) -> None:
    """A UsageError for keywords the model does not take (naming ``options``, fxviz's own,
    where the keywords were given among them) or takes positionally already."""
    sig = signature(model)
    if sig is None or not kwargs:
        return
    params = list(sig.parameters.values())
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        unknown = [k for k in kwargs if k not in {p.name for p in params if p.kind in _NAMED}]
        if unknown:
            takes = ", ".join(p.name for p in params) or "no parameters"
            ours = f"an option of {caller()} ({', '.join(options)}) nor " if options else ""
            raise UsageError(
                f"{caller()}(...): {', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} neither "
                f"{ours}a parameter of {_what(model)} ({takes}). What to do: check the spelling, or pass the "
                "inputs the model takes.")
    if not any(p.kind is p.VAR_POSITIONAL for p in params):
        given = [p.name for p in params if p.kind in _POSITIONAL][:len(args)]
        twice = [k for k in kwargs if k in given]
        if twice:
            raise UsageError(f"{caller()}(...): {', '.join(map(repr, twice))} given both positionally and as a "
                             f"keyword to {_what(model)}: pass each input once.")


def require_inputs(model: Any, args: tuple, kwargs: Mapping[str, Any]) -> None:
    """A UsageError when inputs the model's forward has no default for are not given: a
    Session runs the model (its shapes, check and timings), which a symbolic trace alone does not."""
    sig = signature(model)
    if sig is None:
        return
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        if "missing" in str(exc):
            raise UsageError(f"{caller()}(...): {_what(model)}{sig} needs example inputs the call did not give "
                             f"({exc}). What to do: pass them, e.g. {caller()}(model, torch.randn(...)), keyword "
                             "inputs in kwargs={...}.") from None


def keywords_last(model: Any, names: Sequence[str]) -> Any:
    """``model`` called as fxviz calls a graph: positionally, its last ``len(names)``
    inputs being the keyword inputs ``names``. A module stays a module (a copy with the
    same submodules, so the same module paths); a function keeps its name and closure."""
    names = tuple(names)
    if not names:
        return model
    call = model.forward if isinstance(model, nn.Module) else model

    @functools.wraps(call)
    def positional(*inputs: Any) -> Any:
        split = len(inputs) - len(names)
        return call(*inputs[:split], **dict(zip(names, inputs[split:])))

    # What it takes, for tracers that name inputs by it (``__wrapped__`` leads to the model's
    # closure, for finding a step's model, not to how this is called).
    positional.__signature__ = inspect.Signature([inspect.Parameter("inputs", inspect.Parameter.VAR_POSITIONAL)])
    if not isinstance(model, nn.Module):
        return positional
    copy = module_copy(model)
    copy.forward = positional
    return copy


def input_names(model: Any, inputs: tuple, names: Sequence[str]) -> list[str | None]:
    """A name per input of ``inputs`` (its last ``len(names)`` the keyword ones): the
    parameter it binds to (``xs_0``, ``xs_1`` for ``*xs``); None where the model's
    signature cannot tell."""
    sig = signature(model)
    positional = len(inputs) - len(names)
    if sig is None:
        return [None] * positional + list(names)
    params = list(sig.parameters.values())
    star = next((i for i, p in enumerate(params) if p.kind is p.VAR_POSITIONAL), None)
    found: list[str | None] = []
    for i in range(positional):
        if i < len(params) and params[i].kind in _POSITIONAL:
            found.append(params[i].name)
        else:
            found.append(f"{params[star].name}_{i - star}" if star is not None else None)
    return found + list(names)


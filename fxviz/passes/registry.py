"""The pass contract and the registry of passes.

A pass is a plain function ``fn(gm, *, nodes=None, **params)`` that rewrites the
GraphModule it is given (a copy-on-write fork that it owns) and returns a
``PassResult(gm, modified)``, a GraphModule, or None (meaning: ``gm``, modified).
When it finds nothing to change it raises :class:`NothingToDo`; what it left alone
and why (the pairs it could not fold) goes in ``gm.meta["pass_note"]``, which the
Explorer shows after applying it. It must not write
into tensors: they are shared with earlier steps and the user's model; build a
new module or Parameter and ``setattr`` it instead.

``register`` wraps the function in a :class:`PassSpec` whose parameters come
from its signature, so a UI can build a form; built-ins use the same decorator, with
an ``order`` that places them first (a new built-in is one module in this package:
``fxviz.passes`` imports every module of itself).
"""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import typing
from collections.abc import Callable, Iterable
from typing import Any

import torch.fx

from fxviz.errors import PassError
from fxviz.passes.spec import NothingToDo, PassParam, PassSpec, selection_names

__all__ = ["NothingToDo", "PassParam", "PassSpec", "available", "describe", "get", "register", "resolve",
           "selection_names", "unregister"]

_REGISTRY: dict[str, PassSpec] = {}


def describe(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    doc: str | None = None,
    preserves_semantics: bool = True,
    needs_eval: bool = False,
    targets_nodes: bool | None = None,
    choices: dict[str, Iterable] | None = None,
    convert_inputs: Callable[[tuple], tuple] | None = None,
    level: str = "any",
    nothing_to_do: Callable[[torch.fx.GraphModule], str | None] | None = None,
) -> PassSpec:
    """The PassSpec of ``fn`` without registering it. ``targets_nodes`` defaults to
    whether ``fn`` takes a ``nodes`` parameter; ``choices`` maps parameter names to
    allowed values (``Literal[...]`` annotations give them too). ``doc`` defaults to the
    docstring's first paragraph on one line, without reST's double backquotes: a whole
    sentence for the Passes tab.

    >>> from typing import Literal
    >>> def scale(gm, *, factor: float = 2.0, mode: Literal["a", "b"] = "a"):
    ...     "Scale every output."
    >>> spec = describe(scale)
    >>> spec.doc, [(p.name, p.default, p.choices) for p in spec.params], spec.targets_nodes
    ('Scale every output.', [('factor', 2.0, None), ('mode', 'a', ('a', 'b'))], False)
    """
    if not callable(fn):
        raise PassError(f"A pass is a function of a GraphModule (def my_pass(gm, ...): ...), not "
                        f"{type(fn).__name__} {fn!r:.60}.")
    name = name or getattr(fn, "__name__", type(fn).__name__)
    signature = _signature(fn)
    takes_nodes = "nodes" in signature.parameters
    if targets_nodes is None:
        targets_nodes = takes_nodes
    if targets_nodes and not takes_nodes:
        raise PassError(f"Pass '{name}' is registered with targets_nodes=True but takes no 'nodes' parameter.")
    params = tuple(_params(name, signature, dict(choices or {})))
    summary = " ".join((doc or inspect.getdoc(fn) or "").strip().split("\n\n")[0].replace("``", "").split())
    if level not in ("torch", "aten", "any"):
        raise PassError(f"Pass '{name}': level must be 'torch', 'aten' or 'any', not {level!r}.")
    return PassSpec(name, summary, fn, params, preserves_semantics, needs_eval, targets_nodes, convert_inputs,
                    level, nothing_to_do)


def register(fn: Callable[..., Any] | None = None, *, replace: bool = False, order: float | None = None,
             **options: Any) -> Any:
    """Register a pass; usable as ``@register``, ``@register(name=..., ...)`` or
    ``register(fn, ...)``. Options are those of :func:`describe`; ``order``: its place in
    :func:`available` (built-ins: 10, 20, ...; by default after them, or where the pass it
    replaces was). Registering a name again is allowed for the same function (a re-run
    notebook cell) or with ``replace=True``. Returns ``fn`` unchanged."""

    def add(f: Callable[..., Any]) -> Callable[..., Any]:
        spec = describe(f, **options)
        old = _REGISTRY.get(spec.name)
        if old is not None and not replace and _qualname(old.fn) != _qualname(f):
            raise PassError(
                f"A pass named '{spec.name}' is already registered ({_qualname(old.fn)}); "
                "choose another name or pass replace=True."
            )
        place = order if order is not None else old.order if old is not None else math.inf
        _REGISTRY[spec.name] = dataclasses.replace(spec, order=place)
        return f

    return add if fn is None else add(fn)


def unregister(name: str) -> None:
    """Forget the pass called ``name`` (a user's experiment, say)."""
    get(name)  # the same error for an unknown name
    del _REGISTRY[name]


def get(name: str) -> PassSpec:
    """The registered pass called ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), available(), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise PassError(f"No pass named '{name}'; {hint}available: {', '.join(available())}.") from None


def available() -> tuple[str, ...]:
    """Names of the registered passes, built-ins first (by their ``order``), then the
    others in the order they were registered."""
    return tuple(sorted(_REGISTRY, key=lambda name: _REGISTRY[name].order))


def resolve(pass_: str | PassSpec | Callable[..., Any]) -> PassSpec:
    """A PassSpec from a name, a spec, or a function (registered or not)."""
    if isinstance(pass_, PassSpec):
        return pass_
    if isinstance(pass_, str):
        return get(pass_)
    for spec in _REGISTRY.values():
        if spec.fn is pass_:
            return spec
    if callable(pass_):
        return describe(pass_)
    raise PassError(f"Cannot apply {pass_!r}: give a pass name, a PassSpec or a function.")


def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    try:
        return inspect.signature(fn, eval_str=True)
    except (NameError, AttributeError):  # an annotation that cannot be resolved stays a string
        return inspect.signature(fn)


def _params(name: str, signature: inspect.Signature, choices: dict[str, Iterable]) -> Iterable[PassParam]:
    positional = [p for p in signature.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not positional:
        raise PassError(f"Pass '{name}' must take the GraphModule as its first positional parameter.")
    for p in list(signature.parameters.values())[1:]:
        if p.name == "nodes" or p.kind == p.VAR_KEYWORD:
            continue
        if p.kind == p.VAR_POSITIONAL:
            raise PassError(f"Pass '{name}' takes *{p.name}; passes take keyword parameters only.")
        allowed = choices.pop(p.name, None)
        if allowed is None and typing.get_origin(p.annotation) is typing.Literal:
            allowed = typing.get_args(p.annotation)
        yield PassParam(p.name, p.annotation, p.default, None if allowed is None else tuple(allowed))
    if choices:
        raise PassError(f"Pass '{name}' has choices for unknown parameters: {', '.join(choices)}.")


def _qualname(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"

"""The pass contract and the registry of passes.

A pass is a plain function ``fn(gm, *, nodes=None, **params)`` that rewrites the
GraphModule it is given (a copy-on-write fork that it owns) and returns a
``PassResult(gm, modified)``, a GraphModule, or None (meaning: ``gm``, modified).
When it finds nothing to change it raises :class:`NothingToDo`. It must not write
into tensors: they are shared with earlier steps and the user's model; build a
new module or Parameter and ``setattr`` it instead.

``register`` wraps the function in a :class:`PassSpec` whose parameters come
from its signature, so a UI can build a form; built-ins use the same decorator.
"""
from __future__ import annotations

import inspect
import traceback
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch.fx
from torch.fx.passes.infra.pass_base import PassResult

from fxviz.errors import PassError
from fxviz.passes.levels import computes_gradients, ir_level
from fxviz.passes.provenance import recording

REQUIRED = inspect.Parameter.empty
_REGISTRY: dict[str, PassSpec] = {}


class NothingToDo(PassError):
    """The pass found nothing to change (e.g. "no conv→BN pattern found"); a Session
    creates no step for it."""


@dataclass(frozen=True)
class PassParam:
    """One keyword parameter of a pass: what a form field needs."""

    name: str
    annotation: Any
    default: Any = REQUIRED
    choices: tuple | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class PassSpec:
    """A pass and what a Session or a UI needs to know about it.

    ``preserves_semantics``: outputs should match the original (else the numeric
    check reads "expected to differ"). ``needs_eval``: refused while any module
    is in training mode. ``targets_nodes``: accepts ``nodes=`` to act on a
    selection only. ``convert_inputs``: how the pass changes the model's inputs
    (e.g. to channels-last), applied to the step's example and check inputs.
    ``level``: the IR the pass works on: "torch" (modules and torch functions, from the
    symbolic tracer), "aten" (ATen operators: export, make_fx) or "any".
    """

    name: str
    doc: str
    fn: Callable[..., Any]
    params: tuple[PassParam, ...]
    preserves_semantics: bool = True
    needs_eval: bool = False
    targets_nodes: bool = False
    convert_inputs: Callable[[tuple], tuple] | None = None
    level: str = "any"

    def why_not(self, gm: torch.fx.GraphModule) -> str | None:
        """Why this pass does not apply to ``gm`` (its IR level; a training graph for a pass
        that needs eval mode), or None when it does."""
        level = ir_level(gm)
        if self.needs_eval and computes_gradients(gm):
            return (f"'{self.name}' rewrites an inference graph; this graph computes gradients (a training "
                    "step), whose backward reads what the pass would remove")
        if self.level in ("any", level):
            return None
        wanted = {"torch": "torch-IR graphs (modules and torch functions, tracer='symbolic')",
                  "aten": "ATen graphs with recorded input shapes (tracer='export' or 'make_fx', or an ExportedProgram)"}
        return f"'{self.name}' works on {wanted[self.level]}; this graph is {level}-level"

    def __call__(self, gm: torch.fx.GraphModule, *, nodes: Any = None, **params: Any) -> PassResult:
        """Validate ``params`` and ``nodes`` (names or Nodes), run the pass on ``gm``
        and return a PassResult; raise PassError naming the cause, or NothingToDo."""
        kwargs = self.bind(params)
        reason = self.why_not(gm)
        if reason:
            raise PassError(f"{reason}.")
        if self.needs_eval:
            _require_eval(gm, self.name)
        if self.targets_nodes:
            kwargs["nodes"] = None if nodes is None else _resolve_nodes(gm, nodes, self.name)
        elif nodes is not None:
            raise PassError(f"Pass '{self.name}' acts on the whole graph; call it without nodes=.")
        try:
            with recording(gm, self.name) as changes:
                result = self.fn(gm, **kwargs)
            gm.meta["pass_changes"] = {k: sorted(v) for k, v in changes.items()}
        except PassError:
            raise
        except Exception as exc:  # a user's pass may raise anything: name it and the node
            node = _node_in_traceback(exc)
            where = f" at node '{node.name}'" if node is not None else ""
            raise PassError(f"Pass '{self.name}' failed{where}: {type(exc).__name__}: {exc}") from exc
        return self._result(gm, result)

    def bind(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` checked against the signature, with defaults filled in."""
        known = {p.name: p for p in self.params}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise PassError(
                f"Pass '{self.name}' has no parameter {', '.join(map(repr, unknown))}; "
                f"its parameters are: {', '.join(known) or 'none'}."
            )
        bound = {}
        for p in self.params:
            value = params.get(p.name, p.default)
            if value is REQUIRED:
                raise PassError(f"Pass '{self.name}' needs the parameter '{p.name}'.")
            if p.choices is not None and not _within(value, p.choices):
                raise PassError(
                    f"Pass '{self.name}': {p.name}={value!r} is not one of {', '.join(map(repr, p.choices))}."
                )
            bound[p.name] = value
        return bound

    def _result(self, gm: torch.fx.GraphModule, result: Any) -> PassResult:
        """The pass's return value as a PassResult over a linted, recompiled graph."""
        if result is None or isinstance(result, torch.fx.GraphModule):
            result = PassResult(gm if result is None else result, True)
        if not isinstance(result, PassResult):
            raise PassError(
                f"Pass '{self.name}' returned a {type(result).__name__}; "
                "return a GraphModule, a PassResult or None."
            )
        if not result.modified:
            raise NothingToDo(f"Pass '{self.name}' found nothing to change.")
        try:
            result.graph_module.graph.lint()
            result.graph_module.recompile()
        except Exception as exc:
            raise PassError(f"Pass '{self.name}' produced an invalid graph: {exc}") from exc
        return result


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
) -> PassSpec:
    """The PassSpec of ``fn`` without registering it. ``targets_nodes`` defaults to
    whether ``fn`` takes a ``nodes`` parameter; ``choices`` maps parameter names to
    allowed values (``Literal[...]`` annotations give them too)."""
    name = name or getattr(fn, "__name__", type(fn).__name__)
    signature = _signature(fn)
    takes_nodes = "nodes" in signature.parameters
    if targets_nodes is None:
        targets_nodes = takes_nodes
    if targets_nodes and not takes_nodes:
        raise PassError(f"Pass '{name}' is registered with targets_nodes=True but takes no 'nodes' parameter.")
    params = tuple(_params(name, signature, dict(choices or {})))
    first_line = (doc or inspect.getdoc(fn) or "").strip().split("\n")[0]
    if level not in ("torch", "aten", "any"):
        raise PassError(f"Pass '{name}': level must be 'torch', 'aten' or 'any', not {level!r}.")
    return PassSpec(name, first_line, fn, params, preserves_semantics, needs_eval, targets_nodes, convert_inputs,
                    level)


def register(fn: Callable[..., Any] | None = None, *, replace: bool = False, **options: Any) -> Any:
    """Register a pass; usable as ``@register``, ``@register(name=..., ...)`` or
    ``register(fn, ...)``. Options are those of :func:`describe`. Registering a name
    again is allowed for the same function (a re-run notebook cell) or with
    ``replace=True``. Returns ``fn`` unchanged."""

    def add(f: Callable[..., Any]) -> Callable[..., Any]:
        spec = describe(f, **options)
        old = _REGISTRY.get(spec.name)
        if old is not None and not replace and _qualname(old.fn) != _qualname(f):
            raise PassError(
                f"A pass named '{spec.name}' is already registered ({_qualname(old.fn)}); "
                "choose another name or pass replace=True."
            )
        _REGISTRY[spec.name] = spec
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
        raise PassError(f"No pass named '{name}'; available: {', '.join(available())}.") from None


def available() -> tuple[str, ...]:
    """Names of the registered passes, built-ins first."""
    return tuple(_REGISTRY)


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


def _within(value: Any, choices: tuple) -> bool:
    """A value, or every item of a tuple/list value (a multi-select), is a choice;
    a class counts by its name, so ``nn.ReLU`` matches ``"ReLU"``."""
    values = value if isinstance(value, (tuple, list)) else (value,)
    return all(v in choices or getattr(v, "__name__", None) in choices for v in values)


def _require_eval(gm: torch.fx.GraphModule, name: str) -> None:
    for node in gm.graph.find_nodes(op="call_module"):
        module = gm.get_submodule(node.target)
        if module.training:
            raise PassError(
                f"Pass '{name}' needs eval mode, but module '{node.target}' (node '{node.name}', "
                f"{type(module).__name__}) is in training mode; call model.eval() before creating the Session."
            )


def selection_names(nodes: Any) -> tuple[str, ...]:
    """Node names from a name, a Node, or an iterable of either."""
    if isinstance(nodes, (str, torch.fx.Node)):
        nodes = (nodes,)
    return tuple(n.name if isinstance(n, torch.fx.Node) else n for n in nodes)


def _resolve_nodes(gm: torch.fx.GraphModule, nodes: Any, name: str) -> tuple[torch.fx.Node, ...]:
    wanted = selection_names(nodes)
    by_name = {n.name: n for n in gm.graph.nodes}
    missing = [w for w in wanted if w not in by_name]
    if missing:
        raise PassError(f"Pass '{name}': no node named {', '.join(map(repr, missing))} in this graph.")
    if not wanted:
        raise PassError(f"Pass '{name}' was given an empty selection; select at least one node or pass nodes=None.")
    return tuple(by_name[w] for w in wanted)


def _node_in_traceback(exc: BaseException) -> torch.fx.Node | None:
    """The fx.Node a failing pass was working on: the innermost frame's local ``node``,
    or else any Node local to it."""
    for frame, _ in reversed(list(traceback.walk_tb(exc.__traceback__))):
        candidates = [v for v in frame.f_locals.values() if isinstance(v, torch.fx.Node)]
        if candidates:
            node = frame.f_locals.get("node")
            return node if isinstance(node, torch.fx.Node) else candidates[0]
    return None


def _qualname(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"

"""What a pass is: :class:`PassSpec` (a function, its parameters and what it promises)
and running one on a GraphModule with its arguments checked.

See :mod:`fxviz.passes.registry` for the contract a pass function follows.
"""
from __future__ import annotations

import inspect
import math
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch.fx
from torch.fx.passes.infra.pass_base import PassResult

from fxviz._torch_internals import code_made
from fxviz.errors import PassError
from fxviz.passes.levels import computes_gradients, ir_level
from fxviz.passes.provenance import recording

REQUIRED = inspect.Parameter.empty


class NothingToDo(PassError):
    """The pass found nothing to change (e.g. "no BatchNorm in this graph"); a Session
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
    symbolic tracer), "aten" (ATen operators: export, make_fx) or "any". ``nothing_to_do``:
    why the pass would change nothing in a graph (no call_module to open, no BatchNorm to
    fold), or None, so the registry offers it only where it can act. ``order``: its
    place in the registry's list (``register(order=)``).
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
    nothing_to_do: Callable[[torch.fx.GraphModule], str | None] | None = None
    order: float = math.inf

    def why_not(self, gm: torch.fx.GraphModule) -> str | None:
        """Why this pass is not offered for ``gm`` (its IR level; a training graph for a pass
        that needs eval mode; nothing in it the pass acts on), or None when it is."""
        reason = self._wrong_graph(gm)
        if reason or self.nothing_to_do is None:
            return reason
        return self.nothing_to_do(gm)

    def _wrong_graph(self, gm: torch.fx.GraphModule) -> str | None:
        """Why this pass cannot run on ``gm`` at all (applying it is a PassError), or None."""
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
        reason = self._wrong_graph(gm)  # nothing to do is the pass's own NothingToDo, on the selection too
        if reason:
            raise PassError(f"{reason}.")
        if self.needs_eval:
            _require_eval(gm, self.name)
        if self.targets_nodes:
            kwargs["nodes"] = None if nodes is None else _resolve_nodes(gm, nodes, self.name)
        elif nodes is not None:
            raise PassError(f"Pass '{self.name}' acts on the whole graph; call it without nodes=.")
        gm.meta.pop("pass_note", None)  # the fork's copy of the previous step's
        try:
            with recording(gm, self.name) as changes:
                result = self.fn(gm, **kwargs)
            gm.meta["pass_changes"] = {k: sorted(v) for k, v in changes.items()}
        except PassError:
            raise
        except Exception as exc:  # a user's pass may raise anything: name it and the node
            node = _node_in_traceback(exc)
            where = f" at node '{node.name}'" if node is not None else ""
            raise PassError(f"Pass '{self.name}' failed{where}: {type(exc).__name__}: {exc}",
                            node=None if node is None else node.name) from exc
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
            code_made(result.graph_module)  # now, not lazily: a graph whose code cannot be made fails here
        except Exception as exc:
            raise PassError(f"Pass '{self.name}' produced an invalid graph: {exc}") from exc
        return result


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
                f"{type(module).__name__}) is in training mode; call model.eval() before creating the Session.",
                node=node.name,
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



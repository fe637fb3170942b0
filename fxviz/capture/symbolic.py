"""torch.fx's symbolic tracer: a module-level graph (``nn`` modules stay call_module
leaves), with each node's module path recorded as it is traced."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.fx
from torch import nn

from fxviz._cow import skeleton
from fxviz._torch_internals import code_made, code_on_first_use
from fxviz.capture._common import first_line, front_end, module_types
from fxviz.capture.places import caller, running_method
from fxviz.capture.info import GraphInfo, set_graph_info
from fxviz.capture.places import where
from fxviz.errors import TraceError

Tracer = torch.fx.Tracer
MAX_FALLBACK_LEAVES = 32


def capture(
    model: nn.Module,
    *,
    tracer: str | type[Tracer] | Tracer = "symbolic",
    leaf_modules: Iterable[str | type[nn.Module]] = (),
    lower: Iterable[str | type[nn.Module]] = (),
    concrete_args: dict[str, Any] | None = None,
    fallback: bool = False,
    keywords: tuple[int, tuple[str, ...]] = (0, ()),
) -> torch.fx.GraphModule:
    """Symbolically trace ``model`` (see :func:`fxviz.trace` for the options); ``keywords``:
    how many positional inputs it is given and the names of its keyword inputs, which the
    graph then takes right after them (:func:`_keywords_last`)."""
    if not isinstance(model, nn.Module):
        raise TraceError(
            f"The symbolic tracer needs an nn.Module, got {type(model).__name__}. "
            "Use tracer='make_fx' with example inputs to trace a plain function."
        )
    leaves = set(leaf_modules)
    added: list[str] = []
    # Tracing stores tensors created in forward as attributes on the root: trace new
    # module objects over the same tensors, so the model itself gains nothing.
    root = skeleton(model, clone_buffers=False)
    while True:
        tracer_obj = _make_tracer(tracer, leaves, set(lower))
        try:
            graph = tracer_obj.trace(root, concrete_args=concrete_args)
        except Exception as exc:  # any trace failure becomes one clear TraceError
            path, culprit = _failing_module(exc, root)
            if fallback and path and len(added) < MAX_FALLBACK_LEAVES and path not in leaves:
                leaves.add(path)
                added.append(path)
                continue
            raise trace_error(exc, path, culprit, fallback=fallback, leaves_added=added) from exc
        break
    if keywords[1]:
        _keywords_last(graph, *keywords)
    try:  # code made on first use (a first view runs the graph node by node), except where torch's
        # quoting of a target fails ('getattr(self, "a"b")'): then now, so that auto tries the next method
        gm = code_on_first_use(tracer_obj.root, graph, type(model).__name__)
        if any(set(str(n.target)) & {'"', "\\"} for op in ("call_module", "get_attr") for n in graph.find_nodes(op=op)):
            code_made(gm)
    except SyntaxError as exc:
        raise TraceError(
            f"torch.fx traced the model but cannot generate Python code for it ({exc.msg}: "
            f"{(exc.text or '').strip()}). A module or attribute name with quotes or brackets "
            "is the usual cause: rename it (nn.Module.add_module) and trace again."
        ) from exc
    gm.graph.output_node().meta["module_path"] = None  # the output belongs to no module
    set_graph_info(gm, GraphInfo(tracer=type(tracer_obj).__name__, leaves_added=added, module_types=module_types(model)))
    return gm


def _keywords_last(graph: torch.fx.Graph, count: int, names: tuple[str, ...]) -> None:
    """Order the placeholders (forward's parameters) as fxviz passes the inputs: the first
    ``count``, then those named ``names``, then the rest (left at their defaults); the
    given ones lose their defaults, so the code stays valid Python."""
    placeholders = list(graph.find_nodes(op="placeholder"))
    by_name = {str(node.target): node for node in placeholders}
    missing = [name for name in names if name not in by_name]
    if missing or any(str(node.target).startswith("*") for node in placeholders[:count]):
        raise TraceError(f"Symbolic tracing passes keyword inputs only to named parameters of forward, not "
                         f"{', '.join(missing) or 'after *args'}: use tracer='export' or 'make_fx'.")
    given = [*placeholders[:count], *(by_name[name] for name in names)]
    order = given + [node for node in placeholders if node not in given]
    for node in given:
        node.args = ()
    for before, node in zip([None, *order], order):
        if before is None:
            next(iter(graph.nodes)).prepend(node)
        else:
            before.append(node)


def _make_tracer(
    tracer: str | type[Tracer] | Tracer, leaves: set, lower: set
) -> Tracer:
    if tracer == "symbolic":
        base: type[Tracer] = Tracer
    elif isinstance(tracer, type) and issubclass(tracer, Tracer):
        base = tracer
    elif isinstance(tracer, Tracer):
        base = type(tracer)
    else:
        raise TraceError(
            f"Unknown tracer {tracer!r}: use 'symbolic', 'make_fx' or a torch.fx.Tracer subclass."
        )
    cls = type(f"FxViz{base.__name__}", (_ModulePathMixin, base), {})
    obj = cls() if not isinstance(tracer, Tracer) else _rebase(tracer, cls)
    obj.fxviz_leaves = leaves
    obj.fxviz_lower = lower
    return obj


def _rebase(instance: Tracer, cls: type) -> Tracer:
    """A copy of the user's tracer instance (its settings kept) with our mixin on top."""
    clone = cls.__new__(cls)
    clone.__dict__.update(instance.__dict__)
    return clone


def _matches(module: nn.Module, path: str, specs: set) -> bool:
    for spec in specs:
        if isinstance(spec, str):
            if spec == path or spec == type(module).__name__:
                return True
        elif isinstance(spec, type) and isinstance(module, spec):
            return True
    return False


class _ModulePathMixin:
    """Records the current module path on every node (the tutorial's module-path tracer)."""

    fxviz_leaves: set
    fxviz_lower: set

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        if _matches(m, module_qualified_name, self.fxviz_leaves):
            return True
        if _matches(m, module_qualified_name, self.fxviz_lower):
            return False
        return super().is_leaf_module(m, module_qualified_name)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, *rest, **kw):
        if kind == "call_function" and kwargs.get("inplace") and self._in_lowered_module():
            # A lowered module becomes a pure function call, safe for passes to move or share.
            kwargs = {**kwargs, "inplace": False}
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, *rest, **kw)
        proxy.node.meta["module_path"] = running_method(self._module_ids(), self.scope.module_path)
        return proxy

    def _module_ids(self) -> dict[int, str]:
        """Each module of the root by ``id``, made once: a method's ops go to its module."""
        if "_fxviz_modules" not in self.__dict__:
            self._fxviz_modules = {id(m): path for path, m in self.root.named_modules()}
        return self._fxviz_modules

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Any]) -> Any:
        """torch's Tracer.getattr, with each weight found in a table made once: torch's walks
        every parameter of the model for each one read (a fifth of convnext_nano's trace)."""
        if not isinstance(attr_val, torch.Tensor):
            return attr_val
        name = self._weight_name(attr_val, buffers=self.proxy_buffer_attributes)
        if name is None:  # a tensor made since (tracing stores some on the root)
            return super().getattr(attr, attr_val, parameter_proxy_cache)
        if name not in parameter_proxy_cache:
            parameter_proxy_cache[name] = self.create_proxy("get_attr", name, (), {})
        return parameter_proxy_cache[name]

    def create_arg(self, a: Any) -> Any:
        """torch's, with a weight passed as an argument (``F.batch_norm(x, self.running_mean, ...)``)
        found in the table: torch walks every buffer of the model for each (timm's
        ghostnetv3: 236k walks, 2 of a 2.4 s trace)."""
        if isinstance(a, torch.Tensor):
            name = self._weight_name(a, buffers=True)
            if name is not None:
                return self.create_node("get_attr", name, (), {})
        return super().create_arg(a)

    def _weight_name(self, tensor: torch.Tensor, *, buffers: bool) -> str | None:
        """The name torch would find for a parameter (or, with ``buffers``, a buffer) of the
        root, from tables made once; None for any other tensor."""
        if "_fxviz_weights" not in self.__dict__:  # id -> (name, tensor): the tensor tells a reused id
            self._fxviz_weights = ({id(t): (n, t) for n, t in self.root.named_parameters()},
                                   {id(t): (n, t) for n, t in self.root.named_buffers()})
        parameters, buffers_ = self._fxviz_weights
        found = parameters.get(id(tensor)) if isinstance(tensor, nn.Parameter) else None
        found = found or (buffers_.get(id(tensor)) if buffers else None)
        return None if found is None or found[1] is not tensor else found[0]

    def _in_lowered_module(self) -> bool:
        module_type = self.scope.module_type
        return module_type is not None and any(
            spec == module_type.__name__ if isinstance(spec, str) else issubclass(module_type, spec)
            for spec in self.fxviz_lower
        )


def _failing_module(exc: BaseException, root: nn.Module) -> tuple[str | None, nn.Module | None]:
    """The innermost module whose forward was running when tracing failed."""
    paths = {id(m): name for name, m in root.named_modules()}
    found: tuple[str | None, nn.Module | None] = (None, None)
    tb = exc.__traceback__
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if isinstance(candidate, nn.Module) and id(candidate) in paths:
            found = (paths[id(candidate)], candidate)
        tb = tb.tb_next
    return found


def trace_error(exc: BaseException, path: str | None, culprit: nn.Module | None, *,
                fallback: bool = False, leaves_added: list[str] = ()) -> TraceError:
    """What failed, where in the user's code, and only the advice that works here."""
    place = "the top-level module" if not path else f"module '{path}'"
    if culprit is not None:
        place += f" ({type(culprit).__name__})"
    fn = caller()
    auto = (f"or let {fn} pick the capture: tracer='auto' (the default) falls back to torch.export, "
            "make_fx and dynamo's graphs")
    if isinstance(exc, ValueError) and "co_varnames" in str(exc):  # torch.fx's _patch_function on a (*args, **kwargs)
        return TraceError(f"Cannot trace {place}: its forward is a decorator's wrapper taking *args and **kwargs "
                          f"(as transformers' models have), whose arguments torch.fx's symbolic tracer cannot "
                          f"name\n  {first_line(exc)}\n  What to do: {auto.removeprefix('or ')}.")
    if path:
        fixes = [f"keep it whole: {fn}(..., leaf_modules=[{path!r}]) (or fallback=True to do this for "
                 "every failing submodule)"]
    elif fallback:
        fixes = ["fallback=True cannot help: it can only keep failing submodules as leaves, and this "
                 "code is in the top-level forward" + (f" (it made {', '.join(leaves_added)} leaves first)"
                                                       if leaves_added else "")]
    else:
        fixes = []
    fixes += ["pass concrete_args={...} to fix the argument that steers the branch, or wrap "
              "free functions with torch.fx.wrap", auto]
    return TraceError(f"Cannot trace {place}{where(exc)}\n  {first_line(exc)}\n  What to do: "
                      + "; ".join(fixes) + ".")


front_end("symbolic", auto=10, needs_module=True, needs_inputs=False,
          options=("leaf_modules", "lower", "concrete_args", "fallback"), about=(
              "torch.fx symbolic tracing: the modules, functions and methods the model's forward calls"))(
    lambda r: capture(r.model, tracer=r.tracer, keywords=(len(r.args), r.keywords), **r.options))

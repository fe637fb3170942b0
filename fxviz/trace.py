"""Tracing front-ends: a model or function in, a GraphModule with module paths out.

Every node gets ``node.meta["module_path"]``: the qualified name of the module that
emitted it (``''`` for the top level, ``None`` for the output node). That one string
is what lets a graph of hundreds of nodes be drawn as nested module clusters.
"""
from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.fx
from torch import nn

from fxviz._cow import skeleton
from fxviz.errors import TraceError

Tracer = torch.fx.Tracer
_TORCH_DIR = os.path.dirname(torch.__file__)
MAX_FALLBACK_LEAVES = 32


def trace(
    model: nn.Module | Callable[..., Any],
    example_inputs: Any = None,
    *,
    tracer: str | type[Tracer] | Tracer = "symbolic",
    leaf_modules: Iterable[str | type[nn.Module]] = (),
    lower: Iterable[str | type[nn.Module]] = (),
    concrete_args: dict[str, Any] | None = None,
    fallback: bool = False,
    module: nn.Module | None = None,
) -> torch.fx.GraphModule:
    """Trace ``model`` into a GraphModule whose nodes know their module path.

    ``tracer`` is ``"symbolic"`` (torch.fx's Python-level tracer; keeps ``nn`` modules
    as call_module leaves), ``"make_fx"`` (ATen-level, runs ``model(*example_inputs)``;
    works for plain functions and torch.func transforms such as ``jacrev``/``vmap``),
    or a ``torch.fx.Tracer`` subclass or instance of your own.

    ``leaf_modules``: module paths (``"layer1.0"``) or types kept as one node.
    ``lower``: module types (or type names such as ``"ReLU"``) to trace *through*, e.g.
    lowering ``nn.ReLU`` gives a call_function to ``torch.nn.functional.relu``.
    ``fallback=True`` retries a failing trace with the failing submodule as a leaf and
    records which modules it had to treat so in ``gm.meta["fxviz"]["leaves_added"]``.
    ``module``: with make_fx and a plain function (e.g. a training step), the model it
    calls, so that forward nodes get module paths too.

    The returned GraphModule shares parameters and buffers with ``model`` (its module
    objects are its own, so nothing of the model is changed, not even by tracing).
    """
    if tracer == "make_fx":
        if leaf_modules or lower or concrete_args:
            raise TraceError(
                "leaf_modules, lower and concrete_args apply to the symbolic tracer only; "
                "make_fx always traces down to ATen operators."
            )
        return _trace_make_fx(model, example_inputs, module)
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
            raise _trace_error(exc, path, culprit) from exc
        break
    try:
        gm = torch.fx.GraphModule(tracer_obj.root, graph, type(model).__name__)
    except SyntaxError as exc:
        raise TraceError(
            f"torch.fx traced the model but cannot generate Python code for it ({exc.msg}: "
            f"{(exc.text or '').strip()}). A module or attribute name with quotes or brackets "
            "is the usual cause: rename it (nn.Module.add_module) and trace again."
        ) from exc
    gm.graph.output_node().meta["module_path"] = None  # the output belongs to no module
    gm.meta["fxviz"] = {
        "tracer": type(tracer_obj).__name__,
        "leaves_added": added,
        "module_types": _module_types(model),
    }
    return gm


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
        proxy.node.meta["module_path"] = self.scope.module_path
        return proxy

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


def _user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame outside torch itself: the user's line that broke tracing."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_TORCH_DIR)]
    frames = [f for f in frames if not f.filename.startswith(os.path.dirname(__file__))]
    return frames[-1] if frames else None


def _trace_error(exc: BaseException, path: str | None, culprit: nn.Module | None) -> TraceError:
    where = "the top-level module" if not path else f"module '{path}'"
    if culprit is not None:
        where += f" ({type(culprit).__name__})"
    frame = _user_frame(exc)
    line = f" at {frame.filename}:{frame.lineno}: {frame.line}" if frame else ""
    fixes = [
        "pass concrete_args={...} to fix the argument that steers the branch",
        "wrap free functions with torch.fx.wrap",
        "or call trace(..., fallback=True) to keep failing submodules as leaves",
    ]
    if path:
        fixes.insert(0, f"mark it a leaf: trace(model, leaf_modules=[{path!r}])")
    else:
        fixes.append("or use tracer='make_fx', which follows the actual execution")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return TraceError(
        f"Cannot trace {where}{line}\n  {type(exc).__name__}: {first}\n  What to do: "
        + "; ".join(fixes) + "."
    )


def as_inputs(example_inputs: Any) -> tuple:
    """Example inputs as a tuple; a single tensor is accepted for convenience."""
    if example_inputs is None:
        return ()
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs)
    return (example_inputs,)


def _trace_make_fx(fn: Callable[..., Any], example_inputs: Any, module: nn.Module | None) -> torch.fx.GraphModule:
    from torch.fx.experimental.proxy_tensor import make_fx

    inputs = as_inputs(example_inputs)
    if not inputs:
        raise TraceError("make_fx traces by running the function: pass example_inputs.")
    root = fn if isinstance(fn, nn.Module) else module or getattr(fn, "_orig_mod", None)
    target = fn
    if root is not None and not hasattr(fn, "_orig_mod"):
        # make_fx records nn.Module paths only for callables that expose `_orig_mod`.
        def target(*args):
            return fn(*args)

        target._orig_mod = root
    try:
        gm = make_fx(target, record_module_stack=root is not None)(*inputs)
    except Exception as exc:
        frame = _user_frame(exc)
        line = f" at {frame.filename}:{frame.lineno}: {frame.line}" if frame else ""
        raise TraceError(
            f"make_fx could not trace {getattr(fn, '__name__', type(fn).__name__)}{line}\n"
            f"  {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}\n"
            "  What to do: make the function run on the example inputs as given, and avoid "
            "Python branches on tensor values (use torch.where / torch.cond)."
        ) from exc
    for node in gm.graph.nodes:
        node.meta["module_path"] = None if node.op == "output" else _path_from_stack(node)
    gm.meta["fxviz"] = {
        "tracer": "make_fx",
        "leaves_added": [],
        "module_types": _module_types(root) if root is not None else {},
    }
    return gm


def _module_types(model: nn.Module) -> dict[str, str]:
    """Class name per module path; the GraphModule itself keeps only plain containers."""
    return {path: type(m).__name__ for path, m in model.named_modules() if path}


def _path_from_stack(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path, _type = list(stack.values())[-1]
    return path


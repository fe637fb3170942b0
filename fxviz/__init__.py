"""fxviz: see and change torch.fx graphs.

The headless library. The Jupyter layer lives in ``fxviz.widgets`` and is only
imported by :func:`explore`, so ``import fxviz`` stays light and kernel-free; what the
first view does not need (profiling, comparisons, compiled graphs, with pandas and
matplotlib behind them) is imported on first use (:func:`__getattr__`). The cyclic
collector is paused while fxviz imports, here, there and in :func:`explore` (``gc_paused``):
modules are objects that stay, and a full collection that importing them set off rescanned the
whole heap, 0.15-0.35 s of a cold import after torchvision's (350k objects; after torch's
alone, none was set off).
"""
import importlib

from fxviz.background import _gc

with _gc.gc_paused():
    from fxviz.errors import (
        FxvizError, InputError, MeasureError, MissingDependency, NoSuchAttribute, NoSuchStep, PassError, RenderError,
        RunError, TraceError, UsageError,
    )
    from fxviz.present.markup import escape
    from fxviz.capture import trace
    from fxviz.annotation.shapes import annotate
    from fxviz.annotation.graph import to_networkx
    from fxviz.draw.render import Rendering, to_dot, to_svg
    from fxviz.checks.check import CheckResult, check_outputs
    from fxviz.session import Session, Step
    from fxviz import passes

__version__ = "0.1.0"

#: name -> the module it is imported from on first use: pandas alone is a third of a cold first view
LAZY = {"profile": "fxviz.timing.profiling", "plot_profile": "fxviz.timing.profiling", "profile_aten": "fxviz.timing.aten_breakdown",
        "Comparison": "fxviz.diff.comparison", "compare": "fxviz.diff.comparison",
        "Compiled": "fxviz.compiler.graphs", "compiled": "fxviz.compiler.graphs"}


def __getattr__(name):
    """``fxviz.profile`` and the other :data:`LAZY` names, imported when first read."""
    if name not in LAZY:
        raise NoSuchAttribute(f"module 'fxviz' has no attribute {name!r}")
    with _gc.gc_paused():
        value = globals()[name] = getattr(importlib.import_module(LAZY[name]), name)
    return value


def __dir__():
    return sorted({*globals(), *LAZY})


def _accepting_exported(draw):
    """``to_svg(ep)``/``to_dot(model)``: an ExportedProgram, a ``.pt2`` path or a module other
    than a GraphModule is captured first (:func:`trace`: a module symbolically, as torchview
    draws a model without a trace of its own)."""
    import functools

    import torch

    from fxviz.capture import export

    @functools.wraps(draw)
    def wrapper(source, **options):
        traced = export.is_exported(source) or (isinstance(source, torch.nn.Module) and
                                                not isinstance(source, torch.fx.GraphModule))
        return draw(trace(source) if traced else source, **options)

    return wrapper


to_svg, to_dot = _accepting_exported(to_svg), _accepting_exported(to_dot)


def explore(model_or_session, *example_inputs, **options):
    """The Explorer widget on a model (traced here) or on an existing :class:`Session`;
    keywords that are no fxviz option go to the model (``explore(t5, ids, decoder_input_ids=dec)``)."""
    with _gc.gc_paused():  # as fxviz's own import
        from fxviz.widgets import explore as _explore

    return _explore(model_or_session, *example_inputs, **options)


__all__ = [
    "FxvizError", "TraceError", "PassError", "RenderError", "RunError", "MeasureError", "InputError",
    "UsageError", "NoSuchStep", "NoSuchAttribute", "MissingDependency", "escape",
    "trace", "annotate", "to_networkx", "Rendering", "to_dot", "to_svg",
    "profile", "profile_aten", "plot_profile", "CheckResult", "check_outputs",
    "Comparison", "compare", "Session", "Step", "passes", "explore", "Compiled", "compiled",
]

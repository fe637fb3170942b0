"""Graph passes and their registry.

A pass is a function ``fn(gm, *, nodes=None, **params)``; :func:`register` makes
it available to a Session (``session.apply("name", ...)``) and the UI, exactly
like the built-ins below. See :mod:`fxviz.passes.registry` for the contract.
"""
from fxviz.passes.registry import (
    NothingToDo,
    PassParam,
    PassSpec,
    available,
    describe,
    get,
    register,
    resolve,
    unregister,
)
from fxviz.passes.fusion import fuse_conv_bn
from fxviz.passes.lowering import lower_modules
from fxviz.passes.replace import replace_op
from fxviz.passes.inline import inline_module
from fxviz.passes.cleanup import eliminate_dead_code
from fxviz.passes.memory_format import channels_last
from fxviz.passes.quantize import fake_quantize
from fxviz.passes.decompose import run_decompositions

__all__ = [
    "NothingToDo", "PassParam", "PassSpec", "available", "describe", "get", "register", "resolve", "unregister",
    "fuse_conv_bn", "lower_modules", "replace_op", "inline_module", "eliminate_dead_code",
    "channels_last", "fake_quantize", "run_decompositions",
]

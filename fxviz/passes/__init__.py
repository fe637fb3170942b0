"""Graph passes and their registry.

A pass is a function ``fn(gm, *, nodes=None, **params)``; :func:`register` makes
it available to a Session (``session.apply("name", ...)``) and the UI, exactly
like the built-ins. See :mod:`fxviz.passes.registry` for the contract.

Every module of this package is imported here, and the built-in passes register
themselves (``@register(order=...)``): a new built-in pass is one module. Each is also
importable from here under its function's name (``fxviz.passes.fuse_conv_bn``).
"""
from fxviz.discovery import import_modules
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

MODULES = import_modules(__name__, __path__)
#: The passes this package's modules registered, in the Passes tab's order.
BUILT_INS = tuple(name for name in available() if get(name).fn.__module__ in MODULES)
globals().update({get(name).fn.__name__: get(name).fn for name in BUILT_INS})

__all__ = ["BUILT_INS", "NothingToDo", "PassParam", "PassSpec", "available", "describe", "get", "register",
           "resolve", "unregister", *(get(name).fn.__name__ for name in BUILT_INS)]

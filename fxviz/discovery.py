"""Packages whose modules register what they define (passes, capture front-ends):
importing every module of the package registers them, so adding one is adding a file."""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable


def import_modules(package: str, path: Iterable[str]) -> tuple[str, ...]:
    """Import every module of ``package`` (its ``__path__``), by name; returns their names.

    >>> import fxviz.passes
    >>> "fxviz.passes.fusion" in import_modules("fxviz.passes", fxviz.passes.__path__)
    True
    """
    names = sorted(info.name for info in pkgutil.iter_modules(path, f"{package}."))
    for name in names:
        importlib.import_module(name)
    return tuple(names)

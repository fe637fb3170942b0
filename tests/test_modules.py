"""Every ``fxviz.*`` module imports by name and is a module (no function shadows it), and
the examples in its docstrings run and print what they say."""
import doctest
import importlib
import pkgutil
import types

import pytest

import fxviz
import fxviz.widgets


def _modules() -> list[str]:
    """``fxviz.widgets`` is ``widgets/`` (setuptools' package-dir), not a folder of fxviz/: walked on its own."""
    names = {"fxviz.widgets", *(info.name for info in pkgutil.walk_packages(fxviz.__path__, "fxviz."))}
    names |= {info.name for info in pkgutil.walk_packages(fxviz.widgets.__path__, "fxviz.widgets.")}
    return sorted(names)


MODULES = _modules()


def test_every_fxviz_module_imports_by_name_as_a_module():
    assert {"fxviz.widgets.explorer", "fxviz.capture.dynamo", "fxviz.passes.registry", "fxviz.draw.render"} <= set(MODULES)
    for name in MODULES:
        module = importlib.import_module(name)
        assert isinstance(module, types.ModuleType) and module.__name__ == name
        parent, _, child = name.rpartition(".")
        # ``fxviz.draw.render`` reached by attribute, as a user types it, is the module too.
        assert getattr(importlib.import_module(parent), child) is module, f"{name} is shadowed"


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (run doctest on it)"


def test_there_are_examples_to_run():
    finder = doctest.DocTestFinder()
    examples = sum(len(test.examples) for name in MODULES for test in finder.find(importlib.import_module(name)))
    assert examples >= 10

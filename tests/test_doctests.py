"""The examples in fxviz's docstrings run and print what they say (``doctest`` on every module)."""
import doctest
import importlib
import pkgutil

import pytest

import fxviz

MODULES = [info.name for info in pkgutil.walk_packages(fxviz.__path__, "fxviz.")]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (run doctest on it)"


def test_there_are_examples_to_run():
    finder = doctest.DocTestFinder()
    examples = sum(len(test.examples) for name in MODULES for test in finder.find(importlib.import_module(name)))
    assert examples >= 10

"""Source lines and module paths are read once per distinct text (nodes share a few dozen
stack traces): each node still gets the answer of its own text."""
from __future__ import annotations

import os
from types import SimpleNamespace

import torch

from fxviz.capture._common import path_from_stack
from fxviz.capture.places import source_line


def _trace(*frames: tuple[str, int]) -> str:
    return "".join(f'  File "{file}", line {line}, in forward\n    x = f(x)\n' for file, line in frames)


def test_each_stack_trace_gives_its_own_line_also_after_an_equal_one_was_read():
    torch_file = os.path.join(os.path.dirname(torch.__file__), "nn", "modules", "module.py")
    first = _trace(("/models/a.py", 10), (torch_file, 1775))
    other = _trace(("/models/a.py", 10), ("/models/b.py", 22), (torch_file, 1775))
    nodes = [SimpleNamespace(meta={"stack_trace": text}) for text in (first, other, "".join(first), "")]
    assert [source_line(n) for n in nodes] == ["/models/a.py:10", "/models/b.py:22", "/models/a.py:10", None]
    nodes[0].meta["stack_trace"] = other  # the node's text changed: its answer follows
    assert source_line(nodes[0]) == "/models/b.py:22"


def test_each_module_stack_gives_its_own_innermost_path():
    def node(*paths: str) -> SimpleNamespace:
        return SimpleNamespace(meta={"nn_module_stack": {f"k{i}": (p, "torch.nn.Linear") for i, p in enumerate(paths)}})

    nodes = [node("L['self'].layers.0", "L['self'].layers.0.mlp@1"), node("L['self'].layers.1"),
             node("L['self'].layers.0", "L['self'].layers.0.mlp"), node("L['self']"), node()]
    assert [path_from_stack(n) for n in nodes] == ["layers.0.mlp", "layers.1", "layers.0.mlp", "", ""]

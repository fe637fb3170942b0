"""One random stream for every run a check compares, and whether a run drew from it.

A graph that draws random numbers (dropout in training, torchvision's DropBlock2d and
StochasticDepth, timm's DropPath, a Python function wrapped for symbolic tracing) matches its
model only because both ran from one seed: the check says so. Its names cannot tell them all
(``F.dropout`` draws only in training, ``drop_block2d`` is opaque code): the generators' states do.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from fxviz._torch_internals import tree_leaves


@contextlib.contextmanager
def seeded(inputs: tuple, drew: list | None = None) -> Iterator[None]:
    """The same random stream for every run that is compared, restored afterwards; ``drew``
    gets True appended when the run drew from it (a generator's state moved)."""
    devices = _devices(inputs)
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(0)
        start = _states(devices) if drew is not None else ()
        yield
        if drew is not None and any(not torch.equal(a, b) for a, b in zip(start, _states(devices))):
            drew.append(True)


def _states(devices: list) -> list[torch.Tensor]:
    return [torch.get_rng_state(), *(torch.cuda.get_rng_state(d) for d in devices)]


def _devices(inputs: tuple) -> list:
    return sorted({x.device.index or 0 for x in tree_leaves(inputs) if isinstance(x, torch.Tensor) and x.is_cuda})

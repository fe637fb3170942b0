"""Running a GraphModule without leaving a trace on it."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


@contextlib.contextmanager
def preserved_buffers(module: nn.Module) -> Iterator[None]:
    """Restore every buffer afterwards: a training-mode BatchNorm updates its running
    statistics in place, and those buffers may be shared with the user's model."""
    saved = [(buf, buf.detach().clone()) for buf in module.buffers() if not buf.is_meta]  # meta: no values
    try:
        yield
    finally:
        with torch.no_grad():
            for buf, value in saved:
                if not torch.equal(buf, value):
                    buf.copy_(value)

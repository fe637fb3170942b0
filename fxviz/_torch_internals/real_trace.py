"""What makes make_fx's trace on real tensors cost more than the ops it records (bench/heavy_open.py).

- For each real tensor an op returns, make_fx keeps a fake copy in ``meta["val"]``, made under a
  ``FakeTensorMode`` created for that tensor alone, and a mode records the Python stack where
  it is created: a third of a detection model's trace (fasterrcnn_resnet50_fpn: 1,470 modes).
  :func:`one_fake_mode` makes those copies in one mode per trace (as torch.export's are): the
  same shapes, strides, dtypes and devices; and the graph no longer keeps every mode's stack
  (fasterrcnn's: 104k frame records, 29 MB of Python objects; now 6.5 MB in all).
- make_fx returns a GraphModule with its code compiled; fxviz renames the graph's parameters
  and inputs after it, and each rename compiled it again (3 compiles of pnasnet's training step).
  :func:`lazy_code` has the code made once, when the graph is first called or read.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx import _lazy_graph_module
from torch.fx.experimental import proxy_tensor

# The tracing thread's shared mode; other threads (a background profile) make their own.
_SHARED: contextvars.ContextVar[FakeTensorMode | None] = contextvars.ContextVar("fxviz_fake_mode", default=None)
_LOCK = threading.Lock()
_USERS = [0]  # traces under way that read proxy_tensor.FakeTensorMode as :func:`_mode`


def _mode(*args: Any, **kwargs: Any) -> FakeTensorMode:
    """proxy_tensor's ``FakeTensorMode(allow_fallback_kernels=True)`` for a real tensor's
    copy: the trace's shared mode; any other mode (make_fx's fake tracing) as torch makes it."""
    shared = _SHARED.get()
    if shared is None or args or kwargs != {"allow_fallback_kernels": True}:
        return FakeTensorMode(*args, **kwargs)
    return shared


@contextlib.contextmanager
def one_fake_mode() -> Iterator[None]:
    """While make_fx traces in this thread: the fake copies of real tensors share one mode."""
    token = _SHARED.set(FakeTensorMode(allow_fallback_kernels=True))
    with _LOCK:
        _USERS[0] += 1
        proxy_tensor.FakeTensorMode = _mode
    try:
        yield
    finally:
        _SHARED.reset(token)
        with _LOCK:
            _USERS[0] -= 1
            if not _USERS[0]:
                proxy_tensor.FakeTensorMode = FakeTensorMode


def lazy_code() -> contextlib.AbstractContextManager:
    """While make_fx traces: its GraphModule makes its code when first called or read
    (torch's ``_LazyGraphModule``, as inductor has it), not at once."""
    return _lazy_graph_module._use_lazy_graph_module(True)

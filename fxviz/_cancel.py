"""Cancelling a measurement in flight from another thread.

The scheduler's worker (:mod:`fxviz.measure`) runs each job inside
:func:`cancellable`; the measuring loops call :func:`stop_if_cancelled` between
forwards, and between nodes where one pass over the graph takes long (copying a
100,000-node graph to time it takes seconds). A context rather than an argument:
a step caches its profiles by their arguments, and whether a job is to stop is no
setting of the measurement.

>>> try:
...     with cancellable(lambda: True):
...         stop_if_cancelled()
... except Cancelled as error:
...     print(error)
The measurement was cancelled before it finished (its Explorer or scheduler was closed).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from fxviz.errors import Cancelled

_CANCELLED: ContextVar[Callable[[], bool] | None] = ContextVar("fxviz_cancelled", default=None)


@contextlib.contextmanager
def cancellable(cancelled: Callable[[], bool]) -> Iterator[None]:
    """Measurements run inside stop with :class:`~fxviz.errors.Cancelled` once
    ``cancelled()`` turns true (it is called from the measuring thread)."""
    token = _CANCELLED.set(cancelled)
    try:
        yield
    finally:
        _CANCELLED.reset(token)


def stop_if_cancelled() -> None:
    """Raise :class:`~fxviz.errors.Cancelled` if the job this runs in was cancelled."""
    cancelled = _CANCELLED.get()
    if cancelled is not None and cancelled():
        raise Cancelled("The measurement was cancelled before it finished (its Explorer or scheduler was closed).")

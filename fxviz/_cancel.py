"""Cancelling a measurement in flight from another thread.

The scheduler's worker (:mod:`fxviz.measure`) runs each job inside
:func:`cancellable`; the measuring loops call :func:`stop_if_cancelled` between
forwards, and between nodes where one pass over the graph takes long (copying a
100,000-node graph to time it takes seconds); a stretch that runs no model and cannot
stop (:func:`runs_no_model`) waits at its :func:`pause_point` calls while the kernel
acts, rather than share the interpreter with it. A context rather than an argument:
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
from contextlib import AbstractContextManager
from contextvars import ContextVar

from fxviz.errors import Cancelled

CLOSED = "The measurement was cancelled before it finished (its Explorer or scheduler was closed)."
_CANCELLED: ContextVar[Callable[[], bool] | None] = ContextVar("fxviz_cancelled", default=None)
_ASIDE: ContextVar[Callable[[bool], AbstractContextManager] | None] = ContextVar("fxviz_aside", default=None)
_HOLD: ContextVar[Callable[[], None] | None] = ContextVar("fxviz_hold", default=None)


@contextlib.contextmanager
def cancellable(cancelled: Callable[[], bool],
                aside: Callable[[bool], AbstractContextManager] | None = None,
                hold: Callable[[], None] | None = None) -> Iterator[None]:
    """Measurements run inside stop with :class:`~fxviz.errors.Cancelled` once
    ``cancelled()`` turns true (it is called from the measuring thread); ``aside(restart)``
    is entered around their stretches that run no model (:func:`runs_no_model`), and
    ``hold()`` is called at their pause points (:func:`pause_point`)."""
    tokens = _CANCELLED.set(cancelled), _ASIDE.set(aside), _HOLD.set(hold)
    try:
        yield
    finally:
        _CANCELLED.reset(tokens[0])
        _ASIDE.reset(tokens[1])
        _HOLD.reset(tokens[2])


@contextlib.contextmanager
def runs_no_model(*, restart: bool = True) -> Iterator[None]:
    """A stretch of a measurement that runs no model and cannot stop midway (generating
    and compiling a timed copy's code, parsing torch.profiler's trace: seconds at 100k
    nodes): the scheduler lets the kernel run the model meanwhile. If it did, the
    measurement then stops (:class:`~fxviz.errors.Cancelled`) to run again later
    (``restart``: its step may no longer be the one shown), or goes on where what it
    has is still valid (a trace recorded before). Hold no lock across it that the
    kernel may take meanwhile (a ``cached_property``'s, on Python < 3.12): it would
    wait for the measurement, which waits for it."""
    aside = _ASIDE.get()
    with aside(restart) if aside is not None else contextlib.nullcontext():
        yield


def pause_point() -> None:
    """Inside :func:`runs_no_model`: wait here while the kernel acts (the scheduler's
    ``hold``; :class:`~fxviz.errors.Cancelled` once it is closed), so an action does not
    share the interpreter's lock with seconds of code generation; else nothing. Called
    once per node: it costs a context variable's read while no kernel action waits."""
    hold = _HOLD.get()
    if hold is not None:
        hold()


def stop_if_cancelled() -> None:
    """Raise :class:`~fxviz.errors.Cancelled` if the job this runs in was cancelled."""
    cancelled = _CANCELLED.get()
    if cancelled is not None and cancelled():
        raise Cancelled(CLOSED)

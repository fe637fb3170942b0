"""Background work: a queue of jobs run one at a time by a worker thread, the kernel first.

The rule: **the kernel's thread waits for no job.** A kernel action that runs the model
(a pass's check, :meth:`Jobs.paused`) waits only for the worker's forward or node in
flight; one that runs none (an undo's redraw) not even for that. The kernel waits for the
whole queue only where it asks to: :meth:`Jobs.wait_idle` and :meth:`Jobs.close` (a
script, a test, the program's end). So:

- a job runs a model only in its turn (:meth:`Turns.worker`), which starts only while no
  kernel action waits or runs;
- a job stops (:class:`~fxviz.errors.Cancelled`) at its next stopping point
  (:func:`stop_if_cancelled`: between forwards and nodes) once the queue is closed or a
  kernel action waits; it is queued again unless closed;
- a stretch that runs no model and cannot stop (:func:`runs_no_model`: compiling timed
  code, parsing a profiler trace) steps aside: the kernel does not wait for it, and it
  waits at its :func:`pause_point` calls while the kernel acts;
- progress goes to one callback, ``(what, done, total)`` (total 0: idle);
- a test waits for a state (:meth:`Turns.wait_until`, :meth:`Jobs.wait_idle`), never for
  the clock.

Whether a job is to stop is a context (:func:`cancellable`), not an argument: a step
caches its profiles by their arguments, and stopping is no setting of a measurement.

>>> try:
...     with cancellable(lambda: True):
...         stop_if_cancelled()
... except Cancelled as error:
...     print(error)
The measurement was cancelled before it finished (its Explorer or scheduler was closed).
"""
from __future__ import annotations

import atexit
import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any

from fxviz.errors import Cancelled

CLOSED = "The measurement was cancelled before it finished (its Explorer or scheduler was closed)."
#: A pause before each batch: the kernel first sends the redraw it just made to the browser.
START_DELAY_S = 0.5
Progress = Callable[[str, int, int], Any]  # (what, done, total); total 0: idle
_CANCELLED: ContextVar[Callable[[], bool] | None] = ContextVar("fxviz_cancelled", default=None)
_ASIDE: ContextVar[Callable[[bool], AbstractContextManager] | None] = ContextVar("fxviz_aside", default=None)
_HOLD: ContextVar[Callable[[], None] | None] = ContextVar("fxviz_hold", default=None)
_RUNNING: weakref.WeakSet[Jobs] = weakref.WeakSet()  # those with a worker thread


@contextlib.contextmanager
def cancellable(cancelled: Callable[[], bool], aside: Callable[[bool], AbstractContextManager] | None = None,
                hold: Callable[[], None] | None = None) -> Iterator[None]:
    """Jobs run inside stop once ``cancelled()`` (called from their thread) turns true;
    ``aside(restart)`` is entered around their :func:`runs_no_model` stretches and
    ``hold()`` called at their :func:`pause_point` calls."""
    tokens = _CANCELLED.set(cancelled), _ASIDE.set(aside), _HOLD.set(hold)
    try:
        yield
    finally:
        _CANCELLED.reset(tokens[0])
        _ASIDE.reset(tokens[1])
        _HOLD.reset(tokens[2])


@contextlib.contextmanager
def runs_no_model(*, restart: bool = True) -> Iterator[None]:
    """A stretch that runs no model and cannot stop midway: the kernel may run the model
    meanwhile, after which the job stops to run again (``restart``: its step may no
    longer be the one shown) or goes on (what it has is still valid). Hold no lock across
    it that the kernel may take (a ``cached_property``'s, before Python 3.12)."""
    aside = _ASIDE.get()
    with aside(restart) if aside is not None else contextlib.nullcontext():
        yield


def pause_point() -> None:
    """Inside :func:`runs_no_model`: wait here while the kernel acts (``Cancelled`` once
    closed), rather than share the interpreter's lock with it; else nothing."""
    hold = _HOLD.get()
    if hold is not None:
        hold()


def stop_if_cancelled() -> None:
    """Raise :class:`~fxviz.errors.Cancelled` if the job this runs in was cancelled."""
    cancelled = _CANCELLED.get()
    if cancelled is not None and cancelled():
        raise Cancelled(CLOSED)


class Turns:
    """Who runs: ``waiting``: kernel actions waiting or running; ``generation`` counts them
    and other disturbances (a profile taken across one is taken again); ``held``: the
    worker waits for a kernel action to end (1) or not (0). Every change wakes
    :meth:`wait_until`."""

    def __init__(self) -> None:
        self._gate = threading.Condition()  # guards the fields
        self._busy = False  # the worker runs a model (or holds its turn)
        self.waiting, self.generation, self.closed, self.held = 0, 0, False, 0

    def disturb(self) -> None:
        with self._gate:
            self.generation += 1

    def close(self) -> None:
        """Nothing waits for a kernel action any more; held jobs stop (:class:`Cancelled`)."""
        with self._gate:
            self.closed = True
            self._gate.notify_all()

    def after_kernel(self) -> None:
        """Wait while a kernel action waits or runs (or until closed)."""
        with self._gate:
            self._held(self._kernel_done)

    def _kernel_done(self) -> bool:
        return not self.waiting or self.closed

    def _held(self, done: Callable[[], bool]) -> None:
        """Under the gate: the worker waits for ``done()``, counted in ``held`` meanwhile."""
        if done():
            return
        self.held += 1
        self._gate.notify_all()
        try:
            self._gate.wait_for(done)
        finally:
            self.held -= 1

    def wait_until(self, ready: Callable[[], bool]) -> None:
        """Block until ``ready()`` (read under the lock at each change) holds."""
        with self._gate:
            self._gate.wait_for(ready)

    @contextlib.contextmanager
    def kernel(self, alone: bool = True) -> Iterator[None]:
        """A kernel action: the job stops at its next stopping point or waits at its next
        pause point, and none starts meanwhile; ``alone`` (it runs the model): it waits for
        the worker's model run in flight to stop (a check, to end)."""
        with self._gate:
            self.waiting += 1
            self.generation += 1
            self._gate.notify_all()
        try:  # an interrupt (Ctrl+C) while waiting must not leave the worker waiting for this action
            with self._gate:
                self._gate.wait_for(lambda: not alone or not self._busy)
            yield
        finally:
            with self._gate:
                self.waiting -= 1
                self._gate.notify_all()

    @contextlib.contextmanager
    def worker(self) -> Iterator[None]:
        """The worker's turn to run a model: only while no kernel action waits or runs."""
        with self._gate:
            self._held(lambda: not self.waiting)
            self._busy = True
        try:
            yield
        finally:
            with self._gate:
                self._busy = False
                self._gate.notify_all()

    @contextlib.contextmanager
    def aside(self, restart: bool) -> Iterator[None]:
        """A :func:`runs_no_model` stretch of the worker's turn (see there)."""
        with self._gate:
            self._busy, generation = False, self.generation
            self._gate.notify_all()
        try:
            yield
        finally:
            with self._gate:  # one hold of the lock: no kernel action starts in between
                self._held(self._kernel_done)
                self._busy, disturbed = True, generation != self.generation
        if disturbed and restart:
            raise Cancelled("A kernel action ran meanwhile: the measurement runs again (its timed code is kept).")

    def hold(self) -> None:
        """A :func:`pause_point`: while a kernel action waits or runs, wait for its end (a
        thread's share of the interpreter's lock is half while both run Python). In a turn
        that runs a model (the kernel waits for that), nothing."""
        if self.waiting and not self._busy:
            self.after_kernel()
        if self.closed:
            raise Cancelled(CLOSED)


@atexit.register
def _close_all(timeout: float = 5.0) -> None:
    """At exit, cancel the workers' jobs and wait up to ``timeout`` s in all for them to
    stop: a daemon thread killed inside a torch op aborts the process."""
    running = list(_RUNNING)
    for jobs in running:  # all told first: their runs end together
        jobs.stop()
    deadline = time.monotonic() + timeout
    for jobs in running:
        if jobs.worker is not None and jobs.worker is not threading.current_thread():
            jobs.worker.join(max(0.0, deadline - time.monotonic()))


class Jobs:
    """The queue: :meth:`submit` puts a job in; the worker thread (started then) takes all
    queued jobs at once and calls ``run(batch)``, which runs each part in :meth:`turn`."""

    def __init__(self, run: Callable[[list], Any], progress: Progress | None = None, name: str = "fxviz-measure"):
        self._run, self._name = run, name
        self.progress = progress or (lambda *_: None)
        self.turns = Turns()
        self._wake = threading.Condition()  # guards the queue; wakes the worker and wait_idle()
        self._pending: list = []
        self._idle = True  # no batch taken from the queue is being run
        self.worker: threading.Thread | None = None
        self.closed = False

    def submit(self, *jobs: Any, first: bool = False) -> None:
        """Queue ``jobs`` (``first``: before the others, a cancelled batch's turn again)."""
        if not first:
            self.progress("queued", 0, 1)  # at once: the worker may be busy with earlier jobs
        with self._wake:
            at = 0 if first else len(self._pending)
            self._pending[at:at] = jobs
            self._wake.notify_all()
        if self.worker is None:
            self.worker = threading.Thread(target=self._serve, name=self._name, daemon=True)
            _RUNNING.add(self)
            self.worker.start()

    def paused(self, alone: bool = True) -> AbstractContextManager:
        """A kernel action (:meth:`Turns.kernel`)."""
        return self.turns.kernel(alone)

    @property
    def on_worker(self) -> bool:
        return threading.current_thread() is self.worker

    def cancelled(self) -> bool:
        """Whether the job in flight is to stop: closed, or a kernel action waits while the
        worker runs it (a job the kernel runs itself, "sync", stops only when closed)."""
        return self.closed or (self.turns.waiting > 0 and self.on_worker)

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """Where one part of a job runs: on the worker, in its turn and cancellable;
        on the caller's thread ("sync"), cancellable once closed."""
        if not self.on_worker:
            with cancellable(self.cancelled):
                yield
            return
        with self.turns.worker(), cancellable(self.cancelled, self.turns.aside, self.turns.hold):
            yield

    def wait_idle(self) -> None:
        """Block until nothing is queued or run (or closed). Not inside :meth:`paused`."""
        with self._wake:
            self._wake.wait_for(lambda: self.closed or (self._idle and not self._pending))

    def close(self, timeout: float = 10.0) -> None:
        """:meth:`stop`, and wait (up to ``timeout`` s) for the worker."""
        self.stop()
        if self.worker is not None and not self.on_worker:
            self.worker.join(timeout)

    def stop(self) -> None:
        """Drop the queue and cancel the job in flight."""
        with self._wake:
            self.closed = True
            self._pending.clear()
            self._wake.notify_all()
        self.turns.close()

    def _serve(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(lambda: self._pending or self.closed)
                if self.closed or self._wake.wait_for(lambda: self.closed, START_DELAY_S):
                    return
            self.turns.after_kernel()  # a kernel action first: what it asks for joins this batch
            with self._wake:
                if self.closed:
                    return
                batch, self._pending, self._idle = self._pending, [], False
            try:
                self._run(batch)
            finally:
                del batch  # while idle, hold nothing alive
                with self._wake:
                    self._idle = True
                    self._wake.notify_all()

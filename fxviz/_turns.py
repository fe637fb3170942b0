"""Turns between the kernel and a measuring worker thread: the kernel's actions go first.

A kernel action that runs the model (a pass's check) waits only for the model run in
flight to end, one that runs none (an undo's redraw) not even for that: the worker's
measuring loops stop at their next stopping point (:mod:`fxviz._cancel`), and nothing of
the worker's starts while an action waits or runs. A stretch of a job that runs no model (generating timed code) steps aside
(:meth:`Turns.aside`): the kernel does not wait for it, and it waits at its pause points
(:meth:`Turns.hold`) while the kernel acts. Every change of the turns wakes
:meth:`Turns.wait_until`: a test waits for a state (an action waiting, the worker held),
not for the clock.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from fxviz._cancel import CLOSED
from fxviz.errors import Cancelled


class Turns:
    """``waiting``: kernel actions waiting or running; ``generation``: counts the actions
    and other disturbances (a profile taken across one is taken again); ``held``: the
    worker waits for a kernel action to end (1) or not (0)."""

    def __init__(self) -> None:
        self._gate = threading.Condition()  # guards the fields: the kernel goes first
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
        """Block until ``ready()`` (read under the lock at each change: an action begun or
        ended, the worker held, busy or free, the turns closed) holds."""
        with self._gate:
            self._gate.wait_for(ready)

    @contextlib.contextmanager
    def kernel(self, alone: bool = True) -> Iterator[None]:
        """A kernel action: the worker's job stops at its next stopping point or waits at its
        next pause point, and none starts meanwhile; ``alone`` (it runs the model): it waits
        for the worker's model run in flight to stop (a check, to end)."""
        with self._gate:
            self.waiting += 1
            self.generation += 1
            self._gate.notify_all()  # for :meth:`wait_until`
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
        """Within the worker's turn, a stretch that runs no model: a kernel action may run
        meanwhile, after which the job stops, to run again (``restart``: see ``runs_no_model``)."""
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
        """A pause point of a stretch aside (see ``pause_point``): while a kernel action
        waits or runs, wait for its end rather than take the interpreter's lock from it
        (a thread's share of it is half while both run Python). In a turn that runs a
        model (the kernel waits for that), nothing."""
        if self.waiting and not self._busy:
            self.after_kernel()
        if self.closed:
            raise Cancelled(CLOSED)

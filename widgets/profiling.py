"""Profiles and numeric checks for the Explorer, computed without freezing the notebook.

Checking and profiling a large model take seconds, so in ``"background"`` mode the
Profiler runs them one step at a time on a worker thread, shows a progress bar, and
calls back when they are known; ``"sync"`` runs them on the caller's thread (tests);
``"off"`` profiles only when asked (``force=True``) but still checks each step inline,
since the step's badge needs it. A step's timings are exactly
``step.profile(**profile_kwargs)`` and ``fxviz.profiling.profile_aten(step.gm,
step.example_inputs)``: what a notebook gets from the same calls.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import ipywidgets as w
import pandas as pd

from fxviz.comparison import Comparison, compare
from fxviz.profiling import profile_aten

MODES = ("background", "sync", "off")
START_DELAY_S = 0.5
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Timings:
    """What profiling found for one step: the per-node ``table`` or the ``error`` (an
    exception's text, also for Ctrl-C) that stopped it; then the ATen operators per
    node (``aten``, None until measured) or ``aten_error``."""

    table: pd.DataFrame | None = None
    error: str = ""
    aten: pd.DataFrame | None = None
    aten_error: str = ""


class Profiler:
    """Computes :class:`Timings` per step, one measurement at a time, and remembers them."""

    def __init__(self, mode: str = "background", profile_kwargs: Mapping[str, Any] | None = None):
        if mode not in MODES:
            raise ValueError(f"profile must be one of {', '.join(map(repr, MODES))}, not {mode!r}.")
        self.mode = mode
        self.kwargs = dict(profile_kwargs or {})
        self.progress = w.IntProgress(value=0, min=0, max=1, description="profiling", bar_style="info",
                                      layout=w.Layout(display="none", width="220px"))
        self.progress.add_class("fxviz-progress")
        self._known: weakref.WeakKeyDictionary[Any, Timings] = weakref.WeakKeyDictionary()
        self._gate = threading.Condition()  # guards _busy and _waiting: the kernel goes first
        self._busy = False
        self._waiting = 0
        self._wake = threading.Condition()  # guards the queue below
        self._pending: list[Any] = []
        self._callbacks: list[Callable[[], Any]] = []
        self._worker: threading.Thread | None = None
        self._closed = False

    def known(self, step: Any) -> Timings | None:
        """The step's timings once its per-node profile has finished (or failed), else None."""
        return self._known.get(step)

    def comparison(self, step_a: Any, step_b: Any) -> Comparison:
        """``fxviz.comparison.compare`` of two steps, timed with this profiler's settings."""
        return compare(step_a, step_b, profile_kwargs=self.kwargs)

    def request(self, steps: Iterable[Any], then: Callable[[], Any], *, force: bool = False) -> bool:
        """Make the timings of ``steps`` known. Returns True when work was queued for the
        worker thread, which calls ``then()`` when the profiles are known and again when
        the ATen breakdowns are; False when there is nothing left to wait for (known
        already, measured inline in "sync" mode, or "off" without ``force``), and
        ``then`` is not called. A failed step is tried again only with ``force``."""
        todo = [s for s in dict.fromkeys(steps) if self._stale(s, force) or not s.check_done]
        if not todo:
            return False
        if self.mode == "off" and not force:  # the badge still needs the check; timing waits for a click
            for step in todo:
                self._check(step)
            return False
        if self.mode == "sync":
            self._run(todo, self._check, contextlib.nullcontext, "checking")
            self._run(todo, self._table, contextlib.nullcontext, "profiling")
            self._run(todo, self._aten, contextlib.nullcontext, "ATen ops")
            return False
        self.progress.layout.display = ""  # at once: the worker may be busy with earlier steps
        with self._wake:
            self._pending += [s for s in todo if s not in self._pending]
            self._callbacks.append(then)
            self._wake.notify()
        if self._worker is None:
            self._worker = threading.Thread(target=self._serve, name="fxviz-profiler", daemon=True)
            self._worker.start()
        return True

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Wait for the measurement in flight (at most about ``budget_s``) and start no
        other meanwhile. A pass's numeric check must not run the model concurrently with
        a profile: a training-mode BatchNorm writes its buffers, and two runs would skew
        each other's timings."""
        with self._gate:
            self._waiting += 1
            self._gate.wait_for(lambda: not self._busy)
        try:
            yield
        finally:
            with self._gate:
                self._waiting -= 1
                self._gate.notify_all()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the worker and wait (up to ``timeout`` s) for its measurement to end, so
        that no torch work is left running when the interpreter exits; pending requests
        are dropped."""
        with self._wake:
            self._closed = True
            self._pending.clear()
            self._callbacks.clear()
            self._wake.notify()
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout)

    def _stale(self, step: Any, force: bool) -> bool:
        known = self._known.get(step)
        return known is None or (force and bool(known.error))

    def _serve(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(lambda: self._pending or self._closed)
                if self._closed:
                    return
                steps, callbacks = self._pending, self._callbacks
                self._pending, self._callbacks = [], []
                # Measuring holds the GIL often; a pause first lets the kernel send the
                # redraw it just made to the browser (close() ends the pause at once).
                if self._wake.wait_for(lambda: self._closed, START_DELAY_S):
                    return
            for measure, label in ((self._check, "checking"), (self._table, "profiling"), (self._aten, "ATen ops")):
                self._run(steps, measure, self._turn, label)
                if self._closed:
                    return
                for callback in callbacks:
                    try:
                        callback()
                    except Exception:  # a bug in a panel must not kill the worker
                        _log.exception("fxviz Explorer: updating after profiling failed")
            del steps, callbacks  # while idle, hold no steps and no Explorer alive

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        """The worker's turn to run a model: only while no kernel action waits or runs."""
        with self._gate:
            self._gate.wait_for(lambda: not self._waiting)
            self._busy = True
        try:
            yield
        finally:
            with self._gate:
                self._busy = False
                self._gate.notify_all()

    def _run(self, steps: list[Any], measure: Callable[[Any], None], turn: Callable[[], Any], label: str) -> None:
        bar = self.progress
        bar.max, bar.value, bar.layout.display, bar.description = len(steps), 0, "", label
        try:
            for k, step in enumerate(steps):
                if self._closed:
                    return
                with turn():
                    measure(step)
                bar.value = k + 1
        finally:
            bar.layout.display = "none"

    def _check(self, step: Any) -> None:
        """The numeric check, which runs the model too: in the same queue, before timing."""
        if not step.check_done:
            _attempt(lambda: step.check, "the numeric check")

    def _table(self, step: Any) -> None:
        if self._stale(step, force=True):
            self._known[step] = Timings(*_attempt(lambda: step.profile(**self.kwargs), "profiling"))

    def _aten(self, step: Any) -> None:
        known = self._known.get(step)
        if known is not None and known.table is not None and known.aten is None and not known.aten_error:
            aten, error = _attempt(lambda: profile_aten(step.gm, step.example_inputs), "the ATen breakdown")
            self._known[step] = dataclasses.replace(known, aten=aten, aten_error=error)


def _attempt(compute: Callable[[], Any], what: str) -> tuple[Any, str]:
    """``(result, "")``, or ``(None, message)`` when it raised or was interrupted."""
    try:
        return compute(), ""
    except KeyboardInterrupt:
        return None, f"{what} was interrupted (Ctrl-C); the session is unchanged"
    except Exception as exc:
        return None, f"{what} failed: {type(exc).__name__}: {exc}"

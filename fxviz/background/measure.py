"""A headless measurement scheduler: checks, profiles, ATen breakdowns and A/B
comparisons of a session's steps, one at a time, cached, cancellable.

A UI asks for what it needs (:meth:`Scheduler.request`) and reads what is known
(:meth:`Scheduler.known`, :meth:`Scheduler.compared`); a worker thread measures and
calls back ("background"), the caller's thread does ("sync"), or timings wait for a
click ("off"; checks still run). Every job ends in a state: a result, or an error
saying what to do. A profile disturbed (:meth:`disturb`) or noisy is measured once
more. The queue, its worker and the rule of who waits for whom are :mod:`fxviz.background.jobs`':
:meth:`Scheduler.close` and the program's end cancel the job in flight within a forward
or a node, leaving nothing behind. A script (or a test) that needs the results waits for
:meth:`Scheduler.wait_idle`, not for the clock.
"""
from __future__ import annotations

import dataclasses
import logging
import weakref
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fxviz.errors import Cancelled, FxvizError, InputError
from fxviz.background.jobs import Jobs, Progress

if TYPE_CHECKING:  # pandas and what stands on it load in the first job, off the first view's path
    import pandas as pd

    from fxviz.diff.comparison import Comparison

MODES = ("background", "sync", "off")
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Timings:
    """What profiling found for one step: the per-node ``table`` or the ``error`` that
    stopped it (with what to do); ``noisy`` when even a second measurement was
    disturbed; then the ATen operators per node (``aten``) or ``aten_error``."""

    table: pd.DataFrame | None = None
    error: str = ""
    aten: pd.DataFrame | None = None
    aten_error: str = ""
    noisy: bool = False


@dataclass(frozen=True)
class Compared:
    """An interleaved A/B comparison of two steps, measured, or the error that stopped it."""

    comparison: Comparison | None = None
    error: str = ""


class Scheduler:
    """Measures steps one job at a time; results per step and settings (``profile_kwargs``)."""

    def __init__(self, mode: str = "background", profile_kwargs: Mapping[str, Any] | None = None,
                 progress: Progress | None = None):
        if mode not in MODES:
            raise InputError(f"profile must be one of {', '.join(map(repr, MODES))}, not {mode!r}.")
        self.mode = mode
        self.kwargs = dict(profile_kwargs or {})
        self._timings: weakref.WeakKeyDictionary[Any, dict[str, Timings]] = weakref.WeakKeyDictionary()
        self._pairs: weakref.WeakKeyDictionary[Any, dict[tuple, Compared]] = weakref.WeakKeyDictionary()
        #: The queue of (steps, pairs, then) requests and its worker.
        self.jobs = Jobs(self._batch, progress)

    @property
    def _settings(self) -> str:
        return repr(sorted(self.kwargs.items()))

    def known(self, step: Any) -> Timings | None:
        """The step's timings under the current settings once measured (or failed), else None."""
        return self._timings.get(step, {}).get(self._settings)

    def compared(self, step_a: Any, step_b: Any) -> Compared | None:
        """The A/B comparison of two steps under the current settings, once measured."""
        return self._pairs.get(step_b, {}).get((id(step_a), self._settings))

    def request(self, steps: Iterable[Any] = (), then: Callable[[], Any] = lambda: None, *,
                pairs: Iterable[tuple[Any, Any]] = (), force: bool = False) -> bool:
        """Make the checks and timings of ``steps`` and the comparisons of ``pairs``
        known. Returns True when work was queued for the worker, which calls
        ``then()`` after each kind of job; False when nothing is left to wait for
        (known already, measured inline in "sync" mode, or "off" without ``force``).
        A failed or noisy measurement is taken again only with ``force``."""
        steps = list(dict.fromkeys(steps))
        pairs = [p for p in dict.fromkeys(pairs) if self._stale_pair(p, force)]
        timed = [s for s in steps if self._stale(s, force)]
        unchecked = [s for s in steps if not s.check_done]
        if not (timed or pairs or unchecked):
            return False
        if self.mode == "off" and not force:  # the badge still needs the check; timing waits for a click
            for step in unchecked:
                self._check(step)
            return False
        if self.mode == "sync":
            self._stages(steps, pairs)
            return False
        self.jobs.submit((steps, pairs, then))
        return True

    def disturb(self) -> None:
        """Other work ran (e.g. a pass was applied): a profile in flight is measured again."""
        self.jobs.turns.disturb()

    def paused(self, alone: bool = True) -> AbstractContextManager:
        """The kernel runs the model (a pass's check) alone, at once: the measurement in
        flight stops at its next stopping point (a check runs to its end; a job making
        timed code waits at its next node) and runs again after; no other starts meanwhile.
        ``alone=False``: an action that runs no model (an undo's redraw) does not wait for
        the stop, and what ends meanwhile is shown after it."""
        return self.jobs.paused(alone)

    def wait_idle(self) -> None:
        """Block until nothing is queued or measured (or the scheduler is closed), the
        callbacks of what was included. Not from inside :meth:`paused`: the worker waits
        for that action to end."""
        self.jobs.wait_idle()

    def close(self, timeout: float = 10.0) -> None:
        """Cancel pending jobs and the one in flight, and wait (up to ``timeout`` s) for
        the worker, so no torch work is left running at exit."""
        self.jobs.close(timeout)

    def _stale(self, step: Any, force: bool) -> bool:
        known = self.known(step)
        return known is None or (force and (bool(known.error) or known.noisy))

    def _stale_pair(self, pair: tuple[Any, Any], force: bool) -> bool:
        known = self.compared(*pair)
        return known is None or (force and bool(known.error))

    def _batch(self, batch: list[tuple[list, list, Callable[[], Any]]]) -> None:
        """The worker's: the newest request first (the step the user looks at now, not one
        a kernel action preempted)."""
        steps = list(dict.fromkeys(s for b in reversed(batch) for s in b[0]))
        pairs = list(dict.fromkeys(p for b in reversed(batch) for p in b[1]))
        self._stages(steps, pairs, [b[2] for b in batch])

    def _stages(self, steps: list, pairs: list, callbacks: Iterable = ()) -> None:
        jobs = self.jobs
        for items, measure, label in ((steps, self._check, "checking"), (steps, self._table, "profiling"),
                                      (steps, self._aten, "ATen ops"), (pairs, self._pair, "comparing")):
            if not items:
                continue
            try:
                for k, item in enumerate(items):
                    if jobs.closed:
                        return
                    jobs.progress(label, k, len(items))
                    with jobs.turn():
                        measure(item)
            except Cancelled:  # nothing of the job is kept, nothing more runs now
                if not jobs.closed:  # a kernel action preempted it: its turn comes again
                    jobs.submit(*[(steps, pairs, then) for then in callbacks], first=True)
                return
            finally:
                jobs.progress(label, 0, 0)
            if jobs.on_worker:  # a kernel action first: the UI it redraws would wait for these callbacks
                jobs.turns.after_kernel()
            if jobs.closed:  # an item that cannot be cancelled (a check) ended after close(): no redraw
                return
            for callback in callbacks:
                try:
                    callback()
                except Exception:  # a bug in a panel must not kill the worker
                    _log.exception("fxviz: updating after %s failed", label)

    def _check(self, step: Any) -> None:
        """The numeric check (it ends in a state, "error" included), in the same queue."""
        if not step.check_done:
            _, error = _attempt(lambda: step.check, "the numeric check")
            if error:  # a Session's check ends in a state itself; a duck-typed step may raise
                _log.error("fxviz: %s", error)

    def _table(self, step: Any) -> None:
        if not self._stale(step, force=True):
            return
        for attempt in range(2):
            generation = self.jobs.turns.generation
            table, error = _attempt(lambda: step.profile(**self.kwargs), "profiling")
            other_work = generation != self.jobs.turns.generation
            if table is not None:  # recorded with the profile's other conditions
                table.attrs.setdefault("conditions", {})["other_work"] = other_work
            disturbed = other_work or (table is not None and table.attrs.get("noisy", False))
            if error or not disturbed:
                break
            if attempt == 0:  # the cached result is what a notebook's step.profile() would return
                step.drop_profile(**self.kwargs)
        self._timings.setdefault(step, {})[self._settings] = Timings(table, error, noisy=bool(disturbed and not error))

    def _aten(self, step: Any) -> None:
        known = self.known(step)
        if known is not None and known.table is not None and known.aten is None and not known.aten_error:
            from fxviz.timing.aten_breakdown import profile_aten

            aten, error = _attempt(lambda: profile_aten(step.gm, step.example_inputs), "the ATen breakdown")
            self._timings[step][self._settings] = dataclasses.replace(known, aten=aten, aten_error=error)

    def _pair(self, pair: tuple[Any, Any]) -> None:
        if not self._stale_pair(pair, force=True):
            return

        def measured() -> Comparison:  # the pair outside Comparison's cached_property: see runs_no_model
            from fxviz.diff.comparison import compare, measure_steps

            cmp = compare(*pair, profile_kwargs=self.kwargs, paired=measure_steps(*pair, self.kwargs))
            cmp.timing_by_node  # noqa: B018 - measure now, on this thread
            return cmp

        cmp, error = _attempt(measured, "the timing comparison")
        self._pairs.setdefault(pair[1], {})[(id(pair[0]), self._settings)] = Compared(cmp, error)


def _attempt(compute: Callable[[], Any], what: str) -> tuple[Any, str]:
    """``(result, "")``, or ``(None, message)`` saying what failed and what to do."""
    try:
        return compute(), ""
    except Cancelled:  # no state to record: the scheduler is closing
        raise
    except KeyboardInterrupt:
        return None, f"{what} was interrupted (Ctrl-C); the session is unchanged. Click “profile this step” to retry."
    except FxvizError as exc:  # says what is wrong and what to do (e.g. "needs real tensors"): no traceback
        return None, str(exc)
    except Exception as exc:
        return None, (f"{what} failed: {type(exc).__name__}: {exc}. Run it in a cell to see the traceback "
                      "(fxviz.profile(step.gm, step.example_inputs)); the session is unchanged.")

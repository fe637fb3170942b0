"""The Explorer's measurements: :class:`fxviz.background.measure.Scheduler` with a progress bar.

The scheduler (headless, in ``fxviz``) queues, caches and cancels checks, profiles,
ATen breakdowns and A/B comparisons; this view only shows what it is doing.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import ipywidgets as w

from fxviz.background.measure import MODES, Compared, Scheduler, Timings

__all__ = ["Profiler", "Timings", "Compared", "MODES"]


class Profiler(Scheduler):
    """A Scheduler whose progress shows in ``progress`` (hidden while idle)."""

    def __init__(self, mode: str = "background", profile_kwargs: Mapping[str, Any] | None = None):
        self.progress = w.IntProgress(value=0, min=0, max=1, description="profiling", bar_style="info",
                                      layout=w.Layout(display="none", width="220px"))
        self.progress.add_class("fxviz-progress")
        self._classes = threading.Lock()
        super().__init__(mode, profile_kwargs, progress=self._show)

    def _show(self, what: str, done: int, total: int) -> None:
        bar = self.progress
        if total:
            bar.max, bar.value, bar.description, bar.layout.display = total, done, what, ""
            # Nothing finished yet (one step of 100k nodes profiles for ~10 s): a moving
            # stripe (explorer.css), not an empty bar that looks stuck.
            with self._classes:  # the kernel's thread and the worker's: one class list
                (bar.add_class if done == 0 else bar.remove_class)("fxviz-busy")
        else:
            bar.layout.display = "none"

"""The Explorer's undo and redo, from its buttons and from Ctrl+Z / Ctrl+Shift+Z.

Going to another step redraws the graph: seconds at 100,000 nodes. Meanwhile the
button pressed says "undoing…" / "redoing…" and both take no click; after, each is
enabled where the session can go that way.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import ipywidgets as w

from ._busy import held, working

VERBS = {"undo": "undoing…", "redo": "redoing…"}


class UndoRedo:
    """The two buttons (``undo``, ``redo``); ``run(which)`` goes back or forward
    through ``act(action, busy=...)`` (the Explorer's: it shows a failure), ``show()`` follows the session."""

    def __init__(self, session: Any, act: Callable[..., Any]):
        self.session, self._act = session, act
        self.undo = w.Button(description="undo", icon="undo", layout={"width": "auto"})
        self.redo = w.Button(description="redo", icon="repeat", layout={"width": "auto"})
        self.undo.add_class("fxviz-undo")
        self.redo.add_class("fxviz-redo")
        self.undo.on_click(lambda _: self.run("undo"))
        self.redo.on_click(lambda _: self.run("redo"))
        self._running = False

    def _can(self, which: str) -> bool:
        return self.session.can_undo if which == "undo" else self.session.can_redo

    def run(self, which: str) -> None:
        """Undo or redo ("undo" | "redo"); nothing to undo or redo: nothing happens."""
        if self._can(which):
            self._act(getattr(self.session, which), busy=lambda: self._busy(which))

    @contextlib.contextmanager
    def _busy(self, which: str) -> Iterator[None]:
        pressed, other = (self.undo, self.redo) if which == "undo" else (self.redo, self.undo)
        self._running = True  # show() leaves the buttons to the blocks below until they end
        try:
            with working(pressed, VERBS[which], lambda: self._can(which)), \
                    held(other, lambda: self._can("redo" if which == "undo" else "undo")):
                yield
        finally:
            self._running = False

    def show(self) -> None:
        """Enable each button where the session can go that way (not while one runs)."""
        if not self._running:
            self.undo.disabled, self.redo.disabled = not self._can("undo"), not self._can("redo")

"""The Explorer's undo and redo, from its buttons and from Ctrl+Z / Ctrl+Shift+Z.

Going to another step redraws the graph: seconds at 100,000 nodes. Meanwhile the
button pressed says "undoing…" / "redoing…"; during any action both take no click (one
made meanwhile would wait in the kernel's queue); after, each is enabled where the
session can go that way.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import ipywidgets as w

from ._busy import held, labelled

VERBS = {"undo": "undoing…", "redo": "redoing…"}


class UndoRedo:
    """The two buttons (``undo``, ``redo``); ``run(which)`` goes back or forward
    through ``act(action, busy=...)`` (the Explorer's: it shows a failure and holds the
    buttons meanwhile, :meth:`held`); ``show()`` follows the session."""

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
            pressed = self.undo if which == "undo" else self.redo
            self._act(getattr(self.session, which), busy=lambda: labelled(pressed, VERBS[which]))

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Both buttons take no click while an action runs (any: undo, a pass, an export),
        then each is enabled where the session can go that way."""
        self._running = True  # show() leaves the buttons to this block until it ends
        try:
            with held(self.undo, lambda: self._can("undo")), held(self.redo, lambda: self._can("redo")):
                yield
        finally:
            self._running = False

    def show(self) -> None:
        """Enable each button where the session can go that way (not while an action runs)."""
        if not self._running:
            self.undo.disabled, self.redo.disabled = not self._can("undo"), not self._can("redo")

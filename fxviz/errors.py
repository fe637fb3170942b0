"""Exceptions fxviz raises. Each message names what failed and what to do about it.

Catch :class:`FxvizError` for any fxviz failure. Subclasses that stand for a bad
argument also derive from the builtin a Python caller would expect (``InputError``
is a ``ValueError``, ``UsageError`` a ``TypeError``, ``NoSuchStep`` an
``IndexError``), so ``except ValueError`` keeps working.

>>> error = PassError("Pass 'p' failed at node 'relu': boom.", node="relu")
>>> isinstance(error, FxvizError), error.node
(True, 'relu')
>>> isinstance(InputError("bad"), ValueError)
True
"""
from __future__ import annotations


class FxvizError(Exception):
    """Base class: catch this to handle any fxviz failure. ``node``: the name of the FX
    node the failure is about, when there is one (a UI selects it)."""

    def __init__(self, message: str = "", *, node: str | None = None):
        super().__init__(message)
        self.node = node

    def _render_traceback_(self) -> list[str]:
        """IPython shows this instead of the chained traceback: the message already names
        what failed, the user's line and what to do (``%tb`` still shows the full one)."""
        return [f"\x1b[31m{type(self).__name__}\x1b[0m: {self}"]


class TraceError(FxvizError):
    """A model could not be turned into a graph; the message names the module and line."""


class PassError(FxvizError):
    """A pass failed or produced a broken graph; the session was left unchanged."""


class RenderError(FxvizError):
    """Graphviz is missing or a layout would take too long."""


class RunError(FxvizError):
    """A graph failed to run on the given inputs (``node``: where it failed)."""


class MeasureError(FxvizError):
    """A profile or timing comparison could not be taken (cancelled, no real tensors, bad settings)."""


class Cancelled(MeasureError):
    """A measurement was stopped before it finished (its scheduler was closed): nothing of it is kept."""


class InputError(FxvizError, ValueError):
    """An argument has a value fxviz cannot use (an unknown node name or mode, a missing option)."""


class UsageError(FxvizError, TypeError):
    """A function was called with arguments of the wrong kind or combination."""


class NoSuchStep(FxvizError, IndexError):
    """No such step (undo at step 0, redo at the last, goto out of range) or no such compiled graph."""


class NoSuchAttribute(FxvizError, AttributeError):
    """``fxviz.<name>`` for a name fxviz does not have (``hasattr`` reads it as False)."""


class MissingDependency(FxvizError, ImportError):
    """An optional extra (e.g. ``fxviz[widgets]``) is needed and not installed."""

"""Exceptions fxviz raises. Each message names what failed and what to do about it."""


class FxvizError(Exception):
    """Base class: catch this to handle any fxviz failure."""

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

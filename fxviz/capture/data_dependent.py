"""Where torch.export (non-strict) stopped at a guard on a data-dependent value (a branch
on a tensor's value, a size read from one), the methods that trace as it does stop there
too: strict export (dynamo on fake tensors, under export's rules: no graph break) and
make_fx's retry as torch.export traces (fake tensors, ``is_compiling()`` true).
``tracer="auto"`` keeps that stop while it tries its methods (:func:`kept`) and skips
those, saying why: on a detection model they spent 10 s meeting the same line. make_fx
on the real inputs (the values are there, no guard), on fake ones as it traces by itself,
and dynamo (which cuts its graph there) still run: each can get past it.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from fxviz.capture.places import where

#: The method whose stop is kept, and those that would meet it again.
STOPPING, MEETING = "export", ("export (strict)",)

_STOP: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("fxviz_data_dependent_stop", default=None)


@contextlib.contextmanager
def kept() -> Iterator[None]:
    """While the auto chain tries its methods: :func:`note` keeps the stop for the later ones."""
    token = _STOP.set([])
    try:
        yield
    finally:
        _STOP.reset(token)


def note(method: str, exc: BaseException) -> None:
    """Keep ``exc``'s place when ``method`` is :data:`STOPPING` and it stopped at a guard on
    a data-dependent value (in ``exc`` or the errors it wraps)."""
    stops = _STOP.get()
    if stops is None or method != STOPPING:
        return
    # here, not at import: symbolic_shapes loads sympy, which a symbolic first view never needs
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    while exc is not None and not isinstance(exc, GuardOnDataDependentSymNode):
        exc = exc.__cause__
    if exc is not None:
        stops.append(where(exc))


def stopped() -> str | None:
    """`` at <place>: <code>`` (or "") where torch.export stopped at a data-dependent guard
    in this auto chain; None when it did not (or outside one)."""
    stops = _STOP.get()
    return stops[-1] if stops else None


def why_skip(method: str) -> str | None:
    """Why the auto chain skips ``method``: it would stop where torch.export did; else None."""
    place = stopped()
    if place is None or method not in MEETING:
        return None
    return (f"it would stop where torch.export did, tracing on fake tensors as it does: at a branch on a "
            f"tensor's value{place}")

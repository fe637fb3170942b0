"""How the kernel's thread runs the Explorer's actions. They say they are running: on a
graph of 100,000 nodes an action takes seconds, and a click that shows nothing reads as
a click that was lost; a click made meanwhile waits in the kernel's queue and would then
run unseen (:class:`OneAtATime`). Work that can wait runs once the running cell is done
(:func:`after_cell`). Work off the kernel's thread is :mod:`fxviz.background.jobs`'."""
from __future__ import annotations

import asyncio
import contextlib
import datetime
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def held(button: Any, enabled: Callable[[], bool] = lambda: True) -> Iterator[None]:
    """``button`` takes no click until the block ends, failed or not; then it is enabled
    where ``enabled()`` says (read at the end: the action may have changed it)."""
    button.disabled = True
    try:
        yield
    finally:
        button.disabled = not enabled()


@contextlib.contextmanager
def labelled(button: Any, text: str) -> Iterator[None]:
    """``button`` reads ``text`` (with an hourglass) until the block ends."""
    description, icon = button.description, button.icon
    button.description, button.icon = text, "hourglass-half"
    try:
        yield
    finally:
        button.description, button.icon = description, icon


@contextlib.contextmanager
def working(button: Any, text: str, enabled: Callable[[], bool] = lambda: True) -> Iterator[None]:
    """``button`` reads ``text`` and is :func:`held` until the block ends."""
    with labelled(button, text), held(button, enabled):
        yield


class OneAtATime:
    """Tells a request made in the browser while the previous action ran (a second
    click or key press, queued by the kernel until the action ended) from one made
    after it. Browser and kernel clocks may differ, so only the browser's are compared:
    the previous action ended, in the browser's time, no earlier than its own request's
    time plus what it took in the kernel. Outside a widget message (a cell, a script)
    nothing is stale."""

    def __init__(self) -> None:
        self._ended: datetime.datetime | None = None  # the last action's end, in the browser's time

    def stale(self) -> bool:
        """Whether the request being handled was made before the last action ended."""
        sent = _sent()
        try:
            return sent is not None and self._ended is not None and sent < self._ended
        except TypeError:  # one browser's date with a time zone, another's without: cannot tell
            return False

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        sent, start = _sent(), time.monotonic()
        try:
            yield
        finally:
            if sent is not None:
                self._ended = sent + datetime.timedelta(seconds=time.monotonic() - start)


def _sent() -> datetime.datetime | None:
    """When the browser sent the widget message the kernel is handling, else None."""
    ipython = sys.modules.get("IPython")
    kernel = getattr(ipython.get_ipython() if ipython is not None else None, "kernel", None)
    if kernel is None:
        return None
    header = (kernel.get_parent("shell") or {}).get("header", {})
    sent = header.get("date")
    return sent if header.get("msg_type") == "comm_msg" and isinstance(sent, datetime.datetime) else None


def after_cell(fn: Callable[[], Any]) -> bool:
    """Call ``fn`` on this thread once the running cell is done and its output is sent
    (the kernel's event loop runs it next); call it now outside a kernel (a script, a
    test: another library's loop, e.g. Playwright's, may run there and never return
    to it). Returns whether it was put off. A queued next cell runs after it: ipykernel
    6.29 and 7 read the next request when the loop polls its sockets, after the callbacks
    ready to run (tests/test_explorer_kernel.py: "Run All")."""
    loop = _kernel_loop()
    if loop is None:
        fn()
        return False
    loop.call_soon(fn)
    return True


def _kernel_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop of the IPython kernel running this cell, or None."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if getattr(shell, "kernel", None) is None:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None

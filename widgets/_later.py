"""Work that can wait until the kernel has finished the running cell."""
from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any


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

"""Work that can wait until the kernel has finished the running cell."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


def after_cell(fn: Callable[[], Any]) -> bool:
    """Call ``fn`` on this thread once the running cell is done and its output is sent
    (the kernel's event loop runs it next); call it now where no event loop runs (a
    script, a test). Returns whether it was put off."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        fn()
        return False
    loop.call_soon(fn)
    return True

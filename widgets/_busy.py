"""A button that says its action is running: on a graph of 100,000 nodes an action takes
seconds, and a click that shows nothing reads as a click that was lost."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def working(button: Any, text: str) -> Iterator[None]:
    """``button`` reads ``text`` and takes no second click until the block ends, failed or not."""
    description, icon = button.description, button.icon
    button.description, button.icon, button.disabled = text, "hourglass-half", True
    try:
        yield
    finally:
        button.description, button.icon, button.disabled = description, icon, False

"""Closing widget trees: ipywidgets' ``close()`` leaves children (and their comms) alive."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def close_tree(widget: Any) -> None:
    """Close ``widget``, everything below it, and their layout and style widgets."""
    for child in getattr(widget, "children", ()):
        close_tree(child)
    for part in (getattr(widget, "layout", None), getattr(widget, "style", None)):
        if part is not None and hasattr(part, "close"):
            part.close()
    widget.close()


def replace_children(box: Any, children: Iterable[Any]) -> None:
    """Show ``children`` in ``box``, closing the ones they replace."""
    old, box.children = box.children, tuple(children)
    for child in old:
        if child not in box.children:
            close_tree(child)

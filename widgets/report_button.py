"""The Explorer's export button: the whole session written as one self-contained HTML
page (``Session.to_html``), then linked beside the button."""
from __future__ import annotations

import pathlib
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import ipywidgets as w

from fxviz.present.markup import escape

from ._busy import working


class ReportButton:
    """``button`` writes the report (through the Explorer's action, which shows a
    failure); ``link`` then points to it."""

    def __init__(self, session: Any, name: str, paused: Callable[[], AbstractContextManager],
                 say: Callable[..., None]):
        self.session, self._name, self._paused, self._say = session, name, paused, say
        self.button = w.Button(description="export", icon="download", layout={"width": "auto"},
                               tooltip="write the whole session as one HTML page")
        self.link = w.HTML()
        self.button.add_class("fxviz-export")
        self.link.add_class("fxviz-export-link")

    def write(self, path: str | pathlib.Path | None = None) -> pathlib.Path:
        """Write the report to ``path`` (default: ``<model>-report.html`` in the kernel's
        working directory, a notebook's own folder), link it and say so."""
        path = pathlib.Path(path or re.sub(r"[^\w.-]", "_", self._name) + "-report.html")
        with working(self.button, "exporting…"), self._paused():  # checks every step: runs the model
            self.session.to_html(path, title=self._name)
        href = escape(path.as_posix() if not path.is_absolute() else path.as_uri())
        self.link.value = f'<a href="{href}" target="_blank" download>{escape(path.name)}</a>'
        count = len(self.session.steps)
        self._say(f"Wrote the report ({count} step{'s' * (count != 1)}) to {path}", error=False)
        return path

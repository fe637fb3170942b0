"""Escaping for every user string that reaches DOT HTML-labels, SVG or HTML."""
from __future__ import annotations

import html
import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def escape(text: object) -> str:
    """Text as inert markup: ``<script>`` becomes ``&lt;script&gt;``; quotes are escaped
    too (safe inside attributes); control characters, which Graphviz rejects, become spaces."""
    return html.escape(_CONTROL.sub(" ", str(text)).replace("\n", " "), quote=True)

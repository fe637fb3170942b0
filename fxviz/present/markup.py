"""Escaping for every user string that reaches DOT HTML-labels, SVG or HTML.

Public: the widget layer and users' own HTML views escape with it too.
"""
from __future__ import annotations

import html
import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def escape(text: object) -> str:
    """Text as inert markup: ``<script>`` becomes ``&lt;script&gt;``; quotes are escaped
    too (safe inside attributes); control characters, which Graphviz rejects, become spaces.

    >>> escape('<b class="x">A & B</b>')
    '&lt;b class=&quot;x&quot;&gt;A &amp; B&lt;/b&gt;'
    """
    return html.escape(_CONTROL.sub(" ", str(text)).replace("\n", " "), quote=True)

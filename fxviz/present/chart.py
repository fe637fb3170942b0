"""Charts as inline SVG that read well in JupyterLab's light and dark themes and on the
report's page: the Timing tab and the report draw theirs with :func:`chart_svg`."""
from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

INK = "#010203"  # drawn in this colour, then swapped for the theme's text colour


def chart_svg(draw: Callable[[Any], Any], rows: int) -> str:
    """An inline SVG of ``draw(ax)`` on a transparent background whose text and axes
    take JupyterLab's font colour (``--jp-ui-font-color1``): readable in light and dark
    themes. Uses a bare Figure, not pyplot: no global state, safe off the main thread.
    Imported here: matplotlib costs half a second, which the first graph should not wait for."""
    import matplotlib
    from matplotlib.figure import Figure

    ink = {key: INK for key in ("text.color", "axes.labelcolor", "axes.edgecolor", "xtick.color", "ytick.color")}
    with matplotlib.rc_context({**ink, "svg.fonttype": "none", "font.size": 9}):
        fig = Figure(figsize=(6, 0.28 * rows + 1.2), facecolor="none")
        ax = fig.subplots()
        ax.set_facecolor("none")
        draw(ax)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", transparent=True)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]  # inline: no XML prolog or doctype
    # Scale down with the panel (the viewBox keeps the proportions), never up past its size.
    svg = re.sub(r'<svg([^>]*?) width="([\d.]+pt)" height="[\d.]+pt"', r'<svg\1 width="100%" style="max-width: \2"',
                 svg, count=1)
    return svg.replace(INK, "var(--jp-ui-font-color1, #333)")

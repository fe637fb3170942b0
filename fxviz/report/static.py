"""Static HTML fallbacks: what a saved notebook, nbviewer, GitHub or ``nbconvert`` shows
where a widget cannot run (the graph as SVG, the node table, the step and its check).

The SVG is the core's (every user string escaped by :mod:`fxviz.draw.render`); every other
string is escaped here. Colours follow JupyterLab's theme variables with light fallbacks.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from fxviz.present.markup import escape
from fxviz.errors import FxvizError
from fxviz.present.node_table import COLUMNS, values
from fxviz.present.presentation import check_text as presentation_check

MAX_ROWS = 200  # node table rows in a fallback: enough to read, small enough to save
STYLE = """<style>
.fxviz-static { color: var(--jp-content-font-color1, #222); font-size: var(--jp-content-font-size1, 13px); }
.fxviz-static-graph { max-height: 640px; overflow: auto; border: 1px solid var(--jp-border-color2, #e0e0e0);
  background: var(--jp-layout-color0, #fff); }
.fxviz-static table { border-collapse: collapse; }
.fxviz-static th, .fxviz-static td { padding: 1px 8px 1px 0; text-align: left; }
.fxviz-static-note { color: var(--jp-content-font-color2, #666); font-size: 0.9em; }
</style>"""


def static_html(*, title: str, lines: Iterable[str], svg: str, rows: Sequence[Sequence[Any]] | None = None,
                note: str = "", total: int | None = None) -> str:
    """A titled block: text ``lines``, the graph ``svg`` (already safe markup), the node
    table ``rows`` (:func:`node_rows`; first :data:`MAX_ROWS`, of ``total`` nodes: default, all rows) and a ``note``."""
    parts = [STYLE, '<div class="fxviz-static">', f"<div><b>{escape(title)}</b></div>"]
    parts += [f"<div>{escape(line)}</div>" for line in lines if line]
    parts.append(f'<div class="fxviz-static-graph">{svg}</div>' if svg else "<div>(no graph drawn)</div>")
    if rows:
        shown = rows[:MAX_ROWS]
        total = len(rows) if total is None else total
        more = f" (first {len(shown)} of {total})" if total > len(shown) else ""
        parts += [f"<details><summary>Nodes{escape(more)}</summary>", _table(shown), "</details>"]
    if note:
        parts.append(f'<div class="fxviz-static-note">{escape(note)}</div>')
    parts.append("</div>")
    return "".join(parts)


def node_rows(graph: Any, limit: int | None = None, times: Mapping[str, Sequence] | None = None) -> list[tuple]:
    """The node table of ``graph``'s first ``limit`` nodes, a tuple of cells per node: the live
    table's columns (:mod:`fxviz.present.node_table`), with ``times`` (``{key: values}`` in
    graph order; blank without), each cell as the live table shows it."""
    every = values(graph, limit)
    n = len(every["name"])
    every |= {key: column[:n] for key, column in (times or {}).items()}
    return list(zip(*([_shown(v, c) for v in every.get(c["key"], [None] * n)] for c in COLUMNS)))


def _table(rows: Sequence[Sequence[Any]]) -> str:
    """``rows`` under the live table's labels, escaped. Written here, not by pandas: its import is
    0.2 s of a kernel's first ``explore``, for cells that are already text."""
    head = "".join(f"<th>{escape(c['label'])}</th>" for c in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="fxviz-static-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _shown(value: Any, column: Mapping[str, Any]) -> Any:
    """Blank for no value; a number as table_view.js shows it (en-US grouping, the
    column's digits)."""
    if value is None or value != value:  # None or NaN
        return ""
    if column.get("numeric") and isinstance(value, (int, float)):
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        # The browser rounds the number's shortest decimal, ties away from zero (12.25 -> 12.3);
        # Python's format rounds its binary value, ties to even (12.2).
        step = Decimal(1).scaleb(-column.get("digits", 0))
        return f"{Decimal(repr(value)).quantize(step, ROUND_HALF_UP):,}"
    return value


def check_text(step: Any) -> str:
    """The step's check, without running it (a repr must not run the model)."""
    return f"check: {presentation_check(step.check if step.check_done else None)}"


def graph_svg(graph: Any) -> tuple[str, str]:
    """The graph drawn as the Explorer first draws it, or "" and why not."""
    from fxviz.draw.render import render

    try:
        return render(graph).drawn().svg, ""
    except FxvizError as exc:
        return "", str(exc)


def step_html(step: Any) -> str:
    """A Step as HTML: its pass, check, graph and nodes."""
    svg, why = graph_svg(step.graph)
    params = ", ".join(f"{k}={v!r}" for k, v in step.params.items())
    return static_html(title=f"Step {step.index}: {step.pass_name}({params})",
                       lines=[f"{len(step.graph)} nodes · {check_text(step)}", why],
                       svg=svg, rows=node_rows(step.graph, MAX_ROWS), total=len(step.graph))


def session_html(session: Any) -> str:
    """A Session as HTML: its steps with their checks, and the current step's graph."""
    current = session.current
    svg, why = graph_svg(current.graph)
    steps = [f"{'▶' if s is current else ' '} step {s.index}: {s.pass_name} · {check_text(s)}"
             for s in session.steps]
    return static_html(title=f"Session: {len(session.steps)} steps, at step {session.index}",
                       lines=[*session.capture.note.splitlines(), *steps, why], svg=svg,
                       rows=node_rows(current.graph, MAX_ROWS), total=len(current.graph),
                       note="s.to_html(path) writes the whole session as one interactive page.")


"""HTML for :class:`fxviz.diff.comparison.Comparison`: a side-by-side code diff and the summary
``_repr_html_`` shows. Every string is escaped; colours follow JupyterLab's theme."""
from __future__ import annotations

import html
from typing import Any

from fxviz.diff._linediff import AnchoredMatcher

STYLE = """<style>
.fxviz-compare { color: var(--jp-content-font-color1, #222); font-size: var(--jp-content-font-size1, 13px); }
.fxviz-compare table { border-collapse: collapse; margin: 4px 0; }
.fxviz-compare th, .fxviz-compare td { padding: 1px 6px; text-align: left; vertical-align: top; }
.fxviz-diff code { white-space: pre; font-family: var(--jp-code-font-family, monospace); background: none; }
.fxviz-diff .fxviz-diff-no { color: var(--jp-content-font-color3, #888); text-align: right; user-select: none; }
.fxviz-diff-delete td, .fxviz-diff-replace td:nth-child(2) { background: rgba(214, 39, 40, 0.15); }
.fxviz-diff-insert td, .fxviz-diff-replace td:nth-child(4) { background: rgba(44, 160, 44, 0.15); }
.fxviz-diff-gap td { color: var(--jp-content-font-color3, #888); text-align: center; }
</style>"""


def code_diff_html(code_a: str, code_b: str, labels: tuple[str, str] = ("a", "b"), context: int | None = 3,
                   *, near: int | None = None, max_rows: int | None = None, before: int = 0) -> str:
    """Side-by-side HTML table of two code texts, from difflib; ``context`` unchanged
    lines around each change (None: all). Rows carry ``fxviz-diff-{equal,delete,insert,
    replace}`` classes; every string is escaped. ``max_rows``: only that many rows, from
    ``before`` rows before the one of line ``near`` of ``code_b`` (the last rows where no
    row is at or after it; the first without ``near``), with "⋯ N more lines" around."""
    lines_a, lines_b = code_a.splitlines(), code_b.splitlines()
    matcher = AnchoredMatcher(lines_a, lines_b)
    groups = [matcher.get_opcodes()] if context is None else matcher.get_grouped_opcodes(context)
    rows = []  # (line of code_b shown or None, tag, left, right): made whole, formatted only where shown
    for g, group in enumerate(groups):
        if g:
            rows.append((None, "gap", None, None))
        for tag, i1, i2, j1, j2 in group:
            rows += [(j1 + k + 1 if j1 + k < j2 else None, tag, (i1 + k + 1, lines_a[i1 + k]) if i1 + k < i2 else ("", ""),
                      (j1 + k + 1, lines_b[j1 + k]) if j1 + k < j2 else ("", "")) for k in range(max(i2 - i1, j2 - j1))]
    last = len(rows) if max_rows is None else max_rows
    found = next((r for r, row in enumerate(rows) if near and row[0] is not None and row[0] >= near), None)
    first = max(0, len(rows) - last) if near and found is None else max(0, (found or 0) - before)
    shown = [_row(*row[1:]) for row in rows[first : first + last]]
    if first:
        shown.insert(0, f'<tr class="fxviz-diff-gap"><td colspan="4">⋯ {first:,} lines before</td></tr>')
    if first + last < len(rows):
        shown.append(f'<tr class="fxviz-diff-gap"><td colspan="4">⋯ {len(rows) - first - last:,} more lines</td></tr>')
    head = "".join(f'<th colspan="2">{html.escape(label)}</th>' for label in labels)
    return f'<table class="fxviz-diff"><thead><tr>{head}</tr></thead><tbody>{"".join(shown)}</tbody></table>'


def _row(tag: str, left: tuple | None, right: tuple | None) -> str:
    if tag == "gap":
        return '<tr class="fxviz-diff-gap"><td colspan="4">⋯</td></tr>'
    cells = "".join(f'<td class="fxviz-diff-no">{n}</td><td><code>{html.escape(text)}</code></td>' for n, text in (left, right))
    return f'<tr class="fxviz-diff-{tag}">{cells}</tr>'


def comparison_html(cmp: Any) -> str:
    """The summary of a Comparison: node marks, output difference, the whole forward's
    timing, the largest timing changes per target (alike rows folded), and (folded) the
    changed nodes and the code diff."""
    counts = cmp.structure["mark"].value_counts()
    graph = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("added", "removed", "changed", "unchanged"))
    outputs = f"{cmp.output_diff.status} ({cmp.output_diff.message})"
    changed = cmp.structure[cmp.structure["mark"] != "unchanged"]
    esc = html.escape
    return "".join([
        STYLE,
        '<div class="fxviz-compare">',
        f"<b>{esc(cmp.labels[0])} → {esc(cmp.labels[1])}</b>",
        f"<div>Nodes: {esc(graph)}. Outputs: {esc(outputs)}.</div>",
        f"<div>Largest timing changes per target (µs; both steps timed interleaved, "
        f"{cmp.paired.rounds} rounds; changes under {cmp.min_effect:.0%} or inside the noise are not claimed):</div>",
        "<div>Whole forward (µs, uninstrumented):</div>",
        cmp.timing_total.to_html(index=False, escape=True, float_format="{:.2f}".format, border=0, na_rep="—"),
        cmp.summary().to_html(index=False, escape=True, float_format="{:.2f}".format, border=0, na_rep="—"),
        f"<details><summary>Changed nodes ({len(changed)})</summary>",
        changed.to_html(index=False, escape=True, border=0, na_rep=""),
        "</details><details><summary>Code diff</summary>",
        cmp.code_diff_html(),
        "</details></div>",
    ])

"""The kernels inductor made of a graph, as a static section of its HTML report: read
offline what ran, which nodes each kernel computes, its code and its measured time.

For a Session opened on a graph of ``fxviz.compiled(..., backend="inductor")`` (its steps
carry what inductor made of the graph); "" for any other. Every user string is escaped;
the code is pygments' (which escapes it) with inline styles, so the section needs no
stylesheet of the page.
"""
from __future__ import annotations

from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, PythonLexer

from fxviz.compiler.kernel_times import timed
from fxviz.present.markup import escape

STYLE = """<style>
.fxviz-report-kernels { margin: 16px 8px; font: 13px system-ui, sans-serif; }
.fxviz-report-kernels table { border-collapse: collapse; }
.fxviz-report-kernels th, .fxviz-report-kernels td { padding: 2px 10px 2px 0; text-align: left; vertical-align: top; }
.fxviz-report-kernels td.num { text-align: right; font-variant-numeric: tabular-nums; }
.fxviz-report-kernels pre { max-height: 480px; overflow: auto; font-size: 12px; }
</style>"""
FORMAT = HtmlFormatter(noclasses=True, nobackground=True)  # inline styles: the page has none for code


def kernels_section(gm: Any) -> str:
    """The section for a step's GraphModule ``gm``: a table of kernels (time, share,
    nodes, modules), then each kernel's code folded under its name; "" when inductor
    did not compile the graph."""
    found = timed(gm)
    if found is None:
        return ""
    rows, total = found
    ranked = sorted(rows, key=lambda row: -row["time_us"])
    body = "".join(
        f'<tr><td><a href="#fxviz-kernel-{i}">{escape(row["kernel"])}</a></td><td>{escape(row["kind"])}</td>'
        f'<td class="num">{row["time_us"]:.1f}</td><td class="num">{100 * row["share"]:.1f}</td>'
        f'<td>{escape(", ".join(row["nodes"]))}</td><td>{escape(", ".join(row["modules"]))}</td></tr>'
        for i, row in enumerate(ranked))
    codes = "".join(
        f'<details id="fxviz-kernel-{i}"><summary><b>{escape(row["kernel"])}</b> · {escape(row["kind"])} · '
        f'{row["time_us"]:.1f} µs · computes {escape(", ".join(row["nodes"]) or "no node of its own")}</summary>'
        f'{highlight(row["code"] or "(no code)", code_lexer(row["code"]), FORMAT)}</details>' for i, row in enumerate(ranked))
    in_kernels = sum(row["time_us"] for row in rows)
    return (f'{STYLE}<section class="fxviz-report-kernels"><h2>Kernels inductor made of this graph</h2>'
            f"<p>{len(rows)} kernels · {total:.1f} µs per run, {in_kernels:.1f} µs of it in kernels "
            "(profiled when measured; µs per run, % of the graph's time)</p>"
            f"<table><thead><tr><th>kernel</th><th>kind</th><th>µs</th><th>%</th><th>nodes it computes</th>"
            f"<th>modules</th></tr></thead><tbody>{body}</tbody></table>{codes}</section>")


def code_lexer(code: str) -> Any:
    """C++ for a C++ kernel, Python for a Triton kernel and an extern call."""
    return CppLexer(stripnl=False) if "#include" in code else PythonLexer(stripnl=False)

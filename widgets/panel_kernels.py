"""The kernels panel of a graph inductor compiled (``fxviz.compiled(..., backend="inductor")``):
its kernels in a table (time, share of the graph's time, the nodes each computes) and the
chosen kernel's code. Selecting a node in the Explorer picks its kernel, marks the code's
lines that look like the node's operator, names the nodes fused with it and outlines them
in the graph (the graph view's ``marked``); picking a kernel selects its first node and
outlines all of its nodes. A node in no kernel, or a colour mode other than "kernel",
clears the outlines.

Stable CSS classes: fxviz-kernels (the panel), fxviz-kernels-summary, fxviz-kernels-table
(the TableView), fxviz-kernels-compare (eager vs compiled per module: the button) and
fxviz-kernels-modules (its table), fxviz-kernel-code (the chosen kernel: its title
fxviz-kernel-title, the nodes fused with the selected one fxviz-kernel-fused, each
fxviz-kernel-node, then its code, scrolling, in fxviz-kernel-source under fxviz-code-hl,
marked lines ``.hll``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as w
from pygments import highlight
from pygments.formatters import HtmlFormatter

from fxviz.compiler.kernels import code_lines
from fxviz.present.markup import escape
from fxviz.report.kernels import code_lexer

from .table_view import TableView

if TYPE_CHECKING:  # pandas loads where a table is made, not with the Explorer
    import pandas as pd

COLUMNS = [
    {"key": "kernel", "label": "kernel"},
    {"key": "kind", "label": "kind"},
    {"key": "time_us", "label": "µs per run", "numeric": True, "digits": 1},
    {"key": "percent", "label": "% of graph", "numeric": True, "digits": 1},
    {"key": "count", "label": "nodes", "numeric": True, "digits": 0},
    {"key": "computes", "label": "nodes it computes"},
    {"key": "modules", "label": "modules"},
]


def table_rows(kernels: pd.DataFrame) -> list[dict[str, Any]]:
    """The TableView's rows of ``kernels`` (one graph's part of ``Compiled.kernels``)."""
    return [{"name": row.kernel, "kernel": row.kernel, "kind": row.kind, "time_us": row.time_us,
             "percent": 100 * row.share, "count": len(row.nodes), "computes": ", ".join(row.nodes)
             or (f"(helps: {', '.join(row.also)})" if row.also else ""), "modules": ", ".join(row.modules)}
            for row in kernels.itertuples()]


def code_html(code: str, marked: list[int]) -> str:
    """A kernel's code highlighted, numbered, ``marked`` lines marked."""
    formatter = HtmlFormatter(cssclass="fxviz-code-hl", linenos="inline", hl_lines=marked, nobackground=True)
    return highlight(code or "(no code)", code_lexer(code), formatter)


class KernelsPanel(w.VBox):
    """``kernels`` (the rows of one graph's part), ``total_us`` (that graph's own time per
    run), ``gm`` (the graph the Explorer shows: the nodes' operators), ``select(name)``
    (selects a node in the Explorer) and ``mark(names)`` (outlines nodes in its graph, []
    clears). ``show_node(name)`` follows the Explorer's selection, ``show_mode(mode)`` its
    colour mode."""

    def __init__(self, kernels: pd.DataFrame, total_us: float, gm: Any, select: Callable[[str], Any],
                 mark: Callable[[list[str]], Any], module_times: Callable[[], pd.DataFrame] | None = None):
        self.kernels = kernels.set_index("kernel", drop=False)
        self._select, self._mark, self._targets = select, mark, {n.name: n.target for n in gm.graph.nodes}
        self._kernel_of = {node: row.kernel for row in kernels.itertuples() for node in row.nodes}
        self._following = False  # a kernel chosen because a node was selected: its node stays selected
        self.summary = w.HTML(_summary(kernels, total_us)).add_class("fxviz-kernels-summary")
        self.table = TableView(columns=COLUMNS, sort_by="time_us", descending=True).add_class("fxviz-kernels-table")
        self.table.rows = table_rows(kernels)
        self.about = w.HTML('<p class="fxviz-hint">Select a kernel, or a node in the graph, to read its code.</p>')
        self.code = w.HTML().add_class("fxviz-kernel-source")  # scrolls under the kernel's title
        self.code.layout.max_height, self.code.layout.overflow = "420px", "auto"
        chosen = w.VBox([self.about, self.code]).add_class("fxviz-kernel-code")
        self.table.observe(self._on_kernel, "selected")
        self.modules = w.HTML().add_class("fxviz-kernels-modules")
        self.compare = w.Button(description="eager vs compiled per module", icon="balance-scale",
                                layout=w.Layout(width="auto", display="" if module_times else "none"),
                                tooltip="time the graph op by op as the model runs without torch.compile, "
                                "beside its kernels' time per module")
        self.compare.add_class("fxviz-kernels-compare")
        if module_times is not None:
            self.compare.on_click(lambda _: self._show_modules(module_times()))
        super().__init__([self.summary, self.table, self.compare, self.modules, chosen])
        self.add_class("fxviz-kernels")

    def show_node(self, name: str) -> None:
        """The kernel computing node ``name``: chosen in the table, its code shown with the
        node's lines marked, the nodes fused with it named and, with it, outlined."""
        kernel = self._kernel_of.get(name)
        if kernel is None:
            self._mark([])
            if name:
                self.about.value = (f'<p class="fxviz-hint">{escape(name)} is computed by no kernel: a view '
                                    "inductor makes by reinterpreting a buffer, or an input.</p>")
                self.code.value = ""
            return
        self._following = True
        try:
            self.table.selected = kernel
        finally:
            self._following = False
        self._show(kernel, name)
        self._mark(list(self.kernels.loc[kernel, "nodes"]))

    def show_mode(self, mode: str) -> None:
        """Another colour mode than the kernels' own clears the outlines: they belong to
        the kernel view of the graph."""
        if mode != "kernel":
            self._mark([])

    def _show_modules(self, table: pd.DataFrame) -> None:
        self.modules.value = table.to_html(index=False, escape=True, border=0, na_rep="", classes="fxviz-table",
                                           float_format="{:.1f}".format) + (
            '<p class="fxviz-hint">eager: the dynamo graph run op by op (its ops\' median µs, summed); compiled: '
            "the kernels' µs per run, a fused kernel's time shared among its nodes' modules; ratio: compiled / eager.</p>")

    def _on_kernel(self, change: dict[str, Any]) -> None:
        if self._following or not change["new"]:
            return
        nodes = self.kernels.loc[change["new"], "nodes"]
        self._show(change["new"], "")
        self._mark(list(nodes))
        if nodes:
            self._select(nodes[0])

    def _show(self, kernel: str, node: str) -> None:
        row = self.kernels.loc[kernel]
        marked = code_lines(row.code, self._targets.get(node)) if node and row.kind != "extern" else []
        fused = [n for n in row.nodes if n != node]
        title = (f'<div class="fxviz-kernel-title"><b>{escape(kernel)}</b> · {escape(row.kind)} · '
                 f"{row.time_us:.1f} µs per run · {int(row.calls)} call{'s' * (int(row.calls) != 1)}</div>")
        by_users = set(row.inferred)  # a pattern rewrite dropped their provenance: given the kernel of their users
        names = "".join(f'<code class="fxviz-kernel-node">{escape(n)}</code>{" (by its users)" * (n in by_users)} '
                        for n in fused)
        what = f"fused with {escape(node)}" if node else "computes"
        listing = f'<div class="fxviz-kernel-fused">{what}: {names}</div>' if fused else ""
        lines = ", ".join(map(str, marked[:8])) + (", …" if len(marked) > 8 else "")
        how = (f'<p class="fxviz-hint">Marked: line{"s" * (len(marked) > 1)} {lines}, which look like '
               f"{escape(node)}'s operator (inductor names no nodes in its code).</p>" if marked else "")
        self.about.value = title + listing + how
        self.code.value = code_html(row.code, marked)


def _summary(kernels: pd.DataFrame, total_us: float) -> str:
    fused = int((kernels.nodes.map(len) > 1).sum())
    return (f"<b>{len(kernels)} kernels</b> inductor made of this graph ({fused} fused, "
            f"{int((kernels.kind == 'extern').sum())} extern calls) · {total_us:.1f} µs per run, "
            f"{kernels.time_us.sum():.1f} µs of it in kernels (profiled)")

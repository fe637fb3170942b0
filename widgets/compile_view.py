"""CompileExplorer: the graphs torch.compile made of a model, listed, and the chosen
one opened in the Explorer.

One row per dynamo graph: a button per part (the dynamo graph, AOT's forward and
backward) with its node count, and what ended the graph (a graph break's reason and
the user's line, or the end of the model). Below the list: the chosen graph's break
in full (dynamo's explanation and hints) and its guards; then the Explorer on that
graph's Session. Sessions are kept (``Compiled.session``): switching back finds a
graph's steps as they were left.

Stable CSS classes: fxviz-compile (the widget), fxviz-compile-list (the list),
fxviz-compile-row (one graph), fxviz-compile-part (a part's button; the shown one also
fxviz-compile-current), fxviz-compile-why (why ``tracer="auto"`` opened the model as
these graphs and what to do; its text in fxviz-compile-note), fxviz-compile-hint (which
AOT graphs are missing and how to get them), fxviz-compile-ends (what ended a graph),
fxviz-compile-info (the chosen graph's break and guards), fxviz-compile-break,
fxviz-compile-guards, fxviz-compile-check-all (the button checking every graph, when
there are several: a check covers one) and fxviz-compile-checks (its results, one per graph).
Under an AOT graph inductor compiled (``fxviz.compiled(..., backend="inductor")``), its
kernels (widgets/panel_kernels.py, ``.kernels``), following the Explorer's selection and
outlining the selected node's kernel in the graph.
"""
from __future__ import annotations

import contextlib
import dataclasses
import pathlib
from collections import Counter
from typing import Any

import ipywidgets as w

from fxviz.capture.info import graph_info
from fxviz.checks.check import CheckResult
from fxviz.checks.scope import graph_checks
from fxviz.present.markup import escape
from fxviz.compiler.graphs import Compiled

from ._busy import working
from ._tree import close_tree, replace_children
from .explorer import Explorer
from .panel_code import user_place
from .panel_kernels import KernelsPanel
from .panel_passes import badge_html

CSS = (pathlib.Path(__file__).parent / "compile_view.css").read_text()


def explore_compiled(model: Any, example_inputs: tuple, session_kwargs: dict[str, Any],
                     model_kwargs: dict[str, Any] | None = None, **explorer_options: Any) -> CompileExplorer:
    """``explore(model, *inputs, tracer="dynamo")``: every graph torch.compile makes,
    with AOT's forward and backward (``backward=`` as in :func:`fxviz.compiled`)."""
    from fxviz.compiler.graphs import compiled
    from fxviz.errors import TraceError

    options = {k: v for k, v in session_kwargs.items() if k != "tracer"}
    unknown = sorted(set(options) - {"n_random_inputs", "backward"})
    if unknown:
        raise TraceError(f"explore(..., tracer='dynamo') takes n_random_inputs and backward, not {', '.join(unknown)}: "
                         "torch.compile captures the whole model down to ATen operators.")
    return CompileExplorer(compiled(model, *example_inputs, kwargs=model_kwargs, **options), **explorer_options)


def _pre(text: str) -> str:
    """Multi-line user text, escaped line by line, for a <pre>."""
    return "\n".join(escape(line) for line in text.splitlines())


class CompileExplorer(w.VBox):
    """The list of ``compiled``'s graphs above the Explorer on the chosen one (``index``, or
    first the largest: ``compiled.shown``, the note above the list says why).
    ``show(index, part)`` opens a graph; ``explorer`` is the Explorer shown now."""

    def __init__(self, compiled: Compiled, *, index: int | None = None, part: str = "dynamo", **explorer_options: Any):
        self.compiled = compiled
        self._options = explorer_options
        self.explorer: Explorer | None = None
        self.kernels: KernelsPanel | None = None
        self.current: tuple[int, str] | None = None
        count, breaks = len(compiled.graphs), len(compiled.graph_breaks)
        self.title = w.HTML(f"<b>{escape(compiled.name)}</b> · torch.compile made {count} graph{'s' * (count != 1)}, "
                            f"{breaks} graph break{'s' * (breaks != 1)}")
        self.title.add_class("fxviz-compile-title")
        self.why = w.HTML(_why_html(compiled))
        self.why.add_class("fxviz-compile-why")
        self.hint = w.HTML(_missing_parts_html(compiled))
        self.hint.add_class("fxviz-compile-hint")
        self._buttons: dict[tuple[int, str], w.Button] = {}
        self.listing = w.VBox([self._row(graph) for graph in compiled.graphs])
        self.listing.add_class("fxviz-compile-list")
        self.check_all = w.Button(description=f"check all {count} graphs", icon="check", layout=w.Layout(
            width="auto", display="" if count > 1 else "none"), tooltip="compare each graph's current step with "
            "the graph as dynamo made it, on its inputs and random ones (the Explorer's check covers its own graph)")
        self.check_all.add_class("fxviz-compile-check-all")
        self.check_all.on_click(lambda _: self.check_graphs())
        self.checks = w.HTML()
        self.checks.add_class("fxviz-compile-checks")
        self.info = w.HTML()
        self.info.add_class("fxviz-compile-info")
        self.error = w.HTML()
        self.holder = w.VBox()
        style = w.HTML(f"<style>{CSS}</style>", layout=w.Layout(display="none"))
        super().__init__([style, self.title, self.why, self.hint, self.listing, self.check_all, self.checks, self.info,
                          self.error, self.holder])
        self.add_class("fxviz-compile")
        self.show(compiled.shown if index is None else index, part)  # the largest graph unless asked

    @classmethod
    def around(cls, session: Any, **explorer_options: Any) -> CompileExplorer:
        """The list over a Session opened on one of dynamo's graphs (what ``tracer="auto"``
        falls back to; the largest): the other graphs open beside it."""
        compiled = Compiled.from_capture(session.capture, type(session.steps[0].gm).__name__)
        compiled.adopt(session)
        return cls(compiled, **explorer_options)

    def show(self, index: int, part: str = "dynamo") -> None:
        """Open graph ``index``'s ``part`` in the Explorer (its Session is made once)."""
        if (index, part) == self.current:
            return
        label = f"{self.compiled.name} · graph {index} · {part}"
        try:
            explorer = Explorer(self.compiled.session(index, part), title=label, **self._options)
        except Exception as exc:  # a graph that cannot open: say so, keep the one shown
            self.error.value = f"<div class='fxviz-error-message' role='alert'>{escape(exc)}</div>"
            return
        self.error.value = ""
        self.explorer = explorer
        self.kernels = self._kernels_panel(index, part, explorer)
        replace_children(self.holder, (explorer, self.kernels) if self.kernels else (explorer,))  # closes those replaced
        self.current = (index, part)
        for key, button in self._buttons.items():
            (button.add_class if key == self.current else button.remove_class)("fxviz-compile-current")
        self.info.value = _info_html(self.compiled.graphs[index])

    def _kernels_panel(self, index: int, part: str, explorer: Explorer) -> KernelsPanel | None:
        """The kernels inductor made of an AOT graph, following the Explorer's selection
        (None for a graph it did not compile). Their times are profiled on first use."""
        if self.compiled.backend != "inductor" or part == "dynamo":
            return None
        kernels = self.compiled.kernels
        graph = explorer.graph
        panel = KernelsPanel(kernels[(kernels.graph == index) & (kernels.part == part)],
                             self.compiled.kernel_totals[(index, part)], explorer.session.current.gm, explorer.select,
                             lambda names: setattr(graph, "marked", names),
                             (lambda: self.compiled.module_times(index)) if part == "forward" else None)
        graph.observe(lambda change: panel.show_node(change["new"]), "selected")
        graph.observe(lambda change: panel.show_mode(change["new"]), "color_mode")
        return panel

    def check_graphs(self) -> list[CheckResult]:
        """Check every dynamo graph (its Session's current step: the shown one's steps as
        left) and list each result as it ends (``fxviz-compile-checks``); returns them."""
        rows: dict[int, str] = {}
        statuses: Counter[str] = Counter()

        def done(index: int, result: CheckResult) -> None:
            rows[index] = f"<li>graph {index}: {badge_html(dataclasses.replace(result, scope=''))}</li>"
            statuses[result.status] += 1
            counts = ", ".join(f"{n} {escape(status)}" for status, n in statuses.items())
            self.checks.value = (f"<div>{len(rows)} of {len(self.compiled.graphs)} graphs checked: {counts}</div>"
                                 f"<ul>{''.join(rows.values())}</ul>")

        # The shown Explorer's measuring in flight stops while these checks run the model.
        paused = self.explorer.profiler.paused() if self.explorer is not None else contextlib.nullcontext()
        with working(self.check_all, f"checking {len(self.compiled.graphs)} graphs…"), paused:
            return graph_checks(self.compiled, done)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget view plus, as text/html, the list of graphs and the shown graph's
        static Explorer: what a saved notebook, nbviewer or GitHub shows."""
        bundle = super()._repr_mimebundle_(**kwargs)
        inner = self.explorer._repr_mimebundle_(**kwargs) if bundle and self.explorer is not None else None
        if inner and "text/html" in inner:
            rows = "".join(f"<li>graph {g.index} ({', '.join(g.parts)}): {_ends_html(g)}</li>"
                           for g in self.compiled.graphs)
            bundle["text/html"] = f"<div>{self.title.value}{self.why.value}<ul>{rows}</ul></div>{inner['text/html']}"
        return bundle

    def close(self) -> None:
        for child in self.children:
            close_tree(child)
        super().close()

    def _row(self, graph: Any) -> w.HBox:
        label = w.HTML(f"<b>graph {graph.index}</b>")
        buttons = []
        for part in graph.parts:
            nodes = len(graph.part(part).graph.nodes)
            button = w.Button(description=f"{part} · {nodes} nodes", layout=w.Layout(width="auto"),
                              tooltip=f"open graph {graph.index}'s {part} graph in the Explorer")
            button.add_class("fxviz-compile-part")
            button.on_click(lambda _, key=(graph.index, part): self.show(*key))
            self._buttons[(graph.index, part)] = button
            buttons.append(button)
        ends = w.HTML(_ends_html(graph))
        ends.add_class("fxviz-compile-ends")
        row = w.HBox([label, *buttons, ends])
        row.add_class("fxviz-compile-row")
        return row


def _ends_html(graph: Any) -> str:
    brk = graph.graph_break
    if brk is None:
        return '<span class="fxviz-hint">ends: the end of the model</span>'
    place = user_place(brk.get("user_line"))
    where = f' at <code title="{escape(brk.get("user_line") or "")}">{escape(place)}</code>' if place else ""
    return f'graph break: <b>{escape(brk["reason"])}</b>{where}'


def _why_html(compiled: Compiled) -> str:
    """Why ``tracer="auto"`` opened the model as these graphs and what to do (the capture's note)."""
    note = compiled.capture.note
    return f'<pre class="fxviz-compile-note" role="note">{_pre(note)}</pre>' if note else ""


def _missing_parts_html(compiled: Compiled) -> str:
    """Why AOT's graphs are missing and how to get them: a run without gradients
    (``tracer="auto"``'s fallback) records no backward; a graph AOT cannot trace has none."""
    lines = [f"graph {g.index}: AOT could not trace it ({escape(error)}); its dynamo graph is shown"
             for g in compiled.graphs if (error := graph_info(g.gm).aot_error)]
    if not any("backward" in g.parts for g in compiled.graphs):
        lines.append("No AOT backward graphs: the model ran without gradients. To see them, run "
                     "<code>fxviz.compiled(model, x)</code> or <code>explore(model, x, tracer=\"dynamo\")</code> "
                     "with grad mode on and parameters that require grad.")
    return "".join(f'<div class="fxviz-hint">{line}</div>' for line in lines)


def _info_html(graph: Any) -> str:
    """The chosen graph's break (dynamo's full message) and guards, folded."""
    brk = graph.graph_break
    parts = []
    if brk is not None:
        parts.append(f'<details class="fxviz-compile-break"><summary>graph {graph.index} ends with a graph break: '
                     f'{escape(brk["reason"])}</summary><pre>{_pre(brk.get("detail") or "")}</pre></details>')
    guards = graph.guard_tree or "\n".join(graph.guards)
    parts.append(f'<details class="fxviz-compile-guards"><summary>{len(graph.guards)} guards: graph {graph.index} '
                 f'runs again only while they hold</summary><pre>{_pre(guards)}</pre></details>')
    return "".join(parts)

"""The Explorer: a Session as one workbench widget.

A header (model name, step, undo/redo, the step's numeric check, profiling progress, a status
line), an error line, the graph view beside the Details / Code / Passes / Timing / Memory tabs,
and the node table below (its weights' rows while the graph shows weights). Ctrl+Z / Ctrl+Shift+Z
undo and redo while the workbench has focus (the graph view catches the keys). It calls only fxviz's
public API and follows the session (``session.subscribe``), so ``session.apply(...)`` in another
cell refreshes it. Rendering never waits for profiling: timings fill in when known.

Stable CSS classes (browser tests and styling rely on them):
  fxviz-explorer        the whole widget; fxviz-header: its first row
  fxviz-title, fxviz-step, fxviz-undo, fxviz-redo: model name; "step i of n · pass"; buttons
  fxviz-badge           a step's numeric check (the first one: the current step's); inside it fxviz-badge-match
                        | -expected | -mismatch (also a check error) | -unknown (nothing compared, not checked)
                        | -pending; beside the first (step_error.py) fxviz-show-where, fxviz-error-against
  fxviz-error           error line (empty when none; fxviz-error-node: its node); fxviz-status: info line
  fxviz-progress        profiling progress bar (hidden when idle); fxviz-graph: the GraphView; fxviz-node-table
  fxviz-tabs            the Details / Code / Passes / Timing / Memory tabs; each panel fxviz-tab-panel
  fxviz-details         node details table; fxviz-details-inputs / -users hold fxviz-node-link buttons;
                        fxviz-details-aten: ATen operators; fxviz-details-error, fxviz-details-memory: sections
  fxviz-code            highlighted code or diff (its scroller: fxviz-code-scroll);
                        fxviz-code-diff (toggle), fxviz-code-base, fxviz-code-layout
  fxviz-pass-select, fxviz-param, fxviz-pass-scope, fxviz-pass-nodes, fxviz-apply
  fxviz-history         step list: fxviz-history-step buttons (fxviz-history-current), fxviz-badge, fxviz-history-where
  fxviz-timing-summary, fxviz-timing-table, fxviz-timing-chart, fxviz-profile (button),
  fxviz-compare-a, fxviz-compare-b, fxviz-compare (button), fxviz-compare-result, fxviz-compare-chart,
  fxviz-side-by-side-open (button): the two steps' graphs in fxviz-side-by-side (panel_side_by_side.py)
  fxviz-memory-panel    the Memory tab (panel_memory.py): fxviz-memory-summary, -peak (button), -chart
"""
from __future__ import annotations

import contextlib
import functools
import pathlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as w

from fxviz.errors import FxvizError
from fxviz.present.markup import escape
from fxviz.passes import NothingToDo
from fxviz.report.static import MAX_ROWS, check_text, node_rows, static_html
from fxviz.session import Session

from . import coloring
from .graph_drawing import GraphDrawing
from .graph_view import GraphView
from .node_records import COLUMNS, show_nodes, time_columns
from .panel_code import CodePanel
from .panel_details import DetailsPanel
from .panel_memory import MemoryPanel
from .panel_passes import PassPanel, step_badge
from .panel_side_by_side import SideBySide
from .panel_timing import TimingPanel
from .profiling import Profiler
from .step_error import StepError
from .report_button import ReportButton
from ._busy import OneAtATime, after_cell, held
from ._tree import close_tree
from .table_view import TableView
from .undo_redo import UndoRedo

CSS = (pathlib.Path(__file__).parent / "explorer.css").read_text()
DEFAULT_PROFILE_KWARGS = {"budget_s": 1.0}
CODE_TAB = 1
# Above this many nodes the Code tab is drawn only while it is open, and the node table
# and the view's node records (~0.5 s to build and send at 100k) follow the first drawing.
LARGE_GRAPH = 2000


class Explorer(w.VBox):
    """The workbench over ``session`` (see the module doc). ``select(name)`` selects a
    node everywhere; ``close()`` unsubscribes from the session and stops profiling."""

    _unsubscribe: Callable[[], None] | None = None

    def __init__(self, session: Session, *, profile: str = "background",
                 profile_kwargs: Mapping[str, Any] | None = None, title: str | None = None):
        self.session = session
        self.profiler = Profiler(profile, DEFAULT_PROFILE_KWARGS if profile_kwargs is None else profile_kwargs)
        self._ui = threading.RLock()  # panels change from the kernel's thread and the profiler's
        self.graph = GraphView(layout=w.Layout(width="60%")).add_class("fxviz-graph")
        self._drawing = GraphDrawing(self.graph, self._say)
        self.table = TableView(columns=COLUMNS, sort_by="index").add_class("fxviz-node-table")
        self.step_error = StepError(session, self.graph, self.table, self._act, self._say, lambda: self.details.again())
        self.step_error.on_change = self._show_measured  # another step to compare with: errors shown anew
        self.memory = MemoryPanel(self.select, session)
        self.details = DetailsPanel(select=self.select, show_source=self._show_source, capture=session.capture,
                                    sections=(self.step_error.details_html, self.memory.details_html))
        self.code = CodePanel()
        self.passes = PassPanel(goto=lambda index: self._act(session.goto, index), where=self.step_error.show_step)
        self.side_by_side = SideBySide(self.graph)  # shown full width under the main row by the Timing tab
        self.timing = TimingPanel(self.profiler, lambda: self._request_profiles(force=True), self.side_by_side.show)
        for panel in (self.details, self.code, self.passes, self.timing, self.memory):  # scroll beside the graph
            panel.layout.max_height, panel.layout.overflow = "620px", "auto"  # its own Layout: a new one orphans it
            panel.add_class("fxviz-tab-panel")  # explorer.css: its rows keep their height
        self.tabs = w.Tab([self.details, self.code, self.passes, self.timing, self.memory], titles=(
            "Details", "Code", "Passes", "Timing", "Memory"), layout=w.Layout(width="40%")).add_class("fxviz-tabs")
        self.memory.follow(self.tabs, 4)
        self._name = name = title or type(session.steps[0].gm).__name__
        self.title = w.HTML(f"<b>{escape(name)}</b>").add_class("fxviz-title")
        self.step_label = w.Label().add_class("fxviz-step")
        self.undo_redo = UndoRedo(session, self._act)
        self.undo_button, self.redo_button = self.undo_redo.undo, self.undo_redo.redo
        self._requests = OneAtATime()  # a click made while an action ran is dropped, not run after it
        self.badge = w.HTML().add_class("fxviz-badge")
        self.status = w.Label().add_class("fxviz-status")
        self.error = w.HTML().add_class("fxviz-error")
        self._report = ReportButton(session, name, self.profiler.paused, self._say)
        self.export_button, self.export_link = self._report.button, self._report.link
        header = w.HBox([self.title, self.step_label, self.undo_button, self.redo_button, self.badge,
                         self.step_error.controls, self.profiler.progress, self.status, self.export_button, self.export_link])
        header.add_class("fxviz-header")
        style = w.HTML(f"<style>{CSS}</style>", layout=w.Layout(display="none"))
        super().__init__([style, header, self.error, w.HBox([self.graph, self.tabs]), self.side_by_side, self.table])
        self.add_class("fxviz-explorer")

        w.link((self.graph, "selected"), (self.table, "selected"))
        w.dlink((self.graph, "show_weights"), (self.table, "hide"), lambda shown: "" if shown else "weight")
        self.graph.observe(self._on_selected, "selected")
        self.graph.observe(self._on_collapsed, "collapsed")
        self.graph.observe(lambda _: self._request_profiles(), "color_mode")
        self.graph.observe(lambda _: self._draw(), "show_weights")
        # Opening the Passes tab lists passes registered since (e.g. in another cell).
        self.tabs.observe(lambda _: self.passes.show(session, self.graph.selected), "selected_index")
        self.tabs.observe(lambda _: self._show_code(), "selected_index")
        self.graph.on_action(self.undo_redo.run)  # Ctrl+Z / Ctrl+Shift+Z in the workbench
        self.export_button.on_click(lambda _: self._act(self.export))
        self.passes.apply.on_click(lambda _: self._act(self._apply))
        self._unsubscribe = session.subscribe(self._on_session)
        if len(session.current.graph) > LARGE_GRAPH:  # drawn first; rows right after the cell
            self.graph.pending = self.table.pending = self._fill
        self._refresh()
        if self.graph.pending:
            after_cell(self._fill)

    def select(self, name: str) -> None:
        """Select FX node ``name`` ("" clears) in the graph, table, details and code."""
        self.graph.select(name)

    def _fill(self) -> None:
        """The node table and the view's node records, when put off past the first drawing
        (a large graph); idempotent: whoever reads them first (a select, a repr) fills them."""
        with self._ui:
            if self.graph.pending is None or self._unsubscribe is None:  # filled, or closed
                return
            self.graph.pending = self.table.pending = None
            try:
                self._show_nodes()
            except Exception as exc:  # a callback's error: shown, not lost in the kernel's log
                self._say(f"The Explorer could not list the nodes: {type(exc).__name__}: {exc}")

    def export(self, path: str | pathlib.Path | None = None) -> pathlib.Path:
        """Write the session as one self-contained HTML page with the timings measured so far and link it
        (default path: ``<model>-report.html`` in the kernel's working directory); see :class:`ReportButton`."""
        return self._report.write(path)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget view plus, as text/html, a static copy (graph, node table, step) for wherever the widget
        cannot run (a saved notebook, nbviewer, GitHub, nbconvert); JupyterLab shows the widget where it can."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle:
            step = self.session.current
            bundle["text/html"] = static_html(
                title=self._name,
                lines=[self.step_label.value, check_text(step), self.graph.status], svg=self.graph.svg,
                # the live table's first rows, made apart: its own may wait for the cell's end
                rows=node_rows(step.graph, MAX_ROWS, time_columns(step.graph, self.profiler.known(step)).columns),
                total=len(step.graph),
                note="A static copy of the Explorer as first displayed: run the notebook to explore it.")
        return bundle

    def close(self) -> None:
        """Unsubscribe, stop the profiler (cancelling a measurement in flight), close every widget of it."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if hasattr(self, "table"):  # a fill still waiting for the cell's end: dropped
            self.graph.pending = self.table.pending = None
        if hasattr(self, "profiler"):  # absent when __init__ raised early
            self.profiler.close()
        for child in self.children:
            close_tree(child)
        self.layout.close()
        super().close()

    # --- user actions ----------------------------------------------------------
    def _act(self, action: Callable[..., Any], *args: Any,
             busy: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext) -> None:
        """Run an action on the session (its controls ``busy()`` meanwhile) and show its
        error, if any. The session is transactional: a failed pass leaves it as it was.
        A request made in the browser while the previous action ran is dropped, saying so.
        Profiling stops or waits meanwhile: it would share the interpreter with the action."""
        if self._requests.stale():
            self._say("A click or key made before the last action ended was ignored: make it again if you meant it.",
                      error=False)
            return
        self._say("")
        with self._requests.running(), self.undo_redo.held(), self.passes.held(), held(self.export_button), busy(), \
                self.profiler.paused(alone=False):
            self._run(action, *args)

    def _run(self, action: Callable[..., Any], *args: Any) -> None:
        try:
            action(*args)
        except NothingToDo as exc:
            self._say(f"Nothing to do: {exc}", error=False)
        except FxvizError as exc:  # e.g. a pass failing at a node: the node is selected and named
            node = exc.node if exc.node in self.session.current.graph else None
            if node:
                self.select(node)
            self._say(str(exc), node=node)
        except Exception as exc:  # shown to the user, who cannot see a callback's traceback
            self._say(f"{type(exc).__name__}: {exc}")

    def _apply(self) -> None:
        name, params, nodes = self.passes.request()
        with self.passes.busy(), self.profiler.paused():  # the pass and the new step's shapes run the model
            step = self.session.apply(name, nodes=nodes, **params)
        note = step.gm.meta.get("pass_note")  # what it skipped; an error the redraw showed stays
        self.status.value = f"{name}: {note}" if note else ""

    def _say(self, message: str, *, error: bool = True, node: str | None = None) -> None:
        where = f"<div class='fxviz-error-node'>at node <b>{escape(node)}</b> (selected)</div>" if node else ""
        shown = f"<div class='fxviz-error-message' role='alert'>{escape(message)}{where}</div>"
        self.error.value = shown if message and error else ""
        self.status.value = "" if error else message

    # --- showing the session ---------------------------------------------------
    def _on_session(self, _: Session) -> None:
        self.profiler.disturb()  # e.g. a pass applied in another cell: a profile in flight is retaken
        try:
            self._refresh()
        except Exception as exc:  # raising here would break the caller's session.apply
            self._say(f"The Explorer could not show step {self.session.index}: {type(exc).__name__}: {exc}")

    def _refresh(self) -> None:
        """Show the current step: the drawing first, then the code, and ask for its timings."""
        with self._ui:
            step, session = self.session.current, self.session
            self.step_label.value = f"step {step.index} of {len(session.steps) - 1} · {step.pass_name}"
            self.undo_redo.show()
            self.badge.value = step_badge(step)
            if self.graph.selected not in step.graph:
                self.graph.selected = ""
            self.passes.show(session, self.graph.selected)
            after_cell(self._show_code)  # highlighting 200 lines took as long as the drawing it came before
            self._request_profiles()

    def _request_profiles(self, force: bool = False) -> None:
        """Show what is known; measure what the panels need once the cell (or click) is done."""
        self._show_measured()  # drawn first; measuring at once slowed the rest of the cell ("off": ran the check)
        after_cell(functools.partial(self._measure, self.session.current, force))

    def _measure(self, step: Any, force: bool) -> None:
        if self.profiler.jobs.closed or step is not self.session.current:  # closed, or a later step asked since
            return
        pairs = coloring.pairs(self.graph.color_mode, self.session, step)
        timings, checked = self.profiler.known(step), step.check_done
        shown = lambda: step is self.session.current and self._show_measured()  # noqa: E731 - the worker's callback
        self.profiler.request([step], shown, pairs=pairs, force=force)
        if self.profiler.known(step) is not timings or step.check_done != checked or pairs:  # measured inline?
            self._show_measured()

    def _show_measured(self) -> None:
        """Everything that shows measurements: badges, graph, table, details, timing panel."""
        with self._ui:
            step = self.session.current
            self.badge.value = step_badge(step)
            self.step_error.show_badge(step)
            self.memory.refresh()
            self.passes.show_history(self.session)
            timings = self.profiler.known(step)
            self._draw()  # first: the browser draws while the node records (~0.5 s at 100k) are made
            if self.graph.pending is None:
                self._show_nodes()
            self.details.show(step.graph, self.graph.selected, timings)
            self.timing.show(self.session, timings)

    def _show_nodes(self) -> None:
        step = self.session.current  # made once per step: often nothing to send
        show_nodes(step.graph, self.profiler.known(step), self.graph, self.table)
        self.step_error.show_column(step)  # after them: it adds its column to the table's

    def _draw(self, reveal: str = "", *, keep_on_error: bool = False) -> bool:
        """Draw the current step in the chosen colour mode (see ``GraphDrawing.draw``)."""
        step, mode = self.session.current, self.graph.color_mode
        options, note = coloring.coloring(mode, self.session, step, self.profiler, self.step_error.reference(step))
        return self._drawing.draw(step, options, note, reveal, keep_on_error=keep_on_error)

    def _on_selected(self, change: dict[str, Any]) -> None:
        with self._ui:
            name, step = change["new"], self.session.current
            if self._drawing.revealing:
                return
            if name in step.graph and self._drawing.hides(name):
                self._drawing.reveal(name, lambda hidden: self._draw(reveal=hidden))
            self.details.show(step.graph, name, self.profiler.known(step))
            self._show_code()
            self.passes.select_node(name)

    def _show_code(self) -> None:
        """The Code tab; on a large graph only while it is open: highlighting the code of
        thousands of nodes takes seconds, which no other tab's user should wait for."""
        if self.tabs.selected_index == CODE_TAB or len(self.session.current.graph) <= LARGE_GRAPH:
            name, graph = self.graph.selected, self.session.current.graph
            self.code.show(self.session, name, graph.nodes[name]["op"] if name in graph else "")

    def _show_source(self) -> None:
        """The Details tab's source link: the Code tab, on the model's code the node came from."""
        self.code.source.value = True
        self.tabs.selected_index = CODE_TAB
        self._show_code()

    def _on_collapsed(self, change: dict[str, Any]) -> None:
        with self._ui:
            self._drawing.follow_click(change["new"], lambda reveal: self._draw(reveal, keep_on_error=True),
                                       self.graph.selected)

"""The Explorer: a Session as one workbench widget.

A header (model name, step, undo/redo, the step's numeric check, profiling progress,
a status line), an error line, the graph view beside the Details / Code / Passes /
Timing tabs, and the node table below. Ctrl+Z / Ctrl+Shift+Z undo and redo while the
workbench has focus (the graph view catches the keys). It calls only fxviz's public API and follows
the session (``session.subscribe``), so ``session.apply(...)`` in another cell
refreshes it. Rendering never waits for profiling: timings fill in when known.

Stable CSS classes (browser tests and styling rely on them):
  fxviz-explorer        the whole widget; fxviz-header: its first row
  fxviz-title, fxviz-step   model name; "step i of n · pass"
  fxviz-undo, fxviz-redo    buttons
  fxviz-badge           a step's numeric check (the first one: the current step's);
                        inside it fxviz-badge-match | -expected | -mismatch (also a check error)
                        | -unknown (nothing compared, not checked) | -pending
  fxviz-error           error line (empty when none); fxviz-status: info line
  fxviz-progress        profiling progress bar (hidden when idle)
  fxviz-graph           the GraphView;  fxviz-node-table: the TableView
  fxviz-tabs            the Details / Code / Passes / Timing tabs; each panel fxviz-tab-panel
  fxviz-details         node details table; fxviz-details-inputs / -users hold
                        fxviz-node-link buttons; fxviz-details-aten: ATen operators
  fxviz-code            highlighted code or diff (its scroller: fxviz-code-scroll);
                        fxviz-code-diff (toggle), fxviz-code-base, fxviz-code-layout
  fxviz-pass-select, fxviz-param, fxviz-pass-scope, fxviz-pass-nodes, fxviz-apply
  fxviz-history         step list: fxviz-history-step buttons (fxviz-history-current)
                        each beside a fxviz-badge
  fxviz-timing-summary, fxviz-timing-table, fxviz-timing-chart, fxviz-profile (button),
  fxviz-compare-a, fxviz-compare-b, fxviz-compare (button), fxviz-compare-result,
  fxviz-compare-chart
"""
from __future__ import annotations

import pathlib
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as w

from fxviz.markup import escape
from fxviz.errors import FxvizError, UsageError
from fxviz.graph import shape_text
from fxviz.passes import NothingToDo
from fxviz.render import render
from fxviz.report_static import check_text, records_frame, static_html
from fxviz.session import Session

from .graph_view import GraphView
from .panel_code import CodePanel
from .panel_details import DetailsPanel
from .panel_passes import PassPanel, step_badge
from .panel_timing import TimingPanel
from .profiling import Profiler, Timings
from ._tree import close_tree
from .table_view import TableView

CSS = (pathlib.Path(__file__).parent / "explorer.css").read_text()
DEFAULT_PROFILE_KWARGS = {"budget_s": 1.0}
CODE_TAB = 1
EAGER_CODE_NODES = 2000  # above this, the Code tab is drawn only while it is open
COLUMNS = [
    {"key": "index", "label": "#", "numeric": True},
    {"key": "name", "label": "name"},
    {"key": "op", "label": "op"},
    {"key": "target", "label": "target"},
    {"key": "module_path", "label": "module"},
    {"key": "shape", "label": "shape"},
    {"key": "flops", "label": "FLOPs", "numeric": True},
    {"key": "bytes", "label": "bytes moved", "numeric": True},
    {"key": "time_us", "label": "time (µs)", "numeric": True, "digits": 1},
    {"key": "share", "label": "share (%)", "numeric": True, "digits": 1},
]


def explore(model_or_session: Any, *example_inputs: Any, profile: str = "background",
            profile_kwargs: Mapping[str, Any] | None = None, **session_kwargs: Any) -> Explorer:
    """The Explorer on ``Session(model, example_inputs, **session_kwargs)``, or on an
    existing Session. ``profile``: "background" (a worker thread, with a progress bar),
    "sync" (inline; for tests) or "off" (only on request); timings are
    ``step.profile(**profile_kwargs)`` (default ``budget_s=1.0``)."""
    if isinstance(model_or_session, Session):
        if example_inputs or session_kwargs:
            raise UsageError("explore(session) takes no example inputs or session options: the session has them.")
        session = model_or_session
    elif not example_inputs:
        raise UsageError("explore(model, *example_inputs) needs example inputs, "
                        "e.g. explore(model, torch.randn(1, 3, 224, 224)).")
    else:
        from fxviz.capture import called_as

        with called_as("explore"):  # errors name the call the user wrote
            if session_kwargs.get("tracer") == "dynamo":  # every graph, listed above the Explorer
                from .compile_view import explore_compiled

                return explore_compiled(model_or_session, example_inputs, session_kwargs,
                                        profile=profile, profile_kwargs=profile_kwargs)
            session = Session(model_or_session, example_inputs, **session_kwargs)
    if session.capture.method == "dynamo" and len(session.capture.graphs) > 1:
        from .compile_view import CompileExplorer

        return CompileExplorer.around(session, profile=profile, profile_kwargs=profile_kwargs)
    return Explorer(session, profile=profile, profile_kwargs=profile_kwargs)


class Explorer(w.VBox):
    """The workbench over ``session`` (see the module doc). ``select(name)`` selects a
    node everywhere; ``close()`` unsubscribes from the session and stops profiling."""

    _unsubscribe: Callable[[], None] | None = None
    _revealing = False  # re-selecting a node just revealed: the panels show it once

    def __init__(self, session: Session, *, profile: str = "background",
                 profile_kwargs: Mapping[str, Any] | None = None, title: str | None = None):
        self.session = session
        self.profiler = Profiler(profile, DEFAULT_PROFILE_KWARGS if profile_kwargs is None else profile_kwargs)
        self._ui = threading.RLock()  # panels change from the kernel's thread and the profiler's
        self._drawn_collapsed: list[str] | None = None  # the collapsed boxes on screen
        self._open: set[str] = set()  # boxes the view keeps open (the first draw's, then the user's)
        self._drawn_source = ""  # the DOT on screen: the same DOT is not laid out twice
        self.graph = _named(GraphView(layout=w.Layout(width="60%")), "fxviz-graph")
        self.table = _named(TableView(columns=COLUMNS, sort_by="index"), "fxviz-node-table")
        self.details = DetailsPanel(select=self.select, show_source=self._show_source)
        self.code = CodePanel()
        self.passes = PassPanel(goto=lambda index: self._act(session.goto, index))
        self.timing = TimingPanel(self.profiler, profile_step=lambda: self._request_profiles(force=True))
        for panel in (self.details, self.code, self.passes, self.timing):  # scroll beside the graph
            panel.layout = w.Layout(max_height="620px", overflow="auto")
            panel.add_class("fxviz-tab-panel")  # explorer.css: its rows keep their height
        self.tabs = _named(w.Tab([self.details, self.code, self.passes, self.timing],
                                 titles=("Details", "Code", "Passes", "Timing"), layout=w.Layout(width="40%")),
                           "fxviz-tabs")
        name = title or type(session.steps[0].gm).__name__
        self.title = _named(w.HTML(f"<b>{escape(name)}</b>"), "fxviz-title")
        self._name = name
        self.step_label = _named(w.Label(), "fxviz-step")
        self.undo_button = _named(w.Button(description="undo", icon="undo", layout={"width": "auto"}), "fxviz-undo")
        self.redo_button = _named(w.Button(description="redo", icon="repeat", layout={"width": "auto"}), "fxviz-redo")
        self.badge = _named(w.HTML(), "fxviz-badge")
        self.status = _named(w.Label(), "fxviz-status")
        self.error = _named(w.HTML(), "fxviz-error")
        self.export_button = _named(w.Button(description="export", icon="download", layout={"width": "auto"},
                                             tooltip="write the whole session as one HTML page"), "fxviz-export")
        self.export_link = _named(w.HTML(), "fxviz-export-link")
        header = _named(w.HBox([self.title, self.step_label, self.undo_button, self.redo_button, self.badge,
                                self.profiler.progress, self.status, self.export_button, self.export_link]),
                        "fxviz-header")
        style = w.HTML(f"<style>{CSS}</style>", layout=w.Layout(display="none"))
        super().__init__([style, header, self.error, w.HBox([self.graph, self.tabs]), self.table])
        self.add_class("fxviz-explorer")

        w.link((self.graph, "selected"), (self.table, "selected"))
        self.graph.observe(self._on_selected, "selected")
        self.graph.observe(self._on_collapsed, "collapsed")
        self.graph.observe(lambda _: self._request_profiles(), "color_mode")
        # Opening the Passes tab lists passes registered since (e.g. in another cell).
        self.tabs.observe(lambda _: self.passes.show(session, self.graph.selected), "selected_index")
        self.tabs.observe(lambda _: self._show_code(), "selected_index")
        self.undo_button.on_click(lambda _: self._act(session.undo))
        self.redo_button.on_click(lambda _: self._act(session.redo))
        self.graph.on_action(self._on_key)  # Ctrl+Z / Ctrl+Shift+Z in the workbench
        self.export_button.on_click(lambda _: self._act(self.export))
        self.passes.apply.on_click(lambda _: self._act(self._apply))
        self._unsubscribe = session.subscribe(self._on_session)
        self._refresh()

    def select(self, name: str) -> None:
        """Select FX node ``name`` ("" clears) in the graph, table, details and code."""
        self.graph.select(name)

    def export(self, path: str | pathlib.Path | None = None) -> pathlib.Path:
        """Write the session as one self-contained HTML page (``Session.to_html``) with the
        timings measured so far, and show a link to it; default path: ``<model>-report.html``
        in the kernel's working directory (a notebook's own folder)."""
        path = pathlib.Path(path or re.sub(r"[^\w.-]", "_", self._name) + "-report.html")
        with self.profiler.paused():  # writing checks every step: the model runs
            self.session.to_html(path, title=self._name)
        href = escape(path.as_posix() if not path.is_absolute() else path.as_uri())
        self.export_link.value = f'<a href="{href}" target="_blank" download>{escape(path.name)}</a>'
        count = len(self.session.steps)
        self._say(f"Wrote the report ({count} step{'s' * (count != 1)}) to {path}", error=False)
        return path

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget view plus, as text/html, a static copy (graph, node table, step) for
        wherever the widget cannot run: a saved notebook, nbviewer, GitHub, nbconvert.
        JupyterLab renders the widget view when it can (its renderer ranks first)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle:
            step = self.session.current
            bundle["text/html"] = static_html(
                title=self._name,
                lines=[self.step_label.value, check_text(step), self.graph.status], svg=self.graph.svg,
                rows=records_frame(self.table.rows, COLUMNS),
                note="A static copy of the Explorer as first displayed: run the notebook to explore it.")
        return bundle

    def close(self) -> None:
        """Unsubscribe, stop the profiler and close every widget of the workbench."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if hasattr(self, "profiler"):  # absent when __init__ raised early
            self.profiler.close()
        for child in self.children:
            close_tree(child)
        super().close()

    # --- user actions ----------------------------------------------------------
    def _act(self, action: Callable[..., Any], *args: Any) -> None:
        """Run an action on the session and show its error, if any. The session is
        transactional: a failed pass leaves it as it was."""
        self._say("")
        try:
            action(*args)
        except NothingToDo as exc:
            self._say(f"Nothing to do: {exc}", error=False)
        except Exception as exc:  # shown to the user, who cannot see a callback's traceback
            self._say(str(exc) if isinstance(exc, FxvizError) else f"{type(exc).__name__}: {exc}")

    def _on_key(self, action: str) -> None:
        """Undo/redo from the keyboard: a key with nothing to undo does nothing."""
        if action == "undo" and self.session.can_undo:
            self._act(self.session.undo)
        elif action == "redo" and self.session.can_redo:
            self._act(self.session.redo)

    def _apply(self) -> None:
        name, params, nodes = self.passes.request()
        with self.profiler.paused():  # the pass's check and the new step's shapes run the model
            self.session.apply(name, nodes=nodes, **params)

    def _say(self, message: str, *, error: bool = True) -> None:
        shown = message and error
        self.error.value = f"<div class='fxviz-error-message' role='alert'>{escape(message)}</div>" if shown else ""
        self.status.value = "" if error else message

    # --- showing the session ---------------------------------------------------
    def _on_session(self, _: Session) -> None:
        self.profiler.disturb()  # e.g. a pass applied in another cell: a profile in flight is retaken
        try:
            self._refresh()
        except Exception as exc:  # raising here would break the caller's session.apply
            self._say(f"The Explorer could not show step {self.session.index}: {type(exc).__name__}: {exc}")

    def _refresh(self) -> None:
        """Show the current step: everything, then ask for its timings."""
        with self._ui:
            step, session = self.session.current, self.session
            self.step_label.value = f"step {step.index} of {len(session.steps) - 1} · {step.pass_name}"
            self.undo_button.disabled, self.redo_button.disabled = not session.can_undo, not session.can_redo
            self.badge.value = step_badge(step)
            if self.graph.selected not in step.graph:
                self.graph.selected = ""
            self.passes.show(session, self.graph.selected)
            self._show_code()
            self._request_profiles()

    def _request_profiles(self, force: bool = False) -> None:
        """Show what is known now; profile what the panels need (the current step, and
        the previous one for the diff colouring), showing the result when it arrives."""
        step = self.session.current
        pairs = [(self.session.steps[step.index - 1], step)] if self.graph.color_mode == "diff" and step.index else []
        self._show_measured()  # draw what is known before any measuring competes for the CPU
        timings, checked = self.profiler.known(step), step.check_done
        self.profiler.request([step], lambda: self._measured(step), pairs=pairs, force=force)
        if self.profiler.known(step) is not timings or step.check_done != checked or pairs:  # measured inline?
            self._show_measured()

    def _measured(self, step: Any) -> None:
        with self._ui:
            if step is self.session.current:
                self._show_measured()

    def _show_measured(self) -> None:
        """Everything that shows measurements: badges, graph, table, details, timing panel."""
        with self._ui:
            step = self.session.current
            self.badge.value = step_badge(step)
            self.passes.show_history(self.session)
            timings = self.profiler.known(step)
            rows = _rows(step.graph, timings)
            self.graph.nodes = {r["name"]: _tooltip(r, step.graph) for r in rows}
            self._draw()
            self.table.rows = rows
            self.details.show(step.graph, self.graph.selected, timings)
            self.timing.show(self.session, timings)

    def _draw(self, reveal: str = "", *, keep_on_error: bool = False) -> bool:
        """Draw the current step with the boxes the user opened and closed (the first
        draw opens what fits); ``reveal``: a node hidden in a collapsed box to open up to.
        ``keep_on_error``: a drawing the user asked for (a collapse or expand) that cannot
        be laid out keeps the one on screen. Returns whether the asked-for drawing is shown."""
        step = self.session.current
        coloring, note = self._coloring(step)
        status = " · ".join(filter(None, [f"{len(step.graph)} nodes", f"step {step.index}", note]))
        try:
            rendering = render(step.graph, collapse=self.graph.collapsed,
                               expand=self._open | ({reveal} if reveal else set()), **coloring)
            same = rendering.dot.source == self._drawn_source  # e.g. timings arrived in "op" colouring
            svg = None if same else rendering.svg
        except FxvizError as exc:  # e.g. a layout that would take too long: no stale picture
            if keep_on_error and self._drawn_source:
                self._say(f"{exc} The drawing on screen is kept.")
                self.graph.collapsed = self._drawn_collapsed
                return False
            self._say(str(exc))
            self._drawn_source = ""
            with self.graph.hold_sync():
                self.graph.svg, self.graph.elements, self.graph.legend = "", {}, []
                self.graph.status = f"step {step.index} not drawn: see the error above"
            return False
        if same:
            self.graph.status = status
            return True
        self._drawn_collapsed = list(rendering.collapsed)
        self._open = set(rendering.expanded)
        self._drawn_source = rendering.dot.source
        with self.graph.hold_sync():
            self.graph.svg, self.graph.elements, self.graph.legend = svg, rendering.elements, rendering.legend
            self.graph.legend_mode = coloring.get("color_by") or "op"
            self.graph.collapsed = self._drawn_collapsed
            self.graph.status = status
        return True

    def _coloring(self, step: Any) -> tuple[dict[str, Any], str]:
        """``render`` options for the colour mode, and a note when it falls back to op."""
        mode = self.graph.color_mode
        if mode == "flops":
            return {"color_by": "flops"}, ""
        if mode not in ("time", "diff"):
            return {}, ""
        if mode == "diff" and step.index == 0:
            return {}, "step 0 has no previous step: coloured by op"
        if mode == "diff":  # both steps timed in one interleaved run, never two cached profiles
            compared = self.profiler.compared(self.session.steps[step.index - 1], step)
            if compared is None or compared.error:
                why = compared.error if compared else "waiting for the A/B timing of both steps"
                return {}, f"diff: {why}; coloured by op"
            marks = compared.comparison.node_marks()
            return {"color_by": "diff", "marks": marks}, f"diff against step {step.index - 1} (A/B, beyond noise)"
        timings = [self.profiler.known(step)]
        if any(t is None or t.error for t in timings):
            return {}, f"{mode}: {_why_untimed(self.profiler, timings)}; coloured by op"
        table = timings[0].table
        return {"color_by": "time", "values": dict(zip(table["node"], table["share"]))}, "time share (%)"

    def _on_selected(self, change: dict[str, Any]) -> None:
        with self._ui:
            name, step = change["new"], self.session.current
            if self._revealing:
                return
            if name in step.graph and f"fx-{name}" not in self.graph.elements and self._drawn_source:
                self._reveal(name)
            self.details.show(step.graph, name, self.profiler.known(step))
            self._show_code()
            self.passes.select_node(name)

    def _reveal(self, name: str) -> None:
        """Open the boxes around a selected node that a collapsed box hides (e.g. a
        search hit), then select it again so the view pans to it in the new drawing."""
        self._draw(reveal=name)
        # The browser pans only on a change of `selected`: clear it and set it again.
        self._revealing = True
        try:
            self.graph.selected = ""
            self.graph.selected = name
        finally:
            self._revealing = False

    def _show_code(self) -> None:
        """The Code tab; on a large graph only while it is open: highlighting the code of
        thousands of nodes takes seconds, which no other tab's user should wait for."""
        if self.tabs.selected_index == CODE_TAB or len(self.session.current.graph) <= EAGER_CODE_NODES:
            name = self.graph.selected
            self.code.show(self.session, name, self._op(name))

    def _show_source(self) -> None:
        """The Details tab's source link: the Code tab, on the model's code the node came from."""
        self.code.source.value = True
        self.tabs.selected_index = CODE_TAB
        self._show_code()

    def _on_collapsed(self, change: dict[str, Any]) -> None:
        if change["new"] != self._drawn_collapsed:  # a click in the view, not our own draw
            with self._ui:
                new, before = set(change["new"]), self._open
                self._open = (self._open | (set(self._drawn_collapsed or ()) - new)) - new
                if not self._draw(keep_on_error=True):
                    self._open = before

    def _op(self, name: str) -> str:
        graph = self.session.current.graph
        return graph.nodes[name]["op"] if name in graph else ""


def _named(widget: Any, css_class: str) -> Any:
    widget.add_class(css_class)
    return widget


def _rows(graph: Any, timings: Timings | None) -> list[dict[str, Any]]:
    """One node-table row per node, in graph order, with its time when profiled."""
    table = timings.table.set_index("node") if timings is not None and timings.table is not None else None
    rows = []
    for name, a in graph.nodes(data=True):
        timed = table is not None and name in table.index
        rows.append({
            "index": a["index"], "name": name, "op": a["op"], "target": a["target"],
            "module_path": a["module_path"] or "", "shape": shape_text(a["shape"]),
            "flops": None if a["flops"] is None else int(a["flops"]),
            "bytes": a.get("bytes"),
            "time_us": float(table.at[name, "median_us"]) if timed else None,
            "share": float(table.at[name, "share"]) if timed else None,
        })
    return rows


def _tooltip(row: dict[str, Any], graph: Any) -> dict[str, Any]:
    """What the graph view knows of a node: tooltip strings, and its inputs and users
    (in argument order) for walking the graph with the arrow keys."""
    name = row["name"]
    time = "" if row["time_us"] is None else f"{row['time_us']:.1f} µs ({row['share']:.1f} %)"
    return {"op": row["op"], "target": row["target"], "module_path": row["module_path"],
            "shape": row["shape"], "time": time,
            "inputs": list(graph.predecessors(name)), "users": list(graph.successors(name))}


def _why_untimed(profiler: Profiler, timings: list[Timings | None]) -> str:
    errors = [t.error for t in timings if t is not None and t.error]
    if errors:
        return errors[0]
    return "profiling is off (Timing tab: profile this step)" if profiler.mode == "off" else "waiting for the profile"

"""Two steps side by side in the Explorer: the earlier step's graph (removed and changed
nodes marked) beside the later one's (added and changed marked), full width under the
Explorer's main row, as Model Explorer shows a diff.

Each side is a :class:`GraphView` drawn by a :class:`GraphDrawing` (the box budget,
clicked boxes, revealing a node in a collapsed box), in the "diff" colouring with
:func:`fxviz.diff.side_by_side.legend`'s legend. A node selected in one side is selected
in the other through its counterpart (a removed BatchNorm -> the conv that absorbed
it) and in the Explorer's view where the step shown there has it.

Stable CSS classes: fxviz-side-by-side (the panel), fxviz-sbs-summary (the one-line
summary), fxviz-sbs-close (button), fxviz-sbs-error, fxviz-sbs-a / fxviz-sbs-b (each
side: its fxviz-sbs-label heading and its GraphView).
"""
from __future__ import annotations

from functools import partial
from typing import Any

import ipywidgets as w

from fxviz.draw import colour_modes
from fxviz.present.markup import escape
from fxviz.diff.side_by_side import SIDES, counterparts, legend, summary

from ._tree import close_tree
from .graph_drawing import GraphDrawing
from .graph_view import GraphView
from .node_records import node_columns

OTHER = {"a": "b", "b": "a"}
MARKED = {"a": "removed and changed nodes marked", "b": "added and changed nodes marked"}


class SideBySide(w.VBox):
    """Hidden until :meth:`show` gets a :class:`fxviz.diff.comparison.Comparison`; the close
    button hides it again. ``main``: the Explorer's view, which follows a selection."""

    def __init__(self, main: GraphView):
        self._main = main
        self._comparison: Any = None
        self._syncing = False  # a selection made here to follow another: not followed back
        self.summary = w.HTML().add_class("fxviz-sbs-summary")
        self.close_button = w.Button(description="close", icon="times", tooltip="close the side-by-side view",
                                     layout=w.Layout(width="auto")).add_class("fxviz-sbs-close")
        self.close_button.on_click(lambda _: self.hide())
        self.error = w.HTML().add_class("fxviz-sbs-error")
        # the one mode these views draw, named for what it compares here (the legend's heading)
        diff = [{**colour_modes.MODES["diff"].view(), "label": "diff of the two steps"}]
        self.views = {side: GraphView(color_modes=diff, color_mode="diff") for side in SIDES}
        self.labels = {side: w.HTML().add_class("fxviz-sbs-label") for side in SIDES}
        self._drawings: dict[str, GraphDrawing] = {}
        self._marks: dict[str, dict[str, str]] = {}
        self._to: dict[str, dict[str, str]] = {}
        for side, view in self.views.items():
            view.observe(partial(self._on_selected, side), "selected")
            view.observe(partial(self._on_collapsed, side), "collapsed")
            view.observe(partial(self._on_weights, side), "show_weights")
        sides = [w.VBox([self.labels[side], view], layout=w.Layout(width="50%")).add_class(f"fxviz-sbs-{side}")
                 for side, view in self.views.items()]
        # Its views join the page only while shown: hidden, they would double every control of the Explorer's.
        self._content = (w.HBox([self.summary, self.close_button]).add_class("fxviz-sbs-header"), self.error,
                         w.HBox(sides))
        super().__init__([], layout=w.Layout(display="none"))
        self.add_class("fxviz-side-by-side")

    def show(self, comparison: Any) -> None:
        """Draw both steps of ``comparison`` (a ``Comparison``: its ``node_marks``, timed or
        not) and show the panel; an error is shown in it (a button's callback cannot raise)."""
        try:
            self._show(comparison)
        except Exception as exc:  # shown to the user, who cannot see a callback's traceback
            self._say(f"The side-by-side view could not be drawn: {type(exc).__name__}: {exc}")
        self.children = self._content
        self.layout.display = ""

    def _show(self, comparison: Any) -> None:
        self._comparison = None  # resetting the views below is not a user's click
        self.error.value = ""
        for view in self.views.values():
            view.selected, view.collapsed = "", []
        steps = {"a": comparison.step_a, "b": comparison.step_b}
        self._marks = {side: comparison.node_marks(side) for side in SIDES}
        self._to = counterparts(comparison.structure)
        self._drawings = {side: GraphDrawing(view, self._say) for side, view in self.views.items()}
        self._comparison = comparison
        self.summary.value = f"<b>{escape(summary(comparison))}</b>"
        for side, label in zip(SIDES, comparison.labels):
            self.labels[side].value = f"<b>{escape(label)}</b> · {MARKED[side]}"
            self.views[side].nodes = node_columns(steps[side].graph)[1]  # tooltips, search, arrow keys
            self._draw(side)

    def hide(self) -> None:
        """Hide the panel and let go of the steps it showed."""
        self.layout.display = "none"
        self.children = ()
        self._comparison, self._marks, self._to, self._drawings = None, {}, {}, {}
        for view in self.views.values():
            with view.hold_sync():
                view.svg, view.elements, view.legend, view.nodes, view.selected = "", {}, [], {}, ""

    def close(self) -> None:
        """Close its views too, shown or not (hidden, they are not its children)."""
        if self.children != self._content:
            for part in self._content:
                close_tree(part)
        super().close()

    def _shown(self) -> bool:
        return self._comparison is not None

    def _draw(self, side: str, reveal: str = "", *, keep_on_error: bool = False) -> bool:
        step = self._comparison.step_a if side == "a" else self._comparison.step_b
        shown = self._drawings[side].draw(step, {"color_by": "diff", "marks": self._marks[side]},
                                          f"against step {self._other_step(side).index}",
                                          reveal, keep_on_error=keep_on_error)
        self.views[side].legend = legend(self._marks[side]) if self.views[side].svg else []
        return shown

    def _other_step(self, side: str) -> Any:
        return self._comparison.step_b if side == "a" else self._comparison.step_a

    def _on_selected(self, side: str, change: dict[str, Any]) -> None:
        if self._syncing or not self._shown():
            return
        name, other = change["new"], OTHER[side]
        there = self._to[side].get(name, "")
        self._syncing = True
        try:
            self._reveal(side, name)
            self._reveal(other, there)
            self.views[other].selected = there
            self._follow_in_main(name, there)
        finally:
            self._syncing = False

    def _reveal(self, side: str, name: str) -> None:
        """Open the boxes hiding ``name`` in ``side``'s drawing (a search hit, a counterpart)."""
        if name and self._drawings[side].hides(name):
            self._drawings[side].reveal(name, lambda hidden: self._draw(side, hidden))

    def _follow_in_main(self, *names: str) -> None:
        """Select the first of ``names`` that the Explorer's view has (the step it shows)."""
        if self._main.pending:  # a large graph's records not sent yet
            self._main.pending()
        found = next((name for name in names if name and name in self._main.nodes), None)
        if found:
            self._main.select(found)

    def _on_weights(self, side: str, _: Any) -> None:
        if self._shown():
            self._draw(side)

    def _on_collapsed(self, side: str, change: dict[str, Any]) -> None:
        if self._shown():
            self._drawings[side].follow_click(change["new"], partial(self._draw, side, keep_on_error=True),
                                              self.views[side].selected)

    def _say(self, message: str) -> None:
        self.error.value = f"<div class='fxviz-error-message' role='alert'>{escape(message)}</div>" if message else ""

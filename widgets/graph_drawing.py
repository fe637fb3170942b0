"""The Explorer's drawing of the current step: which boxes are open, laying out only a
new DOT, keeping the picture on screen when a drawing the user asked for fails, and
revealing a node hidden in a collapsed box. Every drawing keeps within render's box
budget: the boxes the user opened last win, older ones close when there is no room,
and a layout that runs out of time gives a coarser drawing; the status line says so."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fxviz.draw import colour_modes
from fxviz.errors import FxvizError
from fxviz.draw.render import render

from .graph_view import GraphView


class GraphDrawing:
    """Draws steps into ``view``; ``say(message)`` shows an error line."""

    revealing = False  # re-selecting a node just revealed: the panels show it once

    def __init__(self, view: GraphView, say: Callable[[str], None]):
        self.view, self._say = view, say
        self.modes = list(view.color_modes)  # the view's own list, of which each graph is offered its part
        self.collapsed: list[str] | None = None  # the collapsed boxes on screen, in drawing order
        self.open: list[str] = []  # boxes the view keeps open, most wanted (latest opened) first
        self.source = ""  # the DOT on screen: the same DOT is not laid out twice
        self.note = ""  # what the drawing on screen left out (Rendering.note)
        self.wants_all = False  # the drawing asked for has no box collapsed ("Expand all")

    def draw(self, step: Any, coloring: dict[str, Any], note: str, reveal: str = "", *,
             keep_on_error: bool = False) -> bool:
        """Draw ``step`` with ``render`` options ``coloring`` and the boxes the user opened
        and closed (the first draw opens what fits); ``reveal``: a node hidden in a
        collapsed box to open up to. ``keep_on_error``: a drawing the user asked for (a
        collapse or expand) that cannot be laid out keeps the one on screen. Returns
        whether the asked-for drawing is shown."""
        view = self.view
        has = {m["name"] for m in colour_modes.views(step.graph)}
        offered = [m for m in self.modes if m["name"] in has or m["name"] not in colour_modes.MODES]
        if view.color_modes != offered:  # e.g. "kernel" only on a graph inductor compiled
            view.color_modes = offered
        status = " · ".join(filter(None, [f"{len(step.graph)} nodes", f"step {step.index}", note]))
        try:
            rendering = render(step.graph, collapse=view.collapsed, expand=[reveal, *self.open] if reveal else self.open,
                               show_weights=view.show_weights, **coloring)
            same = rendering.dot.source == self.source  # e.g. timings arrived in "op" colouring
            if not same:
                asked, rendering = rendering, rendering.drawn()  # a coarser drawing if dot runs out of time
                svg = rendering.svg
        except FxvizError as exc:  # e.g. a layout that would take too long: no stale picture
            if keep_on_error and self.source:
                self._say(f"{exc} The drawing on screen is kept.")
                view.collapsed = self.collapsed
                return False
            self._say(str(exc))
            self.source = ""
            with view.hold_sync():
                view.svg, view.elements, view.legend = "", {}, []
                view.status = f"step {step.index} not drawn: see the error above"
            return False
        if same:
            if self.wants_all and self.collapsed:  # asked again: said again, and the view's boxes put back
                self.note = left_closed(rendering.elements, len(step.graph))
                view.collapsed = self.collapsed
            view.status = " · ".join(filter(None, [status, self.note]))
            return True
        self.collapsed = [e["name"] for e in rendering.elements.values() if e["kind"] == "collapsed"]
        self.open = list(rendering.expanded)
        self.source, self.note = rendering.dot.source, rendering.note
        if self.wants_all and self.collapsed:
            # Every box left closed, in its own words (the plan's note counts only the boxes asked
            # open); a coarser drawing's note, why fewer are drawn, stays.
            kept = rendering.note if rendering is not asked else ""
            self.note = "; ".join(filter(None, [kept, left_closed(rendering.elements, len(step.graph))]))
        status = " · ".join(filter(None, [status, self.note]))
        with view.hold_sync():
            view.svg, view.elements, view.legend = svg, rendering.elements, rendering.legend
            view.legend_mode = coloring.get("color_by") or "op"
            view.collapsed = self.collapsed
            view.status = status
        return True

    def hides(self, name: str) -> bool:
        """Whether node ``name`` is in a collapsed box of the drawing on screen."""
        return f"fx-{name}" not in self.view.elements and bool(self.source)

    def reveal(self, name: str, redraw: Callable[[str], Any]) -> None:
        """Open the boxes around a selected node that a collapsed box hides (e.g. a
        search hit) with ``redraw(name)``, then select it again so the view pans to it."""
        redraw(name)
        # The browser pans only on a change of `selected`: clear it and set it again.
        self.revealing = True
        try:
            self.view.selected = ""
            self.view.selected = name
        finally:
            self.revealing = False

    def follow_click(self, collapsed: list[str], redraw: Callable[[str], bool], selected: str = "") -> None:
        """A collapse or expand clicked in the view: keep the user's boxes open and
        redraw with ``redraw(reveal)``; a drawing that cannot be laid out leaves
        everything as it was. An expand (Expand all on a graph bigger than the budget
        included) keeps the ``selected`` node drawn: its boxes open first."""
        if collapsed == self.collapsed:  # our own draw, not a click
            return
        new, before = set(collapsed), self.open
        opened = [p for p in self.collapsed or () if p not in new]  # in drawing order: top first
        self.open = opened + [p for p in self.open if p not in new and p not in opened]
        self.wants_all = not collapsed
        try:
            if not redraw(selected if opened else ""):
                self.open = before
        finally:
            self.wants_all = False


def left_closed(elements: dict[str, dict[str, Any]], total: int) -> str:
    """What "Expand all" left collapsed in a drawing of ``elements`` (of a graph of
    ``total`` nodes), why, and what to do: said, never silent."""
    boxes = sum(e["kind"] == "collapsed" for e in elements.values())
    drawn = sum(e["kind"] == "node" for e in elements.values())
    return (f"Expand all left {boxes} {'box' if boxes == 1 else 'boxes'} collapsed ({drawn:,} of {total:,} nodes "
            "drawn): opening more would make the layout slow; click a box to open it")

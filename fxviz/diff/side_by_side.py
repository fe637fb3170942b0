"""Two steps' graphs side by side, each coloured by its structural diff marks: the
earlier step's removed and changed nodes, the later step's added and changed ones
(:func:`fxviz.diff.structure.structure`, refined to faster/slower once timed).

What both the headless view (:class:`SideBySide`, HTML that shows without a kernel:
nbconvert, GitHub) and the Explorer's panel (widgets/panel_side_by_side.py) show: the
one-line summary, each side's legend, and which node of one side stands for a node of
the other (a fused conv for its absorbed BatchNorm).
"""
from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any

from fxviz.draw.colour_modes import MARK_COLORS, MARK_MEANINGS
from fxviz.errors import InputError
from fxviz.present.markup import escape
from fxviz.draw.render import Rendering, render

if TYPE_CHECKING:  # pandas loads where a table is made, not with the Explorer
    import pandas as pd

__all__ = ["SideBySide", "summary", "legend", "counterparts", "SIDES", "MEANINGS"]

SIDES = ("a", "b")
#: each mark as a side's legend says it: step a is drawn on the left, step b on the right
MEANINGS = {**MARK_MEANINGS, "removed": "removed (not in the step on the right)",
            "added": "added (not in the step on the left)"}
#: render's options a caller may give: the colouring is the diff's own
OPTIONS = set(inspect.signature(render).parameters) - {"source", "color_by", "values", "marks"}
STYLE = """<style>
.fxviz-sbs { color: var(--jp-content-font-color1, #222); font-size: var(--jp-content-font-size1, 13px); }
.fxviz-sbs table { border-collapse: collapse; width: 100%; table-layout: fixed; }
.fxviz-sbs td { vertical-align: top; padding: 2px 4px; width: 50%; }
.fxviz-sbs-graph { max-height: 80vh; overflow: auto; border: 1px solid var(--jp-border-color2, #e0e0e0);
  background: var(--jp-layout-color0, #fff); }
.fxviz-sbs-graph svg { max-width: 100%; height: auto; }
.fxviz-sbs-swatch { display: inline-block; width: 10px; height: 10px; margin: 0 3px 0 8px;
  border: 1px solid #6b7280; }
.fxviz-sbs-note { color: var(--jp-content-font-color2, #666); font-size: 0.9em; }
</style>"""


def summary(comparison: Any) -> str:
    """One line: the pass (or the two steps) and how many nodes it changed, removed and
    added, e.g. ``"fuse_conv_bn: 20 changed, 20 removed, 0 added"``."""
    counts = comparison.structure["mark"].value_counts()
    what = ", ".join(f"{counts.get(mark, 0)} {mark}" for mark in ("changed", "removed", "added"))
    a, b = (getattr(step, "index", None) for step in (comparison.step_a, comparison.step_b))
    name = getattr(comparison.step_b, "pass_name", None) if a is not None and b == a + 1 else None
    return f"{name or ' → '.join(comparison.labels)}: {what}"


def legend(marks: dict[str, str]) -> list[dict[str, str]]:
    """The legend of one side's drawing: only the marks it shows, with their meanings."""
    shown = set(marks.values())
    return [{"label": MEANINGS[mark], "color": color} for mark, color in MARK_COLORS.items() if mark in shown]


def counterparts(structure: pd.DataFrame) -> dict[str, dict[str, str]]:
    """For each side, node name -> the node of the other side that stands for it: itself
    where both steps have it (the node of a it is: ``node_a``), else what absorbed it (a
    removed BatchNorm -> its conv) or the first node it took over (an added node); "" for none."""
    to = {"a": {}, "b": {}}
    for node, mark, other, was in zip(*(structure[c] for c in ("node", "mark", "counterpart", "node_a"))):
        if mark == "removed":
            to["a"][node] = other
        elif mark == "added":
            to["b"][node] = other.split(", ")[0]
        else:
            to["a"][was], to["b"][node] = node, was
    return to


class SideBySide:
    """The two steps of ``comparison`` drawn side by side (``options``: those of
    :func:`fxviz.draw.render.render`, e.g. ``max_nodes``; its box budget by default).
    Shows in a notebook as HTML, two SVGs in a table (every user string escaped):
    ``fxviz.Session(...).compare(0, 1).side_by_side()``."""

    def __init__(self, comparison: Any, **options: Any):
        unknown = sorted(options.keys() - OPTIONS)
        if unknown:
            raise InputError(f"side_by_side() takes render's drawing options ({', '.join(sorted(OPTIONS))}), "
                             f"not {', '.join(unknown)}: it colours both graphs by their diff marks itself.")
        self.comparison, self.options = comparison, options

    @functools.cached_property
    def marks(self) -> dict[str, dict[str, str]]:
        """Side ("a", "b") -> its nodes' marks (:meth:`fxviz.diff.comparison.Comparison.node_marks`)."""
        return {side: self.comparison.node_marks(side) for side in SIDES}

    @functools.cached_property
    def drawings(self) -> tuple[Rendering, Rendering]:
        """Each side's drawing, laid out (a coarser one where dot ran out of time)."""
        steps = self.comparison.step_a, self.comparison.step_b
        return tuple(render(getattr(step, "graph", step.gm), color_by="diff", marks=self.marks[side],
                            **self.options).drawn() for side, step in zip(SIDES, steps))

    def __repr__(self) -> str:
        return f"SideBySide({summary(self.comparison)})"

    def _repr_html_(self) -> str:
        cells, heads = [], []
        for side, label, drawing in zip(SIDES, self.comparison.labels, self.drawings):
            keys = "".join(f'<span class="fxviz-sbs-swatch" style="background:{item["color"]}"></span>'
                           f'{escape(item["label"])}' for item in legend(self.marks[side]))
            note = f'<div class="fxviz-sbs-note">{escape(drawing.note)}</div>' if drawing.note else ""
            # one page holds both drawings: ids prefixed so that they stay unique
            svg = drawing.svg.replace(' id="', f' id="sbs-{side}-')
            heads.append(f"<td><b>{escape(label)}</b><div>{keys}</div>{note}</td>")
            cells.append(f'<td><div class="fxviz-sbs-graph">{svg}</div></td>')
        return "".join([STYLE, '<div class="fxviz-sbs">', f"<div><b>{escape(summary(self.comparison))}</b></div>",
                        f"<table><tr>{''.join(heads)}</tr><tr>{''.join(cells)}</tr></table></div>"])

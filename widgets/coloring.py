"""The Explorer's colouring: what the chosen colour mode needs measured, and the
``render`` options once it is known (or op colours, with a note saying why not yet).

Everything about a mode itself (its words, its data, its colours) is its entry in
:data:`fxviz.draw.colour_modes.MODES`; this module only maps its ``needs`` onto the
Explorer's measurements (:class:`fxviz.background.measure.Scheduler`).
"""
from __future__ import annotations

import weakref
from typing import Any

from fxviz.draw import colour_modes

from .profiling import Profiler


def pairs(mode: str, session: Any, step: Any) -> list[tuple[Any, Any]]:
    """The A/B pairs to measure for ``mode`` on ``step`` (its previous step and it)."""
    chosen = colour_modes.MODES.get(mode)
    needs_pair = chosen is not None and chosen.needs == "pair"
    return [(session.steps[step.index - 1], step)] if needs_pair and step.index else []


def coloring(mode: str, session: Any, step: Any, profiler: Profiler, against: Any = None) -> tuple[dict[str, Any], str]:
    """``render`` options for ``mode`` on ``step``, and the status note: the mode's own,
    or why it falls back to op colours (nothing to compare with, not measured yet).
    ``against``: the earlier step a mode of the two steps' values (error) compares with
    (default: the previous one); the timed diff compares with the previous step."""
    chosen = colour_modes.MODES.get(mode)
    if chosen is None:  # e.g. set from Python, or a mode removed from the table since
        return {}, f"{mode!r} is not a colour mode (the modes: {', '.join(colour_modes.MODES)}); coloured by op"
    if chosen.needs == "graph":
        return {"color_by": chosen.name}, chosen.note.format(previous=step.index - 1)
    if chosen.needs == "pair":
        if step.index == 0:
            return {}, "step 0 has no previous step: coloured by op"
        # both steps timed in one interleaved run, never two cached profiles
        previous = session.steps[step.index - 1]
        if chosen.fill is not colour_modes.by_mark:  # the two steps' values (error), not their timing
            earlier = previous if against is None else against
            return {"color_by": chosen.name, "values": _of_pair(earlier, step, chosen.name, chosen.data)}, \
                chosen.note.format(previous=earlier.index)
        compared = profiler.compared(previous, step)
        if compared is None or compared.error:  # the structure needs no timing: drawn at once
            why = compared.error if compared else "timing both steps (A/B)…"
            marks = _of_pair(previous, step, "marks", lambda comparison: comparison.node_marks())
            return {"color_by": chosen.name, "marks": marks}, \
                f"diff against step {previous.index}: structure only; {why}"
        source = compared.comparison
    else:
        timings = profiler.known(step)
        if timings is None or timings.error:
            return {}, f"{chosen.name}: {_why_untimed(profiler, timings)}; coloured by op"
        source = timings.table
    data = chosen.data(source) if chosen.data else None
    return {"color_by": chosen.name, "values": data}, chosen.note.format(previous=step.index - 1)


#: step -> earlier step -> (their Comparison, {what: data made of it}); weak both ways
_pairs: weakref.WeakKeyDictionary[Any, weakref.WeakKeyDictionary[Any, tuple[Any, dict[str, Any]]]] = \
    weakref.WeakKeyDictionary()


def comparison(previous: Any, step: Any) -> Any:
    """``compare(previous, step)``, made once per pair (going back to an earlier choice of
    ``previous`` runs nothing again): what it works out (the structure, the numerics: both
    steps run) serves the colour modes and the Explorer's panels alike."""
    return _pair(previous, step)[0]


def _pair(previous: Any, step: Any) -> tuple[Any, dict[str, Any]]:
    known = _pairs.setdefault(step, weakref.WeakKeyDictionary())
    if previous not in known:
        from fxviz.diff.comparison import compare  # pandas, which a first view does not need

        known[previous] = (compare(previous, step), {})
    return known[previous]


def _of_pair(previous: Any, step: Any, what: str, data: Any) -> Any:
    """``data(comparison(previous, step))`` (the structural diff marks, the error per node),
    once per pair and ``what``."""
    found, made = _pair(previous, step)
    if what not in made:
        made[what] = data(found)
    return made[what]


def _why_untimed(profiler: Profiler, timings: Any) -> str:
    if timings is not None and timings.error:
        return timings.error
    return "profiling is off (Timing tab: profile this step)" if profiler.mode == "off" else "waiting for the profile"

"""The Memory tab: the bytes of activations alive over the step's execution, where the
peak is (a button selects that node), and what Details says of one node's memory.

All from :func:`fxviz.checks.memory.memory` of the step's shapes (so models on ``meta`` answer
too), never by running the model: on CUDA ``Step.memory`` also measures one forward,
which the panel shows once it is known, but a display must not run the model behind the
profiler's back. The chart is drawn when the tab is shown: matplotlib's first import
takes half a second, which the first graph should not wait for.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import ipywidgets as w

from fxviz.present.chart import chart_svg
from fxviz.present.markup import escape
from fxviz.checks.memory import memory, memory_change, plot_memory
from fxviz.present.node_table import human_bytes


class MemoryPanel(w.VBox):
    """The memory of ``session``'s current step, and how its peak moved from the step
    before; ``select(name)`` selects a node."""

    def __init__(self, select: Callable[[str], Any], session: Any):
        self._select, self._session = select, session
        self._open: Callable[[], bool] = lambda: True
        self._shown: Any = None  # the step drawn
        self._nodes: weakref.WeakKeyDictionary[Any, tuple[dict, dict]] = weakref.WeakKeyDictionary()
        self.summary = w.HTML().add_class("fxviz-memory-summary")
        self.peak = w.Button(icon="crosshairs", layout=w.Layout(width="auto"), tooltip="select the node at the peak")
        self.peak.add_class("fxviz-memory-peak")
        self.peak.on_click(lambda _: self._select(self._nodes[self._shown][1]["peak_node"]))
        self.chart = w.HTML().add_class("fxviz-memory-chart")
        super().__init__([self.summary, self.peak, self.chart])
        self.add_class("fxviz-memory-panel")

    def follow(self, tabs: w.Tab, index: int) -> None:
        """Be drawn only while tab ``index`` of ``tabs`` is open (and when it opens)."""
        self._open = lambda: tabs.selected_index == index
        tabs.observe(lambda _: self.refresh(), "selected_index")

    def refresh(self) -> None:
        """Draw the current step, if it is not drawn and the tab is open."""
        if self._open():
            self.show(self._session.current)

    def show(self, step: Any) -> None:
        """Draw ``step``'s memory (once per step)."""
        if step is self._shown:
            return
        self._shown = step
        frame = _estimate(step)
        self._nodes[step] = _by_node(frame)
        attrs = frame.attrs
        peak, where = attrs["peak_bytes"], attrs["peak_node"]
        self.peak.layout.display = "" if where else "none"
        self.peak.description = f"select the peak: {where}"
        unknown = attrs["unknown"]
        missing = f" {len(unknown)} node(s) of unknown size counted as 0 (first: {unknown[0]})." if unknown else ""
        measured = attrs.get("measured_peak_bytes")
        measured = (f" Measured on the GPU over one forward: {human_bytes(measured)} (the estimate is "
                    f"{peak / measured:.2f}× that)." if measured else "")
        self.summary.value = (
            f"<p><b>Peak: {escape(human_bytes(peak))}</b> of activations alive, at <b>{escape(str(where))}</b> "
            f"(node {frame.index[frame['node'] == where][0] + 1 if where else 0} of {len(frame)} in execution "
            f"order). Inputs ({escape(human_bytes(attrs['input_bytes']))}) and weights "
            f"({escape(human_bytes(attrs['weight_bytes']))}) live throughout and are counted apart.</p>"
            '<p class="fxviz-hint">Estimated from shapes: a value dies after its last user; views and in-place '
            f"ops share their input's memory. The allocator's caching and workspaces come on top."
            f"{escape(measured)}{escape(missing)}</p>"
            f"{self._moved(step)}")
        self.chart.value = chart_svg(lambda ax: plot_memory(frame, ax), rows=8)

    def _moved(self, step: Any) -> str:
        """How the peak moved from the step before (``Comparison.memory``'s words), as a line."""
        if step.index == 0:
            return ""
        change = memory_change(_estimate(self._session.steps[step.index - 1]), _estimate(step))
        (peak_a, node_a), (peak_b, node_b) = change[["peak_bytes", "peak_node"]].itertuples(index=False)
        moved = "the peak moved to another node" if change.attrs["moved"] else "at the same node"
        ratio = change.attrs["ratio"]
        times = f"{ratio:.2f}×" if ratio == ratio else "from none"
        return (f'<p class="fxviz-memory-moved">Against step {step.index - 1}: peak {escape(human_bytes(peak_a))} at '
                f"{escape(str(node_a))} → {escape(human_bytes(peak_b))} at {escape(str(node_b))} ({times}, {moved}).</p>")

    def details_html(self, name: str) -> str:
        """Details' memory rows of node ``name`` of the current step."""
        step = self._session.current
        if name not in step.graph:
            return ""
        if step not in self._nodes:
            self._nodes[step] = _by_node(_estimate(step))
        nodes, attrs = self._nodes[step]
        (output, live), record = nodes[name], step.graph.nodes[name]
        if name in attrs["unknown"]:
            own = "unknown (its size is not known: counted as 0)"
        elif record.get("weight") or record["op"] == "placeholder":
            own = "an input or weight: alive throughout, counted apart"
        elif output == 0 and record["op"] != "output":
            own = "none of its own (a view or in-place op: its input's memory)"
        else:
            own = human_bytes(output)
        peak = attrs["peak_bytes"]
        share = f" ({live / peak:.0%} of the peak, at {attrs['peak_node']})" if peak else ""
        rows = [("output", own), ("alive after it", f"{human_bytes(live)} of activations{share}")]
        cells = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
        return f'<div class="fxviz-details-memory"><b>Memory</b><table class="fxviz-kv">{cells}</table></div>'


def _estimate(step: Any) -> Any:
    """``step.memory`` where it is known (with the measured peak, on CUDA); else the same
    estimate from its shapes, running nothing."""
    known = vars(step).get("memory")
    return known if known is not None else memory(step.graph, step.gm)


def _by_node(frame: Any) -> tuple[dict[str, tuple[int, int]], dict[str, Any]]:
    """Each node's (output bytes, bytes alive) and the frame's attrs, for Details."""
    return dict(zip(frame["node"], zip(frame["output_bytes"], frame["live_bytes"]))), frame.attrs

"""The timing panel: per-node timing of the current step (summary, chart, table) and a
comparison of any two steps in TraceDiff's terms (added / deleted / increased /
decreased), with the top changes as a table and a chart."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as w

from fxviz.present.chart import chart_svg
from fxviz.present.markup import escape

from .profiling import Profiler, Timings

TOP = 15
DETAIL_ROWS = 200  # folded rows listed under the summary; the rest by "per kind" / "per node"
TIMING_COLUMNS = ["node", "kind", "median_us", "p25_us", "p75_us", "share"]
DIFF_COLUMNS = ["control_us", "test_us", "diff_duration", "ratio", "ratio_lo", "ratio_hi", "control_counts",
                "test_counts", "category"]


RATIOS = {column: "{:.2f}".format for column in ("ratio", "ratio_lo", "ratio_hi")}


def table_html(df: Any, na_rep: str = "") -> str:
    """Times to 0.1 µs, ratios to 0.01 (a 3 % change must not read 1.0)."""
    return df.to_html(index=False, escape=True, border=0, na_rep=na_rep, float_format="{:.1f}".format,
                      formatters={c: f for c, f in RATIOS.items() if c in df.columns}, classes="fxviz-table")


class TimingPanel(w.VBox):
    """Timings of the step given to :meth:`show`; "compare" profiles the two picked
    steps through ``profiler`` (in the background unless it is synchronous); "side by
    side" (shown when ``side_by_side`` is given) passes their Comparison to it."""

    def __init__(self, profiler: Profiler, profile_step: Callable[[], Any],
                 side_by_side: Callable[[Any], Any] | None = None):
        self._profiler = profiler
        self._session: Any = None
        self._step: Any = None
        self.summary = w.HTML()
        self.summary.add_class("fxviz-timing-summary")
        self.profile_button = w.Button(description="profile this step", icon="clock-o")
        self.profile_button.add_class("fxviz-profile")
        self.profile_button.on_click(lambda _: profile_step())
        self.chart = w.HTML(layout=w.Layout(display="none", max_width="100%"))
        self.chart.add_class("fxviz-timing-chart")
        self.table = w.HTML()
        self.table.add_class("fxviz-timing-table")
        self.step_a = w.Dropdown(description="control", layout=w.Layout(width="auto"))
        self.step_a.add_class("fxviz-compare-a")
        self.step_b = w.Dropdown(description="test", layout=w.Layout(width="auto"))
        self.step_b.add_class("fxviz-compare-b")
        self.level = w.Dropdown(options=["target", "kind", "node"], value="target", description="per",
                                layout=w.Layout(width="auto"))
        self.compare_button = w.Button(description="compare steps", icon="exchange")
        self.compare_button.add_class("fxviz-compare")
        self.compare_button.on_click(lambda _: self.compare())
        self.side_by_side_button = w.Button(description="side by side", icon="columns",
                                            tooltip="draw the two steps' graphs side by side, changes marked",
                                            layout=w.Layout(display="none" if side_by_side is None else ""))
        self.side_by_side_button.add_class("fxviz-side-by-side-open")
        if side_by_side is not None:
            self.side_by_side_button.on_click(lambda _: side_by_side(self.picked()))
        self.comparison = w.HTML()
        self.comparison.add_class("fxviz-compare-result")
        self.comparison_chart = w.HTML(layout=w.Layout(display="none", max_width="100%"))
        self.comparison_chart.add_class("fxviz-compare-chart")
        super().__init__([
            self.summary, self.profile_button, self.chart, self.table,
            w.HTML("<b>Compare steps</b>"), w.HBox([self.step_a, self.step_b]),
            w.HBox([self.level, self.compare_button, self.side_by_side_button]), self.comparison, self.comparison_chart,
        ])
        self.add_class("fxviz-timing-panel")

    def show(self, session: Any, timings: Timings | None) -> None:
        """Show the current step's ``timings`` (None: not profiled yet) and offer the
        session's steps for comparison (default: previous against current)."""
        if self._step is not session.current:
            options = [(f"step {s.index} · {s.pass_name}", s.index) for s in session.steps]
            self.step_a.options = self.step_b.options = options
            self.step_a.value, self.step_b.value = max(session.index - 1, 0), session.index
        self._session, self._step = session, session.current
        self.profile_button.layout.display = "none" if timings is not None and not (timings.error or timings.noisy) else ""
        if timings is None or timings.error:
            self.summary.value = _pending_text(self._profiler, timings)
            self.table.value = ""
            self.chart.layout.display = "none"
            return
        df, attrs = timings.table, timings.table.attrs
        self.summary.value = escape(
            f"Step {session.index}: forward {attrs['plain_forward_us']:.0f} µs "
            f"({attrs['profiled_forward_us']:.0f} µs profiled, {_overhead(attrs)}), "
            f"median of {attrs['repeats']} repeats on {attrs['device']}.") + _noise_html(timings) + _launch_html(attrs)
        rows = df.nlargest(TOP, "median_us")
        self.summary.value += _output_html(rows, len(df))
        self.table.value = table_html(rows[[*TIMING_COLUMNS, *[c for c in ("kernel_us", "host_us") if c in df]]])
        from fxviz.timing.profiling import plot_profile  # with pandas: loaded by the first timing shown

        self.chart.value = chart_svg(lambda ax: plot_profile(df, top=TOP, ax=ax), len(rows))
        self.chart.layout.display = ""

    def compare(self) -> None:
        """Time the two picked steps in one interleaved run, then show their timing diff."""
        steps = self._session.steps
        a, b, level = steps[self.step_a.value], steps[self.step_b.value], self.level.value
        self.comparison.value = escape(f"Timing steps {a.index} and {b.index}, interleaved…")
        self.comparison_chart.layout.display = "none"
        if not self._profiler.request(pairs=[(a, b)], then=lambda: self._show_comparison(a, b, level), force=True):
            self._show_comparison(a, b, level)

    def picked(self) -> Any:
        """The Comparison of the two picked steps: the profiler's A/B run where it has one."""
        a, b = (self._session.steps[picker.value] for picker in (self.step_a, self.step_b))
        compared = self._profiler.compared(a, b)
        if compared is not None and not compared.error:
            return compared.comparison
        from fxviz.diff.comparison import compare

        return compare(a, b)

    def _show_comparison(self, a: Any, b: Any, level: str) -> None:
        compared = self._profiler.compared(a, b)
        if compared is None:  # called back after another stage: not yet
            return
        error = compared.error
        try:
            if not error:
                self._draw_comparison(compared.comparison, level)
        except Exception as exc:  # shown here: a button callback's traceback is invisible
            error = f"comparing failed: {type(exc).__name__}: {exc}"
        if error:
            self.comparison.value = f'<div class="fxviz-timing-error">{escape(error)}</div>'

    def _draw_comparison(self, cmp: Any, level: str) -> None:
        from fxviz.timing.timing_ab import CATEGORIES

        diff = {"target": cmp.timing, "kind": cmp.timing_by_kind, "node": cmp.timing_by_node}[level]
        counts = diff["category"].value_counts()
        summary = ", ".join(f"{counts.get(c, 0)} {c}" for c in CATEGORIES)
        top = cmp.summary(level)[[level, *DIFF_COLUMNS]]
        changes = cmp.top(n=len(diff), level=level)
        rows = changes.head(DETAIL_ROWS)[[level, *DIFF_COLUMNS]]
        every = (f"<details><summary>{escape(f'every change per {level} ({len(changes)})')}</summary>"
                 f"{table_html(rows, na_rep='—')}</details>") if len(changes) > len(top) else ""
        self.comparison.value = (total_html(cmp)
                                 + f"<div>{escape(f'{cmp.labels[0]} → {cmp.labels[1]}, per {level}: {summary}.')}</div>"
                                 + (table_html(top, na_rep="—") + every if len(top)
                                    else "<div>No timing changes beyond the noise.</div>"))
        if len(top):
            self.comparison_chart.value = chart_svg(lambda ax: cmp.plot_top(level=level, ax=ax), len(top))
            self.comparison_chart.layout.display = ""


def total_html(cmp: Any) -> str:
    """The whole forward first: did the step get faster, by how much, and how sure."""
    row = cmp.timing_total.iloc[0]
    ratio = "" if row["ratio"] != row["ratio"] else \
        f", ratio {row['ratio']:.2f} ({row['ratio_lo']:.2f}–{row['ratio_hi']:.2f})"
    text = (f"Whole forward: {row['control_us']:.0f} → {row['test_us']:.0f} µs{ratio}: {row['category']} "
            f"(uninstrumented forwards, {row['rounds']} interleaved rounds, spread {row['spread']:.0%}).")
    return f'<div class="fxviz-compare-total">{escape(text)}</div>' + table_html(cmp.timing_total, na_rep="—")


def _pending_text(profiler: Profiler, timings: Timings | None) -> str:
    if timings is not None:
        return f'<div class="fxviz-timing-error">{escape(timings.error)}</div>'
    if profiler.mode == "off":
        return "Profiling is off for this Explorer: click “profile this step”."
    return "Profiling this step…"


def _overhead(attrs: dict) -> str:
    """The profiler's cost per node; never negative: below resolution, it says so."""
    if attrs.get("overhead_below_resolution"):
        return "overhead per node below resolution"
    return f"{attrs['overhead_per_node_us']:.1f} µs overhead per node"


def _output_html(slowest: Any, nodes: int) -> str:
    """The output node among the 3 slowest of a graph longer than the chart: its time is
    Python returning from forward (the results put into the structure the model returns,
    a variable per node freed: a quarter of a millisecond at 100,000 nodes), not an op."""
    if nodes <= TOP or "output" not in set(slowest["op"][:3]):
        return ""
    return '<div class="fxviz-hint">' + escape(
        "output: the time forward takes to return: putting the results into the structure the model returns "
        f"(a tuple, or a pytree of many tensors) and freeing its {nodes:,} variables (one per node); no op runs there.") \
        + "</div>"


def _launch_html(attrs: dict) -> str:
    """On a GPU: what the kernels add up to, and, when the GPU mostly waits for the
    host, that node times measure launching, not kernels."""
    if "device_forward_us" not in attrs:
        return ""
    text = (f"Device: the kernels of one forward take {attrs['device_forward_us']:.0f} µs; the nodes' kernel_us "
            f"add up to {attrs['kernel_sum_ratio']:.0%} of that. host_us is the time the host spent launching "
            "each node's operators.")
    if not attrs.get("launch_bound"):
        return '<div class="fxviz-hint">' + escape(text) + "</div>"
    return ('<div class="fxviz-timing-noisy">' + escape(
        f"Launch-bound: the GPU ran kernels for only {attrs['device_busy']:.0%} of the forward, so node times "
        "are mostly Python and launch time; kernel_us is each node's device time. A larger batch, or "
        "CUDA graphs / torch.compile, would keep the GPU busy. ") + escape(text) + "</div>")


def _noise_html(timings: Timings) -> str:
    attrs = timings.table.attrs
    if not (timings.noisy or attrs.get("noisy")):
        return ""
    taken = attrs.get("conditions", {})
    return ('<div class="fxviz-timing-noisy">' + escape(
        f"Too noisy to tell: forwards scattered by {attrs.get('spread', 0):.0%} (load "
        f"{taken.get('load', 0):.1f} on {taken.get('cpu_count', '?')} CPUs, {taken.get('threads', '?')} threads), "
        "even when measured again. Compare steps (interleaved) for changes, or profile again when the machine "
        "is quieter; on a machine busier than its CPUs, torch.set_num_threads(1) keeps torch's thread pool "
        "from stalling.") + "</div>")

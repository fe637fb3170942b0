"""The Timing panel's own pieces: a themed chart, an overhead that is never negative,
and a visible "too noisy to tell"."""
import dataclasses

import pandas as pd

from fxviz.background.measure import Timings
from fxviz.widgets.panel_timing import _launch_html, _noise_html, _overhead, chart_svg


def test_chart_is_transparent_svg_in_the_themes_colour_with_escaped_labels():
    svg = chart_svg(lambda ax: ax.barh(["<script>alert(1)</script>", "b"], [1, 2]), 2)
    assert svg.startswith("<svg") and "var(--jp-ui-font-color1, #333)" in svg
    assert 'width="100%" style="max-width: ' in svg.split(">")[0] and "viewBox" in svg.split(">")[0]
    assert "#ffffff" not in svg.lower() and "<script>" not in svg and "&lt;script&gt;" in svg


def test_overhead_below_resolution_is_said_not_shown_negative():
    assert _overhead({"overhead_per_node_us": 0.0, "overhead_below_resolution": True}) == \
        "overhead per node below resolution"
    assert _overhead({"overhead_per_node_us": 0.25, "overhead_below_resolution": False}) == \
        "0.2 µs overhead per node"


def test_a_noisy_profile_says_too_noisy_to_tell_with_its_conditions():
    table = pd.DataFrame({"node": ["x"]})
    table.attrs.update(noisy=True, spread=0.34, conditions={"load": 5.5, "cpu_count": 2, "threads": 2})
    text = _noise_html(Timings(table, noisy=True))
    assert "Too noisy to tell: forwards scattered by 34% (load 5.5 on 2 CPUs, 2 threads)" in text
    table.attrs["noisy"] = False
    assert _noise_html(Timings(table)) == ""


def test_a_launch_bound_gpu_profile_says_node_times_are_host_times():
    gpu = {"device_forward_us": 812.0, "kernel_sum_ratio": 0.97}
    note = _launch_html({"launch_bound": True, "device_busy": 0.23, **gpu})
    assert "Launch-bound" in note and "23%" in note and "kernel_us" in note
    assert "812 µs" in note and "97%" in note and "host_us" in note  # what the device times add up to
    busy = _launch_html({"launch_bound": False, "device_busy": 0.9, **gpu})
    assert "Launch-bound" not in busy and "97%" in busy
    assert _launch_html({}) == ""  # a CPU profile has no such attribute


def test_a_long_graphs_output_among_the_slowest_is_said_to_be_python_returning():
    """At thousands of nodes, returning from forward (freeing a variable per node) outlasts
    any small op (13-34 µs against 1-2 µs per negation at 3,000 nodes): the output node
    tops the chart, and the panel says why. Which node is slowest is a timing, not a fact
    a test can rely on under load: the rows are the real profile's, the order is given."""
    import torch

    import fxviz
    from fxviz.widgets.panel_timing import TOP, _output_html

    class Chain(torch.nn.Module):
        def forward(self, x):
            for _ in range(3000):
                x = -x
            return x

    df = fxviz.profile(fxviz.trace(Chain()), (torch.randn(2),), warmup=0, repeats=3)
    output, negations = df[df["op"] == "output"], df[df["op"] == "call_function"]
    for place in range(3):  # the output among the 3 slowest, wherever it ranks
        slowest = pd.concat([negations.iloc[:place], output, negations.iloc[place:]]).head(TOP)
        assert "freeing its 3,002 variables" in _output_html(slowest, len(df))
    assert _output_html(negations.head(TOP), len(df)) == "" and _output_html(slowest, TOP) == ""


def test_the_compare_table_shows_the_whole_forward_first_the_ratios_and_one_row_per_alike_rows():
    import numpy as np
    import torch

    import fxviz
    from fxviz.background.measure import Compared, Scheduler
    from fxviz.widgets.panel_timing import TimingPanel
    from test_compare import TinyResNet, synthetic_pair

    session = fxviz.Session(TinyResNet().eval(), torch.randn(1, 3, 8, 8))
    session.apply("lower_modules")
    a, b = session.steps
    paired = synthetic_pair(a.gm, b.gm, times_a={"add": 10.0}, times_b={"add": 20.0})
    forwards = np.full(12, 100.0) + np.arange(12) % 3
    paired = dataclasses.replace(paired, forward_a=forwards, forward_b=forwards * 0.5)

    class Known(Scheduler):
        def compared(self, step_a, step_b):
            return Compared(fxviz.compare(step_a, step_b, paired=paired))

    panel = TimingPanel(Known("off"), profile_step=lambda: None)
    panel.show(session, None)
    panel.step_a.value, panel.step_b.value = 0, 1
    panel.compare()
    html = panel.comparison.value
    assert html.index("Whole forward: 100 → 50 µs, ratio 0.50 (0.50–0.50): faster") < html.index("per target")
    assert "<td>4 × ReLU deleted</td>" in html.split("<details>")[0]  # one row, first table
    assert "<td>operator.add</td>" in html and "<td>1.33</td>" in html  # 30 -> 40 µs: its ratio, not a blank
    assert html.count("(ReLU)</td>") == 4 and html.index("(ReLU)</td>") > html.index("<details>")

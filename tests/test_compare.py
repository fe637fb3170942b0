"""Comparing two steps: code, graph, timing (TraceDiff's categories) and outputs."""
import math
import operator
import re
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
import torch
import torch.fx
import torchvision
from torch import nn
from torch.fx.experimental.optimization import fuse

from fxviz import timing_ab
from fxviz.comparison import code_diff_html, compare, graph_diff
from fxviz.errors import FxvizError
from fxviz.profiling import profile
from fxviz.timing_ab import PairedTimes
from fxviz.timing_diff import diff_timing, plot_top, top_changes
from fxviz.capture import trace


def make_step(index, gm, inputs, profile_df=None, pass_name=None):
    """A stand-in for Session's Step: the attributes compare() relies on."""
    cache = []

    def cached_profile(**kwargs):
        if not cache:
            cache.append(profile_df if profile_df is not None else profile(gm, inputs, **kwargs))
        return cache[0]

    return SimpleNamespace(index=index, gm=gm, code=gm.code, example_inputs=inputs,
                           pass_name=pass_name, profile=cached_profile)


def timings(rows):
    """A profile-like frame from (target, median, p25, p75) tuples."""
    df = pd.DataFrame(rows, columns=["target", "median_us", "p25_us", "p75_us"])
    df["node"] = [f"n{i}" for i in range(len(df))]
    return df


@pytest.fixture(scope="module")
def fusion():
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    gm = trace(model)
    return compare(make_step(0, gm, (x,)), make_step(1, fuse(gm), (x,), pass_name="fuse"),
                   profile_kwargs={"warmup": 1, "repeats": 3})


# -- the category logic, on synthetic timings ------------------------------------------

def test_categories_follow_counts_then_time_beyond_the_measured_spread():
    control = timings([
        ("same", 100, 95, 105),      # moves by 3 within a spread of 10: unchanged
        ("slower", 100, 99, 101),    # moves by 20, spread 2 and 4: increased
        ("faster", 100, 99, 101),    # moves by -20: decreased
        ("gone", 50, 49, 51),        # only in control: deleted
        ("twice", 10, 9, 11),        # count 1 -> 2: increased, even though faster in total
    ])
    test = timings([
        ("same", 103, 97, 107),
        ("slower", 120, 118, 122),
        ("faster", 80, 79, 81),
        ("new", 7, 6, 8),            # only in test: added
        ("twice", 4, 3, 5),
        ("twice", 4, 3, 5),
    ])
    diff = diff_timing(control, test).set_index("target")
    assert diff["category"].to_dict() == {
        "same": "unchanged", "slower": "increased", "faster": "decreased",
        "new": "added", "twice": "increased", "gone": "deleted",
    }
    assert diff.loc["twice", ["control_counts", "test_counts", "diff_counts"]].tolist() == [1, 2, 1]
    assert diff.loc["twice", "diff_duration"] == pytest.approx(-2)
    assert diff.loc["gone", ["test_counts", "test_us", "diff_duration"]].tolist() == [0, 0, -50]
    assert diff.loc["same", "noise_us"] == 10  # the larger of the two IQRs


def test_noise_threshold_scales_with_spread_not_exact_equality():
    control, test = timings([("op", 100, 90, 110)]), timings([("op", 115, 105, 125)])
    assert diff_timing(control, test)["category"].item() == "unchanged"          # 15 < IQR 20
    assert diff_timing(control, test, noise=0.5)["category"].item() == "increased"  # 15 > 10
    tight = timings([("op", 100, 100, 100)]), timings([("op", 100.5, 100.5, 100.5)])
    assert diff_timing(*tight)["category"].item() == "increased"  # no spread: any change counts


def test_diff_by_another_key_and_bad_input():
    control = timings([("a", 1, 1, 1), ("b", 2, 2, 2)]).assign(kind="K")
    test = timings([("a", 1, 1, 1)]).assign(kind="K")
    by_kind = diff_timing(control, test, key="kind")
    assert by_kind[["kind", "control_counts", "test_counts", "category"]].values.tolist() == [["K", 2, 1, "decreased"]]
    with pytest.raises(FxvizError, match=r"no column\(s\) \['median_us'\]"):
        diff_timing(control.drop(columns="median_us"), test)


def test_top_changes_rank_by_duration_or_count_and_filter_names():
    control = timings([("ProfilerStep#1", 1000, 1000, 1000), ("conv", 100, 100, 100), ("bn", 30, 30, 30),
                       ("relu", 5, 5, 5), ("same", 9, 9, 9)])
    test = timings([("ProfilerStep#1", 900, 900, 900), ("conv", 150, 150, 150), ("relu", 6, 6, 6),
                    ("relu", 6, 6, 6), ("same", 9, 9, 9)])
    diff = diff_timing(control, test)
    assert list(top_changes(diff, 3)["target"]) == ["ProfilerStep#1", "conv", "bn"]
    assert list(top_changes(diff, 3, exclude="^ProfilerStep")["target"]) == ["conv", "bn", "relu"]
    by_predicate = top_changes(diff, 9, exclude=lambda name: name.startswith("Profiler"))
    assert list(by_predicate["target"]) == ["conv", "bn", "relu"]
    # ties keep the diff's order (test's, then control-only); rows with no change are left out
    assert list(top_changes(diff, 9, by="count")["target"]) == ["relu", "bn"]
    with pytest.raises(FxvizError, match="'duration' or 'count'"):
        top_changes(diff, by="time")


def test_plot_top_colours_increases_and_decreases():
    diff = diff_timing(timings([("a", 10, 10, 10), ("b", 10, 10, 10)]), timings([("a", 30, 30, 30), ("b", 5, 5, 5)]))
    ax = plot_top(diff, 5)
    bars = list(zip([t.get_text() for t in ax.get_yticklabels()], ax.patches))
    widths = {label: bar.get_width() for label, bar in bars}
    colours = {label: matplotlib.colors.to_hex(bar.get_facecolor()) for label, bar in bars}
    assert widths == {"a": 20, "b": -5}
    assert colours == {"a": "#d62728", "b": "#2ca02c"}


# -- fused against unfused ResNet18 -------------------------------------------------

def test_fusion_deletes_every_batchnorm_target_and_keeps_the_convs(fusion):
    timing = fusion.timing.set_index("target")
    bn_targets = [t for t in timing.index if "(BatchNorm2d)" in t]
    assert len(bn_targets) == 20
    assert set(timing.loc[bn_targets, "category"]) == {"deleted"}
    kinds = fusion.timing_by_kind.set_index("kind")
    assert kinds.loc["BatchNorm2d", ["control_counts", "test_counts", "category"]].tolist() == [20, 0, "deleted"]
    assert kinds.loc["Conv2d", ["control_counts", "test_counts"]].tolist() == [20, 20]
    nodes = fusion.graph_diff.set_index("node")
    convs = [n.name for n in fusion.step_a.gm.graph.nodes if "(Conv2d)" in nodes.loc[n.name, "target_a"]]
    assert len(convs) == 20
    assert set(nodes.loc[convs, "status"]) == {"changed"} and set(nodes.loc[convs, "detail"]) == {"module"}
    conv_timing = fusion.timing_by_node.set_index("node").loc[convs, "category"]
    assert set(conv_timing) <= {"increased", "decreased", "unchanged", "too noisy to tell"}
    assert (nodes["status"] == "removed").sum() == 20 and (nodes["status"] == "added").sum() == 0


def test_code_diff_of_fusion_removes_exactly_the_batchnorm_lines(fusion):
    assigned = re.compile(r"^([-+])    (\w+) = ")
    removed, added = set(), set()
    for line in fusion.code_diff.splitlines():
        match = assigned.match(line)
        if match:
            (removed if match[1] == "-" else added).add(match[2])
    bn_nodes = {n.name for n in fusion.step_a.gm.graph.nodes if n.op == "call_module"
                and isinstance(fusion.step_a.gm.get_submodule(n.target), nn.BatchNorm2d)}
    assert removed - added == bn_nodes
    assert added <= removed  # the other lines only change their inputs
    assert fusion.code_diff.startswith("--- step 0\n+++ step 1 (fuse)")


def test_fused_outputs_match_and_marks_colour_step_b(fusion):
    assert fusion.output_diff.status == "match" and fusion.output_diff.max_abs < 1e-4
    marks = fusion.node_marks()
    assert list(marks) == [n.name for n in fusion.step_b.gm.graph.nodes]
    assert set(marks.values()) <= {"faster", "slower", "unchanged"}
    assert "added" not in marks.values()
    assert fusion.paired.rounds == 3  # measured as profile_kwargs asked


# -- small graphs with known differences --------------------------------------------

class AddRelu(nn.Module):
    def forward(self, x):
        return (x + x).relu()


def with_mul(gm):
    """A copy of ``gm`` whose ``add`` node multiplies instead: same name, other target."""
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    for node in graph.nodes:
        if node.target is operator.add:
            node.target = operator.mul
    return torch.fx.GraphModule(gm, graph)


def test_graph_diff_reports_changed_targets_and_added_nodes():
    gm_a = torch.fx.symbolic_trace(AddRelu())
    gm_b = with_mul(gm_a)
    rows = graph_diff(gm_a, gm_b).set_index("node")
    assert rows.loc["add", ["status", "target_a", "target_b", "detail"]].tolist() == [
        "changed", "operator.add", "operator.mul", "target"]
    assert rows.loc["relu", "status"] == rows.loc["output", "status"] == "unchanged"
    extra = torch.fx.symbolic_trace(nn.Sequential(AddRelu(), nn.Tanh()))
    assert graph_diff(gm_a, extra).set_index("node").loc["_1", "status"] == "added"


def test_node_marks_from_a_synthetic_interleaved_run():
    gm_a = torch.fx.symbolic_trace(AddRelu())
    gm_b = torch.fx.symbolic_trace(nn.Sequential(AddRelu(), nn.Tanh()))  # input, add, relu, _1, output
    rounds = np.arange(20) % 3  # a little scatter, the same in both
    times_a = np.stack([1 + 0 * rounds, 10 + rounds, 10 + rounds, 1 + 0 * rounds], axis=1).astype(float)
    times_b = np.stack([1 + 0 * rounds, 50 + rounds, 2 + 0 * rounds, 5 + rounds, 1 + 0 * rounds], axis=1)
    paired = PairedTimes(times_a, times_b.astype(float), timing_ab._keys(gm_a), timing_ab._keys(gm_b))
    x = (torch.randn(3),)
    cmp = compare(make_step(0, gm_a, x), make_step(1, gm_b, x), paired=paired)
    marks = cmp.node_marks()
    assert marks == {"input_1": "added", "add": "slower", "relu": "faster", "_1": "added", "output": "unchanged"}
    assert cmp.timing_by_node.set_index("node").loc["add", "ratio"] == 5.0  # lower quartiles: 50 against 10


def test_output_diff_measures_and_explains():
    gm = torch.fx.symbolic_trace(AddRelu())
    x = (torch.full((4,), 3.0),)
    changed = compare(make_step(0, gm, x), make_step(1, with_mul(gm), x)).output_diff
    assert (changed.status, changed.max_abs, changed.max_rel) == ("mismatch", 3.0, 0.5)  # 9 against 6
    other_shape = torch.fx.symbolic_trace(nn.Flatten(0))
    ones = (torch.ones(2, 2),)
    mismatch = compare(make_step(0, gm, ones), make_step(1, other_shape, ones)).output_diff
    assert mismatch.status == "mismatch" and math.isinf(mismatch.max_abs)
    assert "expected a tensor of shape (2, 2), got a tensor of shape (4,)" in mismatch.message


class Const(nn.Module):
    def __init__(self, value):
        super().__init__()
        self.register_buffer("value", torch.tensor(value))

    def forward(self, x):
        return self.value + 0 * x


def test_output_diff_is_the_checks_comparison_nan_included():
    """[1, 2] against [1, nan]: the NaN is a difference, not a zero (it was max_abs=0.0)."""
    x = (torch.zeros(2),)
    a, b = torch.fx.symbolic_trace(Const([1.0, 2.0])), torch.fx.symbolic_trace(Const([1.0, float("nan")]))
    diff = compare(make_step(0, a, x), make_step(1, b, x)).output_diff
    assert diff.status == "mismatch" and math.isinf(diff.max_abs)
    assert compare(make_step(0, b, x), make_step(1, b, x)).output_diff.status == "match"


class Odd(nn.Module):
    """A module path that is valid but full of HTML."""

    def __init__(self):
        super().__init__()
        self.add_module("<i>odd</i>", nn.ReLU())

    def forward(self, x):
        return getattr(self, "<i>odd</i>")(x) + 1


def test_html_escapes_every_user_string():
    gm_a, gm_b = torch.fx.symbolic_trace(Odd()), torch.fx.symbolic_trace(AddRelu())
    x = (torch.randn(3),)
    cmp = compare(make_step(0, gm_a, x), make_step(1, gm_b, x, pass_name="<script>alert(1)</script>"))
    page = cmp._repr_html_()
    assert "<i>odd" not in page and "&lt;i&gt;odd&lt;/i&gt;" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    side = cmp.code_diff_html()
    assert side.count('class="fxviz-diff-delete"') + side.count('class="fxviz-diff-replace"') >= 1
    assert "getattr(self, &quot;&lt;i&gt;odd&lt;/i&gt;&quot;)" in side


def test_code_diff_html_aligns_lines_side_by_side():
    table = code_diff_html("a = 1\nb = 2\nc = 3\n", "a = 1\nc = 3\nd = 4\n", ("old", "new"), context=None)
    rows = re.findall(r'<tr class="fxviz-diff-(\w+)">(.*?)</tr>', table)
    assert [tag for tag, _ in rows] == ["equal", "delete", "equal", "insert"]
    assert "<td>" in rows[1][1] and "b = 2" in rows[1][1] and "d = 4" in rows[3][1]
    assert "<th colspan=\"2\">old</th><th colspan=\"2\">new</th>" in table


def test_levels_are_checked():
    gm = torch.fx.symbolic_trace(AddRelu())
    cmp = compare(make_step(0, gm, (torch.randn(2),)), make_step(1, gm, (torch.randn(2),)))
    with pytest.raises(FxvizError, match="level must be one of"):
        cmp.top(level="kernel")
    assert repr(cmp) == "Comparison(step 0 -> step 1: 0 added, 0 removed, 0 changed)"


def test_top_changes_put_judged_changes_before_rows_too_noisy_to_tell():
    """On a busy machine a noisy row's difference can be large; it must not push a
    deleted BatchNorm out of the top rows."""
    diff = pd.DataFrame({"target": ["relu", "bn", "conv"], "diff_duration": [900.0, -30.0, 400.0],
                         "diff_counts": [0, -1, 0], "category": ["too noisy to tell", "deleted", "increased"]})
    assert list(top_changes(diff, 2)["target"]) == ["conv", "bn"]
    assert list(top_changes(diff, 3)["target"]) == ["conv", "bn", "relu"]


def _generated_code(n_lines: int, renamed: set[int]) -> list[str]:
    """Lines like FX's: each assigns a node of its own name from the one before."""
    names = [f"{'mul' if k in renamed else 'add'}_{k}" for k in range(n_lines)]
    return ["def forward(self, x):", *(f"    {names[k]} = torch.tanh({names[k - 1] if k else 'x'})"
                                      for k in range(n_lines)), f"    return {names[-1]}"]


@pytest.mark.parametrize("seed", range(40))
def test_line_diff_gives_a_valid_diff_and_difflibs_own_on_generated_code(seed):
    """The anchored diff must turn a into b whatever the lines (repeats included), and on
    code of unique lines, as FX generates, give exactly difflib's unified diff."""
    import difflib
    import random

    from fxviz._linediff import AnchoredMatcher, unified_diff

    rng = random.Random(seed)
    a = [rng.choice("abcdef") for _ in range(rng.randint(0, 40))]
    b = [line for line in a if rng.random() > 0.2]
    for _ in range(rng.randint(0, 5)):
        b.insert(rng.randint(0, len(b)), rng.choice("abcxyz"))
    rebuilt = []
    for tag, i1, i2, j1, j2 in AnchoredMatcher(a, b).get_opcodes():
        assert tag != "equal" or a[i1:i2] == b[j1:j2]
        rebuilt += b[j1:j2]
    assert rebuilt == b
    code_a = _generated_code(200, set())
    code_b = _generated_code(200, set(rng.sample(range(200), rng.randint(0, 30))))
    assert unified_diff(code_a, code_b, "a", "b") == list(difflib.unified_diff(code_a, code_b, "a", "b", lineterm=""))


def test_a_long_side_by_side_diff_can_start_at_a_line_and_stop():
    a, b = _generated_code(3000, set()), _generated_code(3000, set(range(0, 3000, 10)))
    table = code_diff_html("\n".join(a), "\n".join(b), near=1996, max_rows=50)
    numbers = [int(n) for n in re.findall(r'<td class="fxviz-diff-no">(\d+)</td>', table)]
    assert 1990 <= min(numbers) <= 1996 and max(numbers) < 2100
    assert "mul_2000" in table and "mul_10 " not in table
    assert int(re.search(r"⋯ ([\d,]+) more lines", table).group(1).replace(",", "")) > 500  # the rest, not shown


def test_a_diff_window_shows_the_node_after_a_long_removal_and_the_end_past_the_last_change():
    """Rows of the first code only (a removal) are at no line of the second: a window
    from line ``near`` starts at that line's row, not inside the removal before it; with
    no change at or after ``near``, the window is the diff's end."""
    from fxviz.widgets.panel_code import diff_html

    a = _generated_code(3000, set())  # lines 1001-2000 (add_999 ... add_1998) fused into one
    b = [*a[:1000], "    fused = fused_op(add_998)", *(line.replace("(add_1998)", "(fused)") for line in a[2000:])]
    table = code_diff_html("\n".join(a), "\n".join(b), near=1001, max_rows=50, before=5)
    assert "fused = fused_op(add_998)" in table and "more lines" in table
    later = code_diff_html("\n".join(a), "\n".join(b), near=1002, max_rows=50, before=0)
    assert re.search(r"⋯ \d+ lines before", later) and "add_1999 = torch.tanh(fused)" in later
    comparison = SimpleNamespace(code_diff="\n".join(unified_lines := __import__("fxviz")._linediff.unified_diff(
        a, b, "a", "b")), code_diff_html=lambda **window: code_diff_html("\n".join(a), "\n".join(b), **window))
    assert len(unified_lines) > 400
    unified = diff_html(comparison, "unified", near=1001)
    assert "fused_op" in unified and "from the selected node" in unified
    end = diff_html(comparison, "side by side", near=10**6)
    assert "its end: no change at or after the selected node" in end and "more lines" not in end

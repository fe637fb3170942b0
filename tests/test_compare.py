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

from fxviz.timing import timing_ab
from fxviz.diff.comparison import code_diff_html, compare, graph_diff
from fxviz.errors import FxvizError
from fxviz.timing.profiling import profile
from fxviz.timing.timing_ab import PairedTimes
from fxviz.timing.timing_diff import diff_timing, plot_top, top_changes
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
    assert set(marks.values()) <= {"faster", "slower", "changed", "unchanged"}
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
    # output reads _1 now: changed structurally, and its time did not move
    assert marks == {"input_1": "added", "add": "slower", "relu": "faster", "_1": "added", "output": "changed"}
    assert cmp.node_marks("a") == {"x": "removed", "add": "slower", "relu": "faster", "output": "changed"}
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

    from fxviz.diff._linediff import AnchoredMatcher, unified_diff

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
    from fxviz.diff._linediff import unified_diff
    from fxviz.widgets.panel_code import diff_html

    a = _generated_code(3000, set())  # lines 1001-2000 (add_999 ... add_1998) fused into one
    b = [*a[:1000], "    fused = fused_op(add_998)", *(line.replace("(add_1998)", "(fused)") for line in a[2000:])]
    table = code_diff_html("\n".join(a), "\n".join(b), near=1001, max_rows=50, before=5)
    assert "fused = fused_op(add_998)" in table and "more lines" in table
    later = code_diff_html("\n".join(a), "\n".join(b), near=1002, max_rows=50, before=0)
    assert re.search(r"⋯ \d+ lines before", later) and "add_1999 = torch.tanh(fused)" in later
    comparison = SimpleNamespace(code_diff="\n".join(unified_lines := unified_diff(
        a, b, "a", "b")), code_diff_html=lambda **window: code_diff_html("\n".join(a), "\n".join(b), **window))
    assert len(unified_lines) > 400
    unified = diff_html(comparison, "unified", near=1001)
    assert "fused_op" in unified and "from the selected node" in unified
    end = diff_html(comparison, "side by side", near=10**6)
    assert "its end: no change at or after the selected node" in end and "more lines" not in end


# -- structure: what changed, before anything is timed ----------------------------------

class Block(nn.Module):
    """conv -> bn -> relu, plus the block's input: a resnet block in small."""

    def __init__(self, c):
        super().__init__()
        self.conv, self.bn, self.relu = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x))) + x


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem_conv, self.stem_bn, self.stem_relu = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU()
        self.blocks = nn.Sequential(Block(4), Block(4), Block(4))

    def forward(self, x):
        return self.blocks(self.stem_relu(self.stem_bn(self.stem_conv(x))))


@pytest.fixture(scope="module")
def tiny_session():
    import fxviz

    torch.manual_seed(0)
    session = fxviz.Session(TinyResNet().eval(), torch.randn(1, 3, 8, 8))
    session.apply("fuse_conv_bn")
    session.apply("lower_modules")  # ReLU by default
    return session


def synthetic_pair(gm_a, gm_b, times_a=None, times_b=None, rounds=12):
    """Constant per-node times (default 10 µs) with a little scatter, the same on both sides."""
    keys_a, keys_b = timing_ab._keys(gm_a), timing_ab._keys(gm_b)
    wiggle = (np.arange(rounds) % 3)[:, None] * 0.1
    a = np.array([(times_a or {}).get(n, 10.0) for n in keys_a["node"]]) + wiggle
    b = np.array([(times_b or {}).get(n, 10.0) for n in keys_b["node"]]) + wiggle
    return PairedTimes(a, b, keys_a, keys_b)


def test_fusion_marks_the_conv_changed_the_batchnorm_removed_and_the_relu_unchanged(tiny_session):
    cmp = tiny_session.compare(0, 1)
    rows = cmp.structure.set_index("node")
    assert rows.loc["stem_conv", ["mark", "counterpart"]].tolist() == ["changed", "stem_bn"]
    assert "module (weights or settings)" in rows.loc["stem_conv", "why"]
    assert "took over stem_bn (fuse_conv_bn)" in rows.loc["stem_conv", "why"]
    assert rows.loc["stem_bn", ["mark", "counterpart", "why"]].tolist() == [
        "removed", "stem_conv", "absorbed into stem_conv (fuse_conv_bn)"]
    # the relu reads stem_conv where it read stem_bn: the same data, so unchanged
    assert rows.loc["stem_relu", "mark"] == rows.loc["add", "mark"] == rows.loc["output", "mark"] == "unchanged"
    assert cmp.graph_diff.set_index("node").loc["stem_relu", "status"] == "changed"  # by name alone it is not
    assert rows["mark"].value_counts().to_dict() == {"unchanged": 9, "changed": 4, "removed": 4}
    marks = cmp.node_marks()
    assert marks["stem_conv"] == "changed" and marks["stem_relu"] == "unchanged" and "stem_bn" not in marks
    assert cmp.node_marks("a")["stem_bn"] == "removed"
    assert not cmp.timed  # nothing was measured for any of it
    assert repr(cmp).endswith("step 1 (fuse_conv_bn): 0 added, 4 removed, 4 changed)")


def test_a_fusion_nobody_recorded_is_still_seen_through_the_users_inputs():
    gm = trace(TinyResNet().eval())
    rows = compare(make_step(0, gm, None), make_step(1, fuse(gm), None)).structure.set_index("node")
    assert rows.loc["stem_bn", ["mark", "counterpart", "why"]].tolist() == [
        "removed", "stem_conv", "its users now read stem_conv"]
    assert rows.loc["stem_conv", "mark"] == "changed" and rows.loc["stem_relu", "mark"] == "unchanged"


def test_timing_refines_marks_only_beyond_the_noise(tiny_session):
    a, b = tiny_session.steps[0], tiny_session.steps[1]
    paired = synthetic_pair(a.gm, b.gm, times_a={"stem_conv": 40.0, "blocks_0_relu": 10.0},
                            times_b={"stem_conv": 20.0, "blocks_0_relu": 30.0})
    paired.times_b[::2, list(paired.keys_b["node"]).index("blocks_1_conv")] = 100.0  # half the rounds: noise
    cmp = compare(a, b, paired=paired)
    marks = cmp.node_marks()
    assert marks["stem_conv"] == "faster" and marks["blocks_0_relu"] == "slower"
    assert cmp.timing_by_node.set_index("node").loc["blocks_1_conv", "category"] == "too noisy to tell"
    assert marks["blocks_1_conv"] == "changed" and marks["add"] == "unchanged"


def test_lowering_relu_is_one_summarised_row_with_the_rows_kept(tiny_session):
    a, b = tiny_session.steps[1], tiny_session.steps[2]
    cmp = compare(a, b, paired=synthetic_pair(a.gm, b.gm))
    marks = cmp.structure.set_index("node")
    assert marks.loc["stem_relu", "mark"] == "changed" and "ReLU" in marks.loc["stem_relu", "why"]
    summary = cmp.summary().set_index("target")
    assert summary.loc["4 × ReLU deleted", ["control_counts", "test_counts", "category"]].tolist() == [4, 0, "deleted"]
    assert summary.loc["4 × ReLU deleted", "control_us"] == pytest.approx(4 * 10.0)  # summed lower quartiles
    assert summary.loc["torch.nn.functional.relu", "category"] == "added"
    assert len(summary) == 2 and not any("(ReLU)" in t for t in summary.index)
    per_module = cmp.top(level="target")
    assert (per_module["target"].str.endswith("(ReLU)")).sum() == 4  # the detail is still there
    kinds = cmp.timing_by_kind.set_index("kind")
    assert kinds.loc["ReLU", ["control_counts", "category"]].tolist() == [4, "deleted"]


def paired_forwards(forward_a, forward_b, rounds=None):
    keys = pd.DataFrame({"node": ["n"], "target": ["n"], "kind": ["K"]})
    n = len(forward_a)
    return PairedTimes(np.ones((n, 1)), np.ones((n, 1)), keys, keys, {},
                       np.asarray(forward_a, float), np.asarray(forward_b, float))


def test_the_whole_forward_gets_one_row_and_claims_nothing_inside_the_noise():
    rng = np.random.default_rng(0)
    base = 1000 + rng.normal(0, 5, 20)
    faster = timing_ab.total_timing(paired_forwards(base, base * 0.8)).iloc[0]
    assert faster["category"] == "faster" and faster["ratio"] == pytest.approx(0.8, rel=0.01)
    assert faster["ratio_lo"] <= faster["ratio"] <= faster["ratio_hi"] < 0.98
    assert faster["control_us"] == pytest.approx(np.quantile(base, 0.25)) and faster["rounds"] == 20
    assert 0 < faster["spread"] < 0.02
    same = timing_ab.total_timing(paired_forwards(base, base * rng.normal(1, 0.002, 20))).iloc[0]
    assert same["category"] == "unchanged"
    scattered = base * rng.lognormal(0, 0.3, 20)  # 0.5x to 2x from round to round
    noisy = timing_ab.total_timing(paired_forwards(base, scattered * 0.97)).iloc[0]
    assert noisy["category"] == "too noisy to tell" and noisy["ratio_lo"] < 1 < noisy["ratio_hi"]
    few = timing_ab.total_timing(paired_forwards(base[:9], base[:9] * 0.5)).iloc[0]
    assert few["category"] == "too noisy to tell" and few["ratio"] == pytest.approx(0.5)
    assert list(timing_ab.total_timing(paired_forwards(base, base)).columns) == [
        "control_us", "test_us", "ratio", "ratio_lo", "ratio_hi", "category", "spread", "rounds"]


def test_a_comparison_times_the_whole_forward_uninstrumented(tiny_session):
    cmp = tiny_session.compare(1, 2, profile_kwargs={"warmup": 1, "repeats": 10})
    total = cmp.timing_total.iloc[0]
    assert total["rounds"] == 10 and total["control_us"] > 0 and total["test_us"] > 0
    assert total["category"] in timing_ab.TOTAL_CATEGORIES
    assert total["ratio"] == pytest.approx(total["test_us"] / total["control_us"])

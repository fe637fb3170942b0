"""Interleaved A/B timing: one run for both steps, and a verdict per row that says
"too noisy to tell" when the spread does not allow one."""
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import torch.fx
from torch import nn

import fxviz.timing._clock
from fxviz.background.jobs import cancellable
from fxviz.timing._clock import Clock, instrument
from fxviz.errors import Cancelled, FxvizError
from fxviz.timing.timing_ab import NOISY, PairedTimes, _drop_preempted, measure_pair, paired_timing
from fxviz.timing.timing_diff import top_changes

order: list[str] = []


def record(tag, x):
    order.append(tag)
    return x


def tagged(tag: str) -> torch.fx.GraphModule:
    """x -> record(tag) -> relu: a graph that says when it ran."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.relu, (graph.call_function(record, (tag, x)),)))
    return torch.fx.GraphModule(nn.Module(), graph)


def synthetic(rows_a, rows_b, names=("n0", "n1", "n2", "n3")):
    keys = pd.DataFrame({"node": list(names), "target": list(names), "kind": ["K"] * len(names)})
    return PairedTimes(np.array(rows_a, float), np.array(rows_b, float), keys, keys)


def test_runs_alternate_a_b_then_b_a_on_the_same_inputs():
    order.clear()
    x = (torch.randn(4),)
    paired = measure_pair(tagged("a"), x, tagged("b"), x, warmup=1, repeats=4)
    # warm-up round -1 starts with b; each side runs plain, then timed
    assert order == [t for t in "bbaa" "aabb" "bbaa" "aabb" "bbaa"]
    assert paired.times_a.shape == paired.times_b.shape == (4, 4)  # 4 rounds x (x, record, relu, output)
    assert paired.forward_a.shape == paired.forward_b.shape == (4,) and (paired.forward_a > 0).all()
    assert list(paired.keys_a["node"]) == ["x", "record", "relu", "output"]
    assert {"load", "load_after", "threads", "cpu_count", "device"} <= set(paired.conditions)
    assert paired.conditions["threads"] == torch.get_num_threads() and paired.conditions["device"] == "cpu"


def test_a_cancelled_job_stops_at_the_next_round_with_a_clear_error():
    order.clear()
    x = (torch.randn(4),)
    with cancellable(lambda: len(order) >= 6), pytest.raises(Cancelled, match="cancelled before it finished"):
        measure_pair(tagged("a"), x, tagged("b"), x, warmup=1, repeats=10**6)
    assert len(order) == 8  # two rounds of A and B (plain and timed each), then no forward more


def test_verdicts_from_paired_rounds():
    rng = np.random.default_rng(1)
    base = 100 + rng.normal(0, 1, (40, 4))
    changed = base * [1, 1.5, 0.7, 1]                     # n1 50 % slower, n2 30 % faster, tightly
    changed[:, 3] = rng.lognormal(np.log(100), 0.6, 40)   # n3 scattered from about 0.3x to 3x
    base[:, 3] = rng.lognormal(np.log(100), 0.6, 40)
    df = paired_timing(synthetic(base, changed), "node").set_index("node")
    assert df["category"].to_dict() == {"n0": "unchanged", "n1": "increased", "n2": "decreased", "n3": NOISY}
    assert df.loc["n1", "ratio"] == pytest.approx(1.5, rel=0.01)
    assert df.loc["n1", "ratio_lo"] > 1.45 and df.loc["n1", "ratio_hi"] < 1.55
    assert df.loc["n3", "ratio_lo"] < 1 < df.loc["n3", "ratio_hi"]


def test_preempted_rounds_do_not_make_a_node_slower():
    """Other work only adds time: B's node hit in 40 % of rounds is not called slower."""
    rng = np.random.default_rng(3)
    a = 50 + rng.normal(0, 0.5, (30, 4))
    b = a + rng.normal(0, 0.5, (30, 4))
    b[rng.random(30) < 0.4, 2] += 400                     # a busy machine, hitting the node after a long one
    assert paired_timing(synthetic(a, b), "node").set_index("node").loc["n2", "category"] == "unchanged"


def test_identical_steps_flag_nothing_and_tiny_differences_are_below_resolution():
    rng = np.random.default_rng(2)
    a = rng.lognormal(3, 0.3, (30, 4))                     # the same code: every round scatters
    b = a * rng.lognormal(0, 0.02, (30, 4))
    assert set(paired_timing(synthetic(a, b), "node")["category"]) == {"unchanged"}
    tiny = synthetic(np.full((10, 4), 0.5), np.full((10, 4), 0.9))  # +80 %, but 0.4 µs: no claim
    assert set(paired_timing(tiny, "node")["category"]) == {"unchanged"}


def test_grouping_by_kind_sums_nodes_per_round_and_counts_them():
    keys_a = pd.DataFrame({"node": ["c1", "b1", "c2"], "target": ["c1", "b1", "c2"], "kind": ["Conv", "BN", "Conv"]})
    keys_b = keys_a[keys_a["kind"] == "Conv"].reset_index(drop=True)
    paired = PairedTimes(np.tile([10.0, 5.0, 20.0], (12, 1)), np.tile([12.0, 24.0], (12, 1)), keys_a, keys_b)
    df = paired_timing(paired, "kind").set_index("kind")
    assert df.loc["Conv", ["control_counts", "test_counts", "control_us", "test_us", "diff_duration"]].tolist() == [
        2, 2, 30.0, 36.0, 6.0]
    assert df.loc["Conv", "category"] == "increased" and df.loc["Conv", "ratio"] == pytest.approx(1.2)
    assert df.loc["BN", ["test_counts", "diff_counts", "category"]].tolist() == [0, -1, "deleted"]
    with pytest.raises(FxvizError, match="per 'node', 'target' or 'kind'"):
        paired_timing(paired, "module")


def test_too_few_rounds_give_no_verdict_on_time():
    few = synthetic(np.full((9, 4), 100.0), np.full((9, 4), 200.0))  # doubled, but 9 rounds
    judged = paired_timing(few, "node")
    assert set(judged["category"]) == {NOISY}
    assert (judged["ratio"] == 2.0).all() and (judged["ratio_lo"] == 2.0).all()  # the numbers are still shown
    enough = synthetic(np.full((10, 4), 100.0), np.full((10, 4), 200.0))
    assert set(paired_timing(enough, "node")["category"]) == {"increased"}


def nap(x):
    time.sleep(0.002)  # off the CPU, as a preempted thread is
    return x


def test_a_node_whose_thread_was_off_the_cpu_is_left_out(monkeypatch):
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.relu, (graph.call_function(nap, (x,)),)))
    gm = torch.fx.GraphModule(nn.Module(), graph)
    clock = Clock(4, torch.device("cpu"), preemption=True)
    flagged = np.zeros(4, dtype=int)
    for _ in range(5):
        clock.wall_us(instrument(gm, clock.tick), (torch.randn(4),), timed=True)
        flagged += clock.preempted()
    assert flagged[1] == 5  # the nap always (others too, at times, on a busy machine)
    assert not Clock(4, torch.device("cpu")).preempted().any()  # not asked: nothing claimed
    # off the CPU in every round: that is the node's cost (a sleep, I/O, waiting for torch's
    # thread pool), not a disturbance, so its times stay and A against itself is no change
    paired = measure_pair(gm, (torch.randn(4),), gm, (torch.randn(4),), warmup=0, repeats=12)
    assert (paired.times_a[:, 1] > 900).all()
    assert paired_timing(paired, "node").set_index("node").loc["nap", "category"] in ("unchanged", NOISY)
    # On a clock the nodes move on themselves, exactly: off the CPU is flagged, a long
    # stretch on it is not.
    stamps = {"wall": 0, "cpu": 0}

    def spend(x, wall_us, cpu_us):
        stamps["wall"] += int(wall_us * 1e3)
        stamps["cpu"] += int(cpu_us * 1e3)
        return x

    monkeypatch.setattr(fxviz.timing._clock, "time", SimpleNamespace(perf_counter_ns=lambda: stamps["wall"],
                                                              thread_time_ns=lambda: stamps["cpu"]))
    graph = torch.fx.Graph()
    napped = graph.call_function(spend, (graph.placeholder("x"), 2000, 0))
    graph.output(graph.call_function(spend, (napped, 2000, 1950)))
    clock = Clock(4, torch.device("cpu"), preemption=True)
    clock.wall_us(instrument(torch.fx.GraphModule(nn.Module(), graph), clock.tick), (torch.randn(4),), timed=True)
    assert clock.intervals_us().tolist() == [0, 2000, 2000, 0] and clock.preempted().tolist() == [0, 1, 0, 0]


def test_only_rounds_where_a_node_was_now_and_then_off_the_cpu_are_dropped():
    times = np.full((6, 3), 10.0)
    preempted = np.zeros((6, 3), dtype=bool)
    preempted[1, 0] = True  # once: a disturbance, dropped
    preempted[:5, 2] = True  # in most rounds: the node waits by nature, kept
    kept = _drop_preempted(times, preempted)
    assert np.isnan(kept[1, 0]) and np.isfinite(np.delete(kept[:, 0], 1)).all()
    assert np.isfinite(kept[:, 1:]).all()


def test_preempted_rounds_are_left_out_of_the_verdict():
    a = np.full((14, 4), 100.0)
    b = np.full((14, 4), 101.0)
    b[:10, 2] = np.nan  # four undisturbed rounds left: no verdict
    df = paired_timing(synthetic(a, b), "node").set_index("node")
    assert df.loc["n2", "category"] == NOISY and df.loc["n1", "category"] == "unchanged"


def test_a_name_preempted_in_every_round_has_an_unknown_time_not_zero():
    keys = pd.DataFrame({"node": ["conv", "bn"], "target": ["Conv", "BN"], "kind": ["Conv", "BN"]})
    rounds = 12
    times_a = np.column_stack([np.full(rounds, 10.0), np.full(rounds, np.nan)])  # bn preempted every round
    paired = PairedTimes(times_a, np.full((rounds, 1), 9.0), keys, keys.iloc[:1])
    df = paired_timing(paired).set_index("target")
    assert np.isnan(df.loc["BN", "control_us"]) and df.loc["BN", "test_us"] == 0.0
    assert df.loc["BN", "category"] == "deleted"
    assert "BN" in set(top_changes(df.reset_index(), by="duration")["target"])  # a deletion is never dropped

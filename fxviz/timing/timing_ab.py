"""Honest timing comparison of two graphs: both measured in one run, interleaved.

Two profiles taken at different times differ by whatever else the machine did in
between. :func:`measure_pair` runs A and B alternately (A B, B A, A B, …: drift and
order effects cancel) on the same inputs, threads and warm caches, stamping every
node of both; :func:`paired_timing` then judges each node (or target, or kind) on
the ratio of B's to A's lower quartile over rounds: a bootstrap interval (rounds
resampled whole) says whether the change is beyond noise, and when the interval is
too wide to say either way the row reads "too noisy to tell" rather than a
precise-looking number. Each round also runs both forwards uninstrumented, which
:func:`total_timing` judges as a whole (a pass that removes nodes also removes their
clock stamps: the timed forwards' totals would favour it). Column names are :mod:`fxviz.timing.timing_diff`'s (HTA TraceDiff's where
they mean the same thing).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.fx

from fxviz.background.jobs import stop_if_cancelled
from fxviz.timing._clock import Clock, instrument, plain
from fxviz.errors import InputError, UsageError
from fxviz.annotation.graph import readable_target
from fxviz.timing.profiling import conditions, device_of, node_kind, quiet_run

__all__ = ["PairedTimes", "measure_pair", "paired_timing", "total_timing", "node_marks", "NOISY", "CATEGORIES"]

# Fewer rounds than this and a bootstrap interval is too coarse to trust: every row whose
# count is unchanged reads "too noisy to tell" (ratios still shown, with their wide
# intervals). A budget stops no earlier: a comparison that cannot judge is not worth its time.
VERDICT_ROUNDS = 10
MIN_ROUNDS = VERDICT_ROUNDS
NOISY = "too noisy to tell"
# Each side is summarised by its lower quartile over rounds: other work only ever adds
# time (a preempted node), and on a busy machine the node right after a long one is
# preempted more often, so medians and per-round ratios flag nodes that did not change.
QUANTILE = 0.25
CATEGORIES = ("added", "deleted", "increased", "decreased", "unchanged", NOISY)
# A whole forward 2 % faster is worth saying (a node's neighbours moving by 6 % is why
# nodes need 10 %: that is inside a forward's total).
TOTAL_MIN_EFFECT = 0.02
TOTAL_CATEGORIES = ("faster", "slower", "unchanged", NOISY)


@dataclass(frozen=True)
class PairedTimes:
    """Per-node times (µs) of A and B, one row per round, measured interleaved; NaN
    where the node's thread was preempted now and then (CPU; a node off the CPU in
    most rounds keeps its times: that is its cost). ``keys_*``: per node, its
    ``node``, ``target`` and ``kind`` (to group by). ``forward_*``: per round, the
    wall time (µs) of the uninstrumented forward run beside the timed one."""

    times_a: np.ndarray
    times_b: np.ndarray
    keys_a: pd.DataFrame
    keys_b: pd.DataFrame
    conditions: dict = field(default_factory=dict)
    forward_a: np.ndarray = field(default_factory=lambda: np.empty(0))
    forward_b: np.ndarray = field(default_factory=lambda: np.empty(0))

    @property
    def rounds(self) -> int:
        return len(self.times_a)


def measure_pair(gm_a: torch.fx.GraphModule, inputs_a: tuple, gm_b: torch.fx.GraphModule, inputs_b: tuple,
                 *, warmup: int = 2, repeats: int = 30, budget_s: float | None = None) -> PairedTimes:
    """Time every node of both graphs, ``repeats`` rounds of A then B (order
    alternating; each side a plain forward, then a timed one), after ``warmup`` rounds;
    ``budget_s`` stops earlier (but after at least :data:`VERDICT_ROUNDS`). A cancelled scheduler job stops between rounds with
    :class:`~fxviz.errors.Cancelled` (see :mod:`fxviz.background.jobs`)."""
    runs = []
    for gm, inputs in ((gm_a, inputs_a), (gm_b, inputs_b)):
        if not isinstance(gm, torch.fx.GraphModule):
            raise UsageError(f"measure_pair needs torch.fx.GraphModules, got {type(gm).__name__}.")
        clock = Clock(len(gm.graph.nodes), device_of(gm, inputs), preemption=True)
        runs.append((plain(gm), instrument(gm, clock.tick), clock, inputs))
    before = conditions(device_of(gm_a, inputs_a))
    budget = float("inf") if budget_s is None else budget_s
    samples: tuple[list, list] = ([], [])
    flags: tuple[list, list] = ([], [])
    forwards: tuple[list, list] = ([], [])
    started = time.perf_counter()
    with quiet_run(gm_a, inputs_a), quiet_run(gm_b, inputs_b):
        for r in range(-warmup, repeats):
            stop_if_cancelled()
            elapsed = time.perf_counter() - started
            if r >= MIN_ROUNDS and elapsed * (r + warmup + 1) / (r + warmup) > budget:
                break
            for side in ((0, 1) if r % 2 == 0 else (1, 0)):
                untimed, timed, clock, inputs = runs[side]
                forward_us = clock.wall_us(untimed, inputs)
                clock.wall_us(timed, inputs, timed=True)
                if r >= 0:
                    forwards[side].append(forward_us)
                    samples[side].append(clock.intervals_us())
                    flags[side].append(clock.preempted())
    after = conditions(before["device"])
    times_a, times_b = (_drop_preempted(np.array(samples[i]), np.array(flags[i])) for i in (0, 1))
    return PairedTimes(times_a, times_b, _keys(gm_a), _keys(gm_b), {**before, "load_after": after["load"]},
                       np.array(forwards[0]), np.array(forwards[1]))


def _drop_preempted(times: np.ndarray, preempted: np.ndarray) -> np.ndarray:
    """NaN where a node's thread was descheduled: such a round says nothing about its
    code. A node off the CPU in most rounds is not preempted but waiting for torch's
    intra-op thread pool (a parallel conv): its times stay."""
    if not len(times):
        return times
    waits = preempted.mean(axis=0) > 0.5
    return np.where(preempted & ~waits, np.nan, times)


def _keys(gm: torch.fx.GraphModule) -> pd.DataFrame:
    nodes = list(gm.graph.nodes)
    return pd.DataFrame({"node": [n.name for n in nodes], "target": [readable_target(n, gm) for n in nodes],
                         "kind": [node_kind(n, gm) for n in nodes]})


def paired_timing(paired: PairedTimes, key: str = "target", *, min_effect: float = 0.10,
                  floor_us: float = 1.0, confidence: float = 0.99, seed: int = 0) -> pd.DataFrame:
    """Per value of ``key`` (``node``, ``target`` or ``kind``), A against B.

    Columns: ``<key>``, ``control_counts``, ``test_counts``, ``control_us``, ``test_us``
    (lower quartiles over rounds of the group's summed time: its undisturbed cost;
    rounds where a node's thread was preempted, NaN in ``paired``, are left out; NaN
    when every round was; 0 on the side where the name does not occur),
    ``diff_duration`` (test - control, µs), ``diff_lo``/``diff_hi`` (its bootstrap
    interval), ``ratio`` (test / control) with ``ratio_lo``/``ratio_hi``, ``diff_counts``
    and ``category``: ``added``/``deleted`` (only in B / only in A),
    ``increased``/``decreased`` (count changed, or the whole interval of the ratio
    beyond ``1 ± min_effect`` and of the difference beyond ``floor_us``),
    ``unchanged`` (the interval within ``1 ± min_effect``, or within ``± floor_us``)
    and ``"too noisy to tell"`` (the interval straddles those bounds, or fewer than 10
    rounds were measured undisturbed: the ratio and its interval are still given from 2).
    ``confidence`` is that of each interval: 0.99 keeps a 70-node graph's identical
    steps from flagging a node by chance. ``min_effect`` 0.10: a pass that adds work
    to one conv moves its neighbours by up to 6 % (cache and allocator state), which
    is real but not what a user asks about. Rows: B's order, then names only in A.
    """
    if key not in ("node", "target", "kind"):
        raise InputError(f"Timing is compared per 'node', 'target' or 'kind', not {key!r}.")
    a, b = _grouped(paired.times_a, paired.keys_a[key]), _grouped(paired.times_b, paired.keys_b[key])
    names = list(dict.fromkeys([*b, *a]))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, paired.rounds, (1000, paired.rounds)) if paired.rounds else None
    rows = []
    for name in names:
        (count_a, ta), (count_b, tb) = a.get(name, (0, None)), b.get(name, (0, None))
        row = {key: name, "control_counts": count_a, "test_counts": count_b,
               "control_us": _typical(ta), "test_us": _typical(tb)}
        both = ta is not None and tb is not None
        row.update(_paired_stats(ta, tb, picks, confidence) if both else {})
        judged = row if both and _undisturbed(ta, tb) >= VERDICT_ROUNDS else {}
        row["category"] = _category(count_a, count_b, judged, min_effect, floor_us)
        rows.append(row)
    df = pd.DataFrame(rows).reindex(columns=[key, "control_counts", "test_counts", "control_us", "test_us",
                                             "diff_duration", "diff_lo", "diff_hi", "ratio", "ratio_lo",
                                             "ratio_hi", "category"])
    for side in ("control", "test"):  # absent: 0 µs; present but preempted every round: unknown (NaN)
        df.loc[df[f"{side}_counts"] == 0, f"{side}_us"] = 0.0
    df["diff_duration"] = df["diff_duration"].fillna(df["test_us"] - df["control_us"])
    df.insert(len(df.columns) - 1, "diff_counts", df["test_counts"] - df["control_counts"])
    return df


def _grouped(times: np.ndarray, keys: pd.Series) -> dict[str, tuple[int, np.ndarray]]:
    """name -> (node count, per-round summed time)."""
    groups: dict[str, list[int]] = {}
    for column, name in enumerate(keys):
        groups.setdefault(name, []).append(column)
    return {name: (len(cols), times[:, cols].sum(axis=1)) for name, cols in groups.items()}


def _typical(times: np.ndarray | None) -> float:
    return float(np.nanquantile(times, QUANTILE)) if times is not None and np.isfinite(times).any() else np.nan


def _paired_stats(ta: np.ndarray, tb: np.ndarray, picks: np.ndarray | None, confidence: float) -> dict:
    """Difference and ratio of the two sides' lower quartiles, with bootstrap intervals
    that resample whole rounds (A and B of a round stay together)."""
    if picks is None or _undisturbed(ta, tb) < 2:
        return {}
    with warnings.catch_warnings():  # a resample may hold only preempted rounds: NaN, left out
        warnings.simplefilter("ignore", RuntimeWarning)
        qa, qb = np.nanquantile(ta[picks], QUANTILE, axis=1), np.nanquantile(tb[picks], QUANTILE, axis=1)
    keep = np.isfinite(qa) & np.isfinite(qb)
    qa, qb = qa[keep], qb[keep]
    tail = 100 * (1 - confidence) / 2
    lo_d, hi_d = np.percentile(qb - qa, [tail, 100 - tail])
    stats = {"diff_duration": _typical(tb) - _typical(ta), "diff_lo": float(lo_d), "diff_hi": float(hi_d),
             "ratio": np.nan, "ratio_lo": np.nan, "ratio_hi": np.nan}
    if (qa > 0).all():
        lo_r, hi_r = np.percentile(qb / qa, [tail, 100 - tail])
        stats.update(ratio=_typical(tb) / _typical(ta), ratio_lo=float(lo_r), ratio_hi=float(hi_r))
    return stats


def _undisturbed(ta: np.ndarray, tb: np.ndarray) -> int:
    """Rounds where neither side was preempted."""
    return int((np.isfinite(ta) & np.isfinite(tb)).sum())


def total_timing(paired: PairedTimes, *, min_effect: float = TOTAL_MIN_EFFECT, confidence: float = 0.99,
                 seed: int = 0) -> pd.DataFrame:
    """The whole forward, A against B, from the uninstrumented forwards of each round:
    one row, ``control_us``, ``test_us`` (lower quartiles over rounds), ``ratio``,
    ``ratio_lo``, ``ratio_hi`` (bootstrap interval, rounds resampled whole),
    ``category`` (:data:`TOTAL_CATEGORIES`: ``faster``/``slower`` when the whole
    interval is beyond ``1 ± min_effect``, ``unchanged`` when within it, else "too
    noisy to tell", as with fewer than 10 rounds), ``spread`` (the larger side's
    interquartile range over its median) and ``rounds``."""
    fa, fb = paired.forward_a, paired.forward_b
    rounds = min(len(fa), len(fb))
    picks = np.random.default_rng(seed).integers(0, rounds, (1000, rounds)) if rounds else None
    stats = _paired_stats(fa, fb, picks, confidence) if rounds else {}
    lo, hi = stats.get("ratio_lo", np.nan), stats.get("ratio_hi", np.nan)
    if rounds < VERDICT_ROUNDS or np.isnan(lo):
        category = NOISY
    else:
        category = ("slower" if lo > 1 + min_effect else "faster" if hi < 1 - min_effect
                    else "unchanged" if 1 - min_effect <= lo and hi <= 1 + min_effect else NOISY)
    return pd.DataFrame([{"control_us": _typical(fa if rounds else None), "test_us": _typical(fb if rounds else None),
                          "ratio": stats.get("ratio", np.nan), "ratio_lo": lo, "ratio_hi": hi, "category": category,
                          "spread": max(_spread(fa), _spread(fb)), "rounds": rounds}])


def _spread(times: np.ndarray) -> float:
    if not len(times):
        return np.nan
    p25, p50, p75 = np.percentile(times, [25, 50, 75])
    return float((p75 - p25) / p50) if p50 > 0 else np.nan


def _category(count_a: int, count_b: int, row: dict, min_effect: float, floor_us: float) -> str:
    if count_a == 0:
        return "added"
    if count_b == 0:
        return "deleted"
    if count_a != count_b:
        return "increased" if count_b > count_a else "decreased"
    if "diff_lo" not in row:  # fewer than VERDICT_ROUNDS undisturbed rounds (not judged)
        return NOISY
    lo_d, hi_d, lo_r, hi_r = row["diff_lo"], row["diff_hi"], row["ratio_lo"], row["ratio_hi"]
    if -floor_us <= lo_d and hi_d <= floor_us:
        return "unchanged"  # below what a node's timing resolves at all
    if np.isnan(lo_r):
        return NOISY
    if lo_r > 1 + min_effect and lo_d > floor_us:
        return "increased"
    if hi_r < 1 - min_effect and hi_d < -floor_us:
        return "decreased"
    if 1 - min_effect <= lo_r and hi_r <= 1 + min_effect:
        return "unchanged"
    return NOISY


def node_marks(timing_by_node: pd.DataFrame | None, structure: pd.DataFrame, side: str = "b") -> dict[str, str]:
    """Node name of step ``side`` ("a" or "b") -> its structural mark (``added``,
    ``removed``, ``changed``, ``unchanged``: :func:`fxviz.diff.structure.structure`), a node in
    both steps refined to ``faster`` or ``slower`` where ``timing_by_node`` (None: not
    timed) judged it beyond the noise; too noisy to tell claims nothing. Step a's nodes by
    ``node_a``: across a pass that traces the graph again, b's name is another node's in a."""
    speed = timing_by_node.set_index("node")["category"].map({"increased": "slower", "decreased": "faster"}) \
        if timing_by_node is not None else pd.Series(dtype=object)
    skip = "added" if side == "a" else "removed"
    shown = structure["node_a"] if side == "a" else structure["node"]
    return {own: mark if mark in ("added", "removed") or not isinstance(speed.get(name), str) else speed[name]
            for own, name, mark in zip(shown, structure["node"], structure["mark"]) if mark != skip}

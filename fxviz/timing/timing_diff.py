"""Timing difference of two profiles: per name (target, node or kind), counts and total
time in control and test, their differences, and a category.

Names follow HTA's ``TraceDiff.compare_traces`` where they mean the same thing
(``control_counts``, ``test_counts``, ``diff_counts``, ``diff_duration``) and the
categories are those of its ``ops_diff``; the times are ``control_us``/``test_us``
(µs), which HTA calls ``<label>_total_duration``.

Pure functions on the DataFrames :func:`fxviz.timing.profiling.profile` returns.
"""
from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from fxviz.errors import InputError

CATEGORIES = ("added", "deleted", "increased", "decreased", "unchanged")
Exclude = str | Callable[[str], bool] | None


def diff_timing(control: pd.DataFrame, test: pd.DataFrame, key: str = "target", noise: float = 1.0) -> pd.DataFrame:
    """Per value of ``key``: how often it occurs and how long it takes in each profile.

    Columns: ``<key>``, ``control_counts``, ``test_counts``, ``control_us``, ``test_us``
    (sums of node medians, µs), ``diff_counts`` and ``diff_duration`` (test - control),
    ``noise_us`` and ``category``: ``added`` (only in test), ``deleted`` (only in
    control), ``increased``/``decreased`` (count changed, else time changed by more
    than ``noise_us``), ``unchanged``. ``noise_us`` is ``noise`` times the larger of the
    two spreads (sum of the nodes' p75 - p25): timings differ when their difference
    exceeds what repeated runs of the same code already scatter by.

    Rows: test's order, then names found only in control.

    >>> def profile(rows):  # (target, median, p25, p75) per node, as fxviz.profile gives them
    ...     return pd.DataFrame(rows, columns=["target", "median_us", "p25_us", "p75_us"])
    >>> before = profile([("conv", 100.0, 99.0, 101.0), ("bn", 20.0, 19.0, 21.0)])
    >>> after = profile([("conv", 80.0, 79.0, 81.0)])
    >>> diff_timing(before, after)[["target", "control_us", "test_us", "category"]]
      target  control_us  test_us   category
    0   conv       100.0     80.0  decreased
    1     bn        20.0      0.0    deleted
    """
    a, b = _aggregate(control, key), _aggregate(test, key)
    names = list(dict.fromkeys([*b.index, *a.index]))
    a, b = a.reindex(names), b.reindex(names)
    df = pd.DataFrame({
        key: names,
        "control_counts": a["count"].fillna(0).astype(int).to_numpy(),
        "test_counts": b["count"].fillna(0).astype(int).to_numpy(),
        "control_us": a["us"].fillna(0.0).to_numpy(),
        "test_us": b["us"].fillna(0.0).to_numpy(),
    })
    df["diff_counts"] = df["test_counts"] - df["control_counts"]
    df["diff_duration"] = df["test_us"] - df["control_us"]
    df["noise_us"] = noise * np.fmax(a["spread"].to_numpy(), b["spread"].to_numpy())
    df["category"] = np.select(
        [
            df["control_counts"] == 0,
            df["test_counts"] == 0,
            df["diff_counts"] > 0,
            df["diff_counts"] < 0,
            df["diff_duration"].abs() <= df["noise_us"],
            df["diff_duration"] > 0,
        ],
        ["added", "deleted", "increased", "decreased", "unchanged", "increased"],
        default="decreased",
    )
    return df


def _aggregate(profile: pd.DataFrame, key: str) -> pd.DataFrame:
    missing = sorted({key, "median_us", "p25_us", "p75_us"} - set(profile.columns))
    if missing:
        raise InputError(
            f"Cannot diff timings: the profile has no column(s) {missing}. Pass DataFrames from "
            "fxviz.timing.profiling.profile, and a key among their columns (target, node, kind)."
        )
    groups = profile.assign(_spread=profile["p75_us"] - profile["p25_us"]).groupby(key, sort=False)
    return pd.DataFrame({"count": groups.size(), "us": groups["median_us"].sum(), "spread": groups["_spread"].sum()})


def top_changes(diff: pd.DataFrame, n: int = 10, by: str = "duration", exclude: Exclude = None) -> pd.DataFrame:
    """The ``n`` rows of :func:`diff_timing`'s result with the largest change in absolute
    value, ``by`` ``"duration"`` (``diff_duration``) or ``"count"`` (``diff_counts``);
    rows with no change are left out, and rows judged a change (``category``) come
    before those too noisy to tell, which on a busy machine would crowd them out.
    ``exclude`` drops names first: a regular expression (searched) or a predicate,
    e.g. to leave out a dominant wrapper."""
    column = {"duration": "diff_duration", "count": "diff_counts"}.get(by)
    if column is None:
        raise InputError(f"top changes are by 'duration' or 'count', not {by!r}.")
    names = diff.iloc[:, 0].astype(str)
    if isinstance(exclude, str):
        keep = ~names.str.contains(re.compile(exclude))
    elif callable(exclude):
        keep = ~names.map(exclude).astype(bool)
    else:
        keep = pd.Series(True, index=diff.index)
    rows = diff[keep & (diff[column] != 0)]
    noisy = rows["category"].eq("too noisy to tell") if "category" in rows else pd.Series(False, index=rows.index)
    order = pd.DataFrame({"noisy": noisy, "size": -rows[column].abs()}).sort_values(["noisy", "size"], kind="stable")
    return rows.loc[order.index].head(n)


def plot_top(diff: pd.DataFrame, n: int = 10, by: str = "duration", exclude: Exclude = None, ax=None):
    """Bars of :func:`top_changes`: red where test takes longer (or runs more often),
    green where it takes less. Returns the matplotlib Axes."""
    import matplotlib.pyplot as plt

    rows = top_changes(diff, n, by, exclude).iloc[::-1]
    column = "diff_duration" if by == "duration" else "diff_counts"
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.3 * len(rows) + 1))
    colors = np.where(rows[column] > 0, "#d62728", "#2ca02c")
    ax.barh(rows.iloc[:, 0].astype(str), rows[column], color=colors)
    ax.axvline(0, color="#888888", linewidth=0.8)
    ax.set_xlabel("test - control (µs)" if by == "duration" else "test - control (count)")
    ax.set_title(f"Top {len(rows)} changes by {by}")
    return ax


def summarise(diff: pd.DataFrame, key: str, kinds: dict[str, str], n: int = 10,
              alike: tuple[str, ...] = ("added", "deleted")) -> pd.DataFrame:
    """:func:`top_changes` of ``diff`` after folding rows of the same ``category`` (among
    ``alike``) and kind (``kinds``: name -> kind) into one: a pass that deletes 57 ReLU
    modules reads "57 × ReLU deleted" with their summed counts and times, not 57 rows
    crowding out the rest. Rows with a ratio (judged per row) are never folded."""
    kind = diff[key].map(kinds).fillna(diff[key])
    folds = diff["category"].isin(alike) & diff.groupby([diff["category"], kind])[key].transform("size").gt(1)
    sums = ["control_counts", "test_counts", "control_us", "test_us", "diff_duration", "diff_counts"]
    groups = diff[folds].groupby([diff["category"][folds], kind[folds]], sort=False)
    folded = groups[sums].sum(min_count=1).reset_index(names=["category", "_kind"])
    folded[key] = [f"{size} × {k} {c}" for size, k, c in zip(groups.size(), folded["_kind"], folded["category"])]
    rows = pd.concat([diff[~folds], folded.drop(columns="_kind")], ignore_index=True).reindex(columns=diff.columns)
    return top_changes(rows, n, "duration")

"""Two steps side by side: code diff, graph diff, timing diff and output difference.

Steps are duck-typed: anything with ``.gm``, ``.code``, ``.example_inputs`` and
``.index`` will do. Timings come from one interleaved run of both steps
(:mod:`fxviz.timing.timing_ab`), never from two profiles taken at different times.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import pandas as pd
import torch.fx

from fxviz.diff._compare_html import code_diff_html, comparison_html
from fxviz.background._gc import gc_paused
from fxviz.diff._linediff import unified_diff
from fxviz.checks.check import CheckResult, compare_outputs, run_outputs
from fxviz.checks.truth import against_float64, float64_outputs
from fxviz.errors import InputError
from fxviz.annotation.graph import readable_target
from fxviz.checks.memory import memory_change, step_memory
from fxviz.checks.numerics import first_divergence, first_gradient_divergence, numerics
from fxviz.diff.side_by_side import SideBySide
from fxviz.diff.structure import changes, structure
from fxviz.timing.timing_ab import PairedTimes, measure_pair, node_marks, paired_timing, total_timing
from fxviz.timing.timing_diff import Exclude, plot_top, summarise, top_changes
from fxviz.capture import as_inputs

__all__ = ["compare", "Comparison", "graph_diff", "code_diff_html"]

LEVELS = ("target", "node", "kind")
MEASURE_KWARGS = ("warmup", "repeats", "budget_s")


def compare(step_a: Any, step_b: Any, *, top_n: int = 10, min_effect: float = 0.10,
            profile_kwargs: Mapping[str, Any] | None = None, paired: PairedTimes | None = None) -> Comparison:
    """Compare ``step_a`` (control) with ``step_b`` (test). Cheap until timings or
    outputs are read: timings then measure both steps interleaved
    (:func:`fxviz.timing.timing_ab.measure_pair` with ``profile_kwargs``: ``warmup``,
    ``repeats``, ``budget_s``) unless ``paired`` holds that measurement already;
    a change smaller than ``min_effect`` (relative) is not reported as one."""
    return Comparison(step_a, step_b, top_n=top_n, min_effect=min_effect, profile_kwargs=profile_kwargs,
                      paired=paired)


def measure_steps(step_a: Any, step_b: Any, profile_kwargs: Mapping[str, Any] | None = None) -> PairedTimes:
    """:func:`fxviz.timing.timing_ab.measure_pair` of two steps' graphs on their example inputs
    (``profile_kwargs``: ``warmup``, ``repeats``, ``budget_s``)."""
    kwargs = {k: v for k, v in (profile_kwargs or {}).items() if k in MEASURE_KWARGS}
    return measure_pair(step_a.gm, as_inputs(step_a.example_inputs), step_b.gm, as_inputs(step_b.example_inputs),
                        **kwargs)


class Comparison:
    """Step a (control) against step b (test), in TraceDiff's terms for timings.

    ``code_diff`` (unified text), ``code_diff_html()`` (side by side), ``graph_diff``,
    ``structure`` (provenance-aware marks, no timing needed), ``timing_total`` (the
    whole forward), ``timing`` (per target), ``timing_by_node``, ``timing_by_kind``
    (per module class or function), ``output_diff``, ``numerics`` (error per node, propagated
    and introduced), ``first_divergence``, ``gradients``, ``first_gradient_divergence``, ``memory`` (how the peak moved), ``top()``, ``summary()``,
    ``node_marks()``, ``plot_top()``, ``side_by_side()`` (both graphs drawn, marks coloured).
    """

    def __init__(self, step_a: Any, step_b: Any, *, top_n: int = 10, min_effect: float = 0.10,
                 profile_kwargs: Mapping[str, Any] | None = None, paired: PairedTimes | None = None):
        self.step_a, self.step_b = step_a, step_b
        self.top_n, self.min_effect = top_n, min_effect
        self.profile_kwargs = {k: v for k, v in (profile_kwargs or {}).items() if k in MEASURE_KWARGS}
        self.labels = (_label(step_a, "a"), _label(step_b, "b"))
        if paired is not None:
            self.__dict__["paired"] = paired

    @functools.cached_property
    def paired(self) -> PairedTimes:
        """Both steps' per-node times from one interleaved run (measured on first use)."""
        return measure_steps(self.step_a, self.step_b, self.profile_kwargs)

    @functools.cached_property
    def code_diff(self) -> str:
        """Unified diff of the two steps' generated code."""
        with gc_paused():  # lines of two codes of 100k nodes: a collection meanwhile would rescan them all (4x)
            return "\n".join(unified_diff(self.step_a.code.splitlines(), self.step_b.code.splitlines(), *self.labels))

    def code_diff_html(self, context: int | None = 3, **window: Any) -> str:
        """Side-by-side HTML table of the code diff (every code string escaped); ``window``:
        ``near``, ``max_rows`` and ``before`` of :func:`code_diff_html`, to show a part of a long one."""
        with gc_paused():
            return code_diff_html(self.step_a.code, self.step_b.code, self.labels, context=context, **window)

    @functools.cached_property
    def graph_diff(self) -> pd.DataFrame:
        """See :func:`graph_diff`."""
        return graph_diff(self.step_a.gm, self.step_b.gm)

    @functools.cached_property
    def structure(self) -> pd.DataFrame:
        """See :func:`fxviz.diff.structure.structure`: every node of both steps added / removed /
        changed / unchanged, with its counterpart and why; needs no timing."""
        return structure(self.step_a.gm, self.step_b.gm)

    @functools.cached_property
    def numerics(self) -> pd.DataFrame:
        """Per node of step b, its error against the value it stands for in step a,
        propagated and introduced (:func:`fxviz.checks.numerics.numerics`; both steps run once,
        in lockstep, on their example inputs)."""
        return numerics(self.step_a, self.step_b, self.structure)

    @property
    def gradients(self) -> pd.DataFrame:
        """A training step's gradients compared, one row per parameter (``numerics.attrs["gradients"]``)."""
        return self.numerics.attrs["gradients"]

    @property
    def first_gradient_divergence(self) -> str | None:
        """The parameter whose gradient diverges first (in the order step b computes them), or None."""
        return first_gradient_divergence(self.numerics)

    @functools.cached_property
    def memory(self) -> pd.DataFrame:
        """How the activations' peak moved from step a to step b (channels_last, a fusion):
        :func:`fxviz.checks.memory.memory_change` of the two steps' memory (rows ``a``, ``b``:
        ``peak_bytes``, ``peak_node``, ...; ``attrs`` ``ratio``, ``moved``)."""
        return memory_change(step_memory(self.step_a), step_memory(self.step_b))

    @property
    def first_divergence(self) -> str | None:
        """The earliest node of step b (graph order) whose output differs from its
        counterpart's beyond the step check's tolerance and beyond float32's own rounding
        (``numerics``' ``rounding``); None when none does."""
        return first_divergence(self.numerics)

    @property
    def timed(self) -> bool:
        """Whether the interleaved run has been measured (reading a timing measures it)."""
        return "paired" in self.__dict__

    @functools.cached_property
    def timing_total(self) -> pd.DataFrame:
        """The whole forward in one row: :func:`fxviz.timing.timing_ab.total_timing` of the interleaved run."""
        return total_timing(self.paired)

    @functools.cached_property
    def timing(self) -> pd.DataFrame:
        """Per target: :func:`fxviz.timing.timing_ab.paired_timing` of the interleaved run."""
        return self._timing("target")

    @functools.cached_property
    def timing_by_node(self) -> pd.DataFrame:
        """Per node name: :func:`fxviz.timing.timing_ab.paired_timing` of the interleaved run."""
        return self._timing("node")

    @functools.cached_property
    def timing_by_kind(self) -> pd.DataFrame:
        """Per kind (module class, function or method), like TraceDiff's per operator."""
        return self._timing("kind")

    def _timing(self, key: str) -> pd.DataFrame:
        return paired_timing(self.paired, key, min_effect=self.min_effect)

    @functools.cached_property
    def output_diff(self) -> CheckResult:
        """Step b's outputs against step a's, each on its own example inputs, judged as
        the numeric check judges them (:func:`fxviz.checks.check.compare_outputs`; a
        mismatch again against step a's graph run in float64,
        :func:`fxviz.checks.truth.against_float64`: float32's own rounding is no difference)."""
        inputs = [[as_inputs(step.example_inputs)] for step in (self.step_a, self.step_b)]
        outputs = [run_outputs(step.gm, given) for step, given in zip((self.step_a, self.step_b), inputs)]
        result = compare_outputs(*outputs)
        if result.status != "mismatch":
            return result
        name = self.labels[0].split(" (")[0]
        return against_float64(result, *outputs, lambda: float64_outputs(self.step_a.gm, inputs[0]),
                               reference=name, source=f"{name}'s graph")

    def top(self, n: int | None = None, by: str = "duration", exclude: Exclude = None,
            level: str = "target") -> pd.DataFrame:
        """The ``n`` largest changes ``by`` ``"duration"`` or ``"count"`` at ``level``
        (``"target"``, ``"node"`` or ``"kind"``), leaving out rows judged unchanged
        (rows too noisy to tell stay, marked so); ``exclude``: regex or predicate on names."""
        return top_changes(self._level(level), n or self.top_n, by, exclude)

    def plot_top(self, n: int | None = None, by: str = "duration", exclude: Exclude = None,
                 level: str = "target", ax=None):
        """Bar chart of :meth:`top`. Returns the matplotlib Axes."""
        return plot_top(self._level(level), n or self.top_n, by, exclude, ax=ax)

    def summary(self, level: str = "target", n: int | None = None) -> pd.DataFrame:
        """:meth:`top`'s rows with a pass's alike rows (same category and kind, added or
        deleted) as one: "57 × ReLU deleted" (:func:`fxviz.timing.timing_diff.summarise`);
        the rows themselves stay in :meth:`top` and in ``timing_by_kind``."""
        keys = pd.concat([self.paired.keys_b, self.paired.keys_a]).drop_duplicates(level)
        kinds = dict(zip(keys[level], keys["kind"]))
        return summarise(self._level(level), level, kinds, n or self.top_n)

    def _level(self, level: str) -> pd.DataFrame:
        if level not in LEVELS:
            raise InputError(f"level must be one of {LEVELS}, not {level!r}.")
        diff = getattr(self, {"target": "timing", "node": "timing_by_node", "kind": "timing_by_kind"}[level])
        return diff[diff["category"] != "unchanged"]

    def node_marks(self, side: str = "b") -> dict[str, str]:
        """Node name of step ``side`` ("a" or "b") -> its :attr:`structure` mark, refined
        to ``"faster"``/``"slower"`` (beyond the noise) once :attr:`timed`; reading it
        never measures. To colour a step's graph (``render(color_by="diff", marks=...)``)."""
        if side not in ("a", "b"):
            raise InputError(f"side is 'a' (control) or 'b' (test), not {side!r}.")
        return node_marks(self.timing_by_node if self.timed else None, self.structure, side)

    def side_by_side(self, **options: Any) -> SideBySide:
        """Both steps' graphs beside each other, step a's removed and changed nodes and
        step b's added and changed ones coloured (:meth:`node_marks`); shows in a notebook
        without a widget. ``options``: :func:`fxviz.draw.render.render`'s drawing options."""
        return SideBySide(self, **options)

    def __repr__(self) -> str:
        counts = self.structure["mark"].value_counts()
        summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("added", "removed", "changed"))
        return f"Comparison({self.labels[0]} -> {self.labels[1]}: {summary})"

    def _repr_html_(self) -> str:
        return comparison_html(self)


def graph_diff(gm_a: torch.fx.GraphModule, gm_b: torch.fx.GraphModule) -> pd.DataFrame:
    """Nodes matched by name. Columns: ``node``, ``status`` (``added``: only in b,
    ``removed``: only in a, ``changed``, ``unchanged``), ``target_a``, ``target_b``
    (readable; None where absent) and ``detail`` (what changed: ``op``, ``target``,
    ``inputs``, ``module`` (its type, settings or tensors), ``attribute``). Rows: b's
    graph order, then removed nodes in a's order. By name alone: :func:`fxviz.diff.structure.structure`
    also follows what passes recorded (a BatchNorm absorbed into its conv)."""
    nodes_a = {n.name: n for n in gm_a.graph.nodes}
    nodes_b = {n.name: n for n in gm_b.graph.nodes}
    rows = []
    for name in dict.fromkeys([*nodes_b, *nodes_a]):
        a, b = nodes_a.get(name), nodes_b.get(name)
        detail = "" if a is None or b is None else ", ".join(changes(a, gm_a, b, gm_b))
        status = "added" if a is None else "removed" if b is None else "changed" if detail else "unchanged"
        rows.append((name, status,
                     None if a is None else readable_target(a, gm_a),
                     None if b is None else readable_target(b, gm_b), detail))
    return pd.DataFrame(rows, columns=["node", "status", "target_a", "target_b", "detail"])


def _label(step: Any, fallback: str) -> str:
    index = getattr(step, "index", None)
    name = getattr(step, "pass_name", None)
    text = f"step {index}" if index is not None else f"step {fallback}"
    return f"{text} ({name})" if name else text

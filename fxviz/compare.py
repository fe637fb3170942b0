"""Two steps side by side: code diff, graph diff, timing diff and output difference.

Steps are duck-typed: anything with ``.gm``, ``.code``, ``.example_inputs``, ``.index``
and ``.profile()`` (a cached :func:`fxviz.profile.profile` DataFrame) will do.
"""
from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
import torch.fx
from torch.utils._pytree import tree_leaves

from fxviz._compare_html import code_diff_html, comparison_html
from fxviz._runtime import preserved_buffers
from fxviz.errors import FxvizError
from fxviz.graph import readable_target
from fxviz.timing_diff import Exclude, diff_timing, plot_top, top_changes
from fxviz.capture import as_inputs

__all__ = ["compare", "Comparison", "OutputDiff", "graph_diff", "code_diff_html"]

LEVELS = ("target", "node", "kind")


def compare(step_a: Any, step_b: Any, *, top_n: int = 10, noise: float = 1.0,
            profile_kwargs: Mapping[str, Any] | None = None) -> Comparison:
    """Compare ``step_a`` (control) with ``step_b`` (test). Cheap until timings or
    outputs are read: those profile (``step.profile(**profile_kwargs)``, which the
    steps cache) or run both steps on first use."""
    return Comparison(step_a, step_b, top_n=top_n, noise=noise, profile_kwargs=profile_kwargs)


@dataclass(frozen=True)
class OutputDiff:
    """Largest difference between the two steps' outputs on their example inputs.
    ``max_rel`` is relative to the largest magnitude in step a's output; both are NaN
    with a ``note`` when the outputs cannot be matched up."""

    max_abs: float
    max_rel: float
    note: str = ""


class Comparison:
    """Step a (control) against step b (test), in TraceDiff's terms for timings.

    ``code_diff`` (unified text), ``code_diff_html()`` (side by side), ``graph_diff``,
    ``timing`` (per target), ``timing_by_node``, ``timing_by_kind`` (per module class
    or function), ``output_diff``, ``top()``, ``node_marks()``, ``plot_top()``.
    """

    def __init__(self, step_a: Any, step_b: Any, *, top_n: int = 10, noise: float = 1.0,
                 profile_kwargs: Mapping[str, Any] | None = None):
        self.step_a, self.step_b = step_a, step_b
        self.top_n, self.noise = top_n, noise
        self.profile_kwargs = dict(profile_kwargs or {})
        self.labels = (_label(step_a, "a"), _label(step_b, "b"))

    @functools.cached_property
    def code_diff(self) -> str:
        """Unified diff of the two steps' generated code."""
        lines = difflib.unified_diff(
            self.step_a.code.splitlines(), self.step_b.code.splitlines(),
            fromfile=self.labels[0], tofile=self.labels[1], lineterm="",
        )
        return "\n".join(lines)

    def code_diff_html(self, context: int | None = 3) -> str:
        """Side-by-side HTML table of the code diff (every code string escaped)."""
        return code_diff_html(self.step_a.code, self.step_b.code, self.labels, context=context)

    @functools.cached_property
    def graph_diff(self) -> pd.DataFrame:
        """See :func:`graph_diff`."""
        return graph_diff(self.step_a.gm, self.step_b.gm)

    @functools.cached_property
    def timing(self) -> pd.DataFrame:
        """Per target: :func:`fxviz.timing_diff.diff_timing` of the two profiles."""
        return self._timing("target")

    @functools.cached_property
    def timing_by_node(self) -> pd.DataFrame:
        """Per node name: :func:`fxviz.timing_diff.diff_timing` of the two profiles."""
        return self._timing("node")

    @functools.cached_property
    def timing_by_kind(self) -> pd.DataFrame:
        """Per kind (module class, function or method), like TraceDiff's per operator."""
        return self._timing("kind")

    def _timing(self, key: str) -> pd.DataFrame:
        control, test = (step.profile(**self.profile_kwargs) for step in (self.step_a, self.step_b))
        return diff_timing(control, test, key=key, noise=self.noise)

    @functools.cached_property
    def output_diff(self) -> OutputDiff:
        """See :class:`OutputDiff`."""
        return _output_diff(_outputs(self.step_a), _outputs(self.step_b))

    def top(self, n: int | None = None, by: str = "duration", exclude: Exclude = None,
            level: str = "target") -> pd.DataFrame:
        """The ``n`` largest changes ``by`` ``"duration"`` or ``"count"`` at ``level``
        (``"target"``, ``"node"`` or ``"kind"``); ``exclude``: regex or predicate on names."""
        return top_changes(self._level(level), n or self.top_n, by, exclude)

    def plot_top(self, n: int | None = None, by: str = "duration", exclude: Exclude = None,
                 level: str = "target", ax=None):
        """Bar chart of :meth:`top`. Returns the matplotlib Axes."""
        return plot_top(self._level(level), n or self.top_n, by, exclude, ax=ax)

    def _level(self, level: str) -> pd.DataFrame:
        if level not in LEVELS:
            raise FxvizError(f"level must be one of {LEVELS}, not {level!r}.")
        return getattr(self, {"target": "timing", "node": "timing_by_node", "kind": "timing_by_kind"}[level])

    def node_marks(self) -> dict[str, str]:
        """Node name of step b -> ``"added"``, ``"faster"``, ``"slower"`` or
        ``"unchanged"`` (timing changes beyond the noise threshold), to colour its graph."""
        by_node = self.timing_by_node.set_index("node")["category"]
        speed = {"increased": "slower", "decreased": "faster"}
        marks = {}
        for name, status in zip(self.graph_diff["node"], self.graph_diff["status"]):
            if status == "added":
                marks[name] = "added"
            elif status != "removed":
                marks[name] = speed.get(by_node.get(name), "unchanged")
        return marks

    def __repr__(self) -> str:
        counts = self.graph_diff["status"].value_counts()
        summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("added", "removed", "changed"))
        return f"Comparison({self.labels[0]} -> {self.labels[1]}: {summary})"

    def _repr_html_(self) -> str:
        return comparison_html(self)


def graph_diff(gm_a: torch.fx.GraphModule, gm_b: torch.fx.GraphModule) -> pd.DataFrame:
    """Nodes matched by name. Columns: ``node``, ``status`` (``added``: only in b,
    ``removed``: only in a, ``changed``, ``unchanged``), ``target_a``, ``target_b``
    (readable; None where absent) and ``detail`` (what changed: ``op``, ``target``,
    ``inputs``, ``module`` (its type, settings or tensors), ``attribute``). Rows: b's
    graph order, then removed nodes in a's order."""
    nodes_a = {n.name: n for n in gm_a.graph.nodes}
    nodes_b = {n.name: n for n in gm_b.graph.nodes}
    rows = []
    for name in dict.fromkeys([*nodes_b, *nodes_a]):
        a, b = nodes_a.get(name), nodes_b.get(name)
        detail = "" if a is None or b is None else ", ".join(_changes(a, gm_a, b, gm_b))
        status = "added" if a is None else "removed" if b is None else "changed" if detail else "unchanged"
        rows.append((name, status,
                     None if a is None else readable_target(a, gm_a),
                     None if b is None else readable_target(b, gm_b), detail))
    return pd.DataFrame(rows, columns=["node", "status", "target_a", "target_b", "detail"])


def _changes(a: torch.fx.Node, gm_a, b: torch.fx.Node, gm_b) -> list[str]:
    found = []
    if a.op != b.op:
        found.append("op")
    if readable_target(a, gm_a) != readable_target(b, gm_b):
        found.append("target")
    if repr(a.args) != repr(b.args) or repr(a.kwargs) != repr(b.kwargs):
        found.append("inputs")
    if found:
        return found
    if a.op == "call_module" and not _same_module(gm_a.get_submodule(a.target), gm_b.get_submodule(b.target)):
        found.append("module")
    if a.op == "get_attr" and not _same_value(_attr(gm_a, a.target), _attr(gm_b, b.target)):
        found.append("attribute")
    return found


def _same_module(m_a: torch.nn.Module, m_b: torch.nn.Module) -> bool:
    """Same type, settings and tensors (by identity, else by value): a pass that folds
    weights into a new module shows up here even though the node looks the same."""
    if m_a is m_b:
        return True
    if type(m_a) is not type(m_b) or repr(m_a) != repr(m_b):
        return False
    state_a, state_b = m_a.state_dict(keep_vars=True), m_b.state_dict(keep_vars=True)
    return state_a.keys() == state_b.keys() and all(_same_value(state_a[k], state_b[k]) for k in state_a)


def _same_value(x: Any, y: Any) -> bool:
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        return x is y or (x.shape == y.shape and x.dtype == y.dtype and x.device == y.device and torch.equal(x, y))
    return x is y


def _attr(gm: torch.nn.Module, target: str) -> Any:
    module, _, name = target.rpartition(".")
    return getattr(gm.get_submodule(module), name)


def _outputs(step: Any) -> Any:
    with torch.no_grad(), preserved_buffers(step.gm):
        return step.gm(*as_inputs(step.example_inputs))


def _output_diff(out_a: Any, out_b: Any) -> OutputDiff:
    leaves_a, leaves_b = tree_leaves(out_a), tree_leaves(out_b)
    if len(leaves_a) != len(leaves_b):
        return _unmatched(f"{len(leaves_a)} outputs against {len(leaves_b)}")
    max_abs = max_rel = 0.0
    for i, (x, y) in enumerate(zip(leaves_a, leaves_b)):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
            if x is not y and x != y:
                return _unmatched(f"output {i} differs: {x!r} against {y!r}")
            continue
        if x.shape != y.shape:
            return _unmatched(f"output {i} has shape {tuple(x.shape)} against {tuple(y.shape)}")
        if x.numel() == 0:
            continue
        x, y = x.detach().cpu().double(), y.detach().cpu().double()
        diff, scale = float((x - y).abs().max()), float(x.abs().max())
        max_abs = max(max_abs, diff)
        max_rel = max(max_rel, diff / scale if scale else (0.0 if diff == 0 else float("inf")))
    return OutputDiff(max_abs, max_rel)


def _unmatched(note: str) -> OutputDiff:
    return OutputDiff(float("nan"), float("nan"), note)


def _label(step: Any, fallback: str) -> str:
    index = getattr(step, "index", None)
    name = getattr(step, "pass_name", None)
    text = f"step {index}" if index is not None else f"step {fallback}"
    return f"{text} ({name})" if name else text

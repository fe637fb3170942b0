"""Where the current step's numbers move, in the Explorer: the "show where" link beside
its check badge, the error rows of Details and the node table's error column, all from
one ``Comparison.numerics`` of the step against an earlier step: the one before it, or
the one chosen in the "against" list shown beside the link while errors are shown.

That comparison runs both steps once, so it is made only when asked for (a click on
"show where", or the "error" colour mode) and then kept for the pair of steps.
"""
from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from fxviz.present.columns import Columns
from fxviz.present.markup import escape
from fxviz.present.node_table import COLUMNS, error_column

from .coloring import comparison
from .graph_view import GraphView
from .panel_passes import DIFFERS
from .table_view import TableView

if TYPE_CHECKING:  # pandas loads where a table is made, not with the Explorer
    import pandas as pd


def _numerics() -> Any:
    """:mod:`fxviz.checks.numerics`, loaded (with pandas) when an error is first shown, not with the Explorer."""
    from fxviz.checks import numerics

    return numerics


class StepError:
    """The error of ``session``'s current step against an earlier step (:meth:`reference`),
    node by node, shown in the Explorer's ``graph`` (selecting; coloured by "error": shown
    without a click) and ``table``. ``act(fn)`` runs a click's work as the Explorer's
    actions run (errors shown, measuring paused), ``say(text, error=False)`` writes its
    status line, ``shown()`` shows the selected node's Details again (with its error, once
    asked for); ``on_change()``, set by the Explorer, shows everything again once the user
    picks another step to compare with."""

    def __init__(self, session: Any, graph: GraphView, table: TableView, act: Callable[..., Any],
                 say: Callable[..., Any], shown: Callable[[], Any]):
        self._session, self._graph, self._table, self._say, self._shown = session, graph, table, say, shown
        self._act = act
        self._rows: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # step -> earlier -> rows
        self._asked: weakref.WeakSet[Any] = weakref.WeakSet()  # steps whose errors the user asked for
        self._sent: Columns | None = None  # the table's extra columns as this made them last
        self.where = w.Button(description="show where", icon="crosshairs", layout=w.Layout(width="auto", display="none"),
                              tooltip="select the first node whose output differs from the earlier step's")
        self.where.add_class("fxviz-show-where")
        self.where.on_click(lambda _: self._act(self.show_where))
        self.on_change: Callable[[], Any] = lambda: None
        self._chosen = -1  # the step to compare with (-1: the previous one)
        self._listing = False  # the list's options being set, not a user's choice
        self.against = w.Dropdown(description="against", layout=w.Layout(width="auto", display="none"),
                                  style={"description_width": "initial"},  # the word's width, no wider
                                  tooltip="the earlier step the errors are measured against")
        self.against.add_class("fxviz-error-against")
        self.against.observe(self._on_against, "value")
        self.controls = w.HBox([self.where, self.against])

    def show_badge(self, step: Any) -> None:
        """The link beside ``step``'s badge, while its check says its outputs differ; the
        list of steps to compare with, while ``step``'s errors are shown."""
        differs = step.index > 0 and step.check_done and step.check.status in DIFFERS
        self.where.layout.display = "" if differs else "none"
        self.against.layout.display = "" if self.active(step) else "none"
        options = [(f"previous (step {step.index - 1})", -1),
                   *((f"step {i} · {self._session.steps[i].pass_name}", i) for i in range(step.index - 1))]
        if list(self.against.options) != options:
            self._listing = True
            try:
                self.against.options = options
                self.against.value = self._chosen if self._chosen in range(step.index - 1) else -1
            finally:
                self._listing = False

    def reference(self, step: Any) -> Any:
        """The step ``step``'s errors are against: the chosen one while it comes before
        ``step``, else the previous one."""
        chosen = self._chosen
        return self._session.steps[chosen if 0 <= chosen < step.index else step.index - 1]

    def _on_against(self, change: dict[str, Any]) -> None:
        if self._listing or change["new"] == self._chosen:
            return
        self._chosen, self._sent = change["new"], None
        self._act(self.on_change)

    def active(self, step: Any) -> bool:
        """Whether ``step``'s errors are shown: asked for, or coloured by."""
        return step.index > 0 and (step in self._asked or self._graph.color_mode == "error")

    def rows(self, step: Any) -> pd.DataFrame:
        """The step's numerics against :meth:`reference`'s, indexed by node, made once per
        pair (from the comparison the "error" colouring reads: both steps run once)."""
        earlier = self.reference(step)
        known = self._rows.setdefault(step, weakref.WeakKeyDictionary())
        if earlier not in known:
            known[earlier] = comparison(earlier, step).numerics.set_index("node")
        return known[earlier]

    def _rows_or_why(self, step: Any) -> pd.DataFrame | str:
        """:meth:`rows`, or why they could not be made (a panel must still show)."""
        try:
            return self.rows(step)
        except Exception as exc:  # e.g. a model on meta: no values to compare
            return f"not compared: {type(exc).__name__}: {exc}"

    def show_step(self, index: int) -> None:
        """Go to step ``index`` and :meth:`show_where` there (the step history's link)."""
        self._act(self._goto_and_show, index)

    def _goto_and_show(self, index: int) -> None:
        self._session.goto(index)
        self.show_where()

    def show_where(self) -> None:
        """Select the first node of the current step that diverges from :meth:`reference`
        beyond the check's tolerance; say so when none does although the outputs differ."""
        step = self._session.current
        if step.index == 0:
            return
        self._asked.add(step)
        rows = self.rows(step)
        first = _numerics().first_divergence(rows.reset_index())
        self.show_column(step)
        previous = self.reference(step)
        if first is not None:
            if self._graph.selected == first:  # a change all the same: the view opens its box and pans there,
                self._graph.select("")  # Details show it again
            self._graph.select(first)
            gradients = _gradients_said(rows)
            self._say(f"First node beyond the check's tolerance against step {previous.index}: {first} (Details: "
                      f"the error introduced there, carried in).{f' Gradients: {gradients}.' if gradients else ''}",
                      error=False)
            return
        self._shown()
        carried = (f": step {previous.index}'s own check says {previous.check.summary}, look there"
                   if previous.index and previous.check_done and previous.check.status != "match" else "")
        rounded = int(rows["rounding"].sum())
        rounded = f"; {rounded} beyond it within float32's own error against float64" if rounded else ""
        self._say(f"Nothing of step {step.index} is beyond the check's tolerance against step {previous.index} "
                  f"(largest relative error {_number(rows['max_rel'].max())}{rounded}), yet its outputs differ from the original "
                  f"model's{carried}. This compares the example only; the check, random inputs too.", error=False)

    def show_column(self, step: Any) -> None:
        """The node table's error column while ``step``'s errors are shown (its other
        columns as they are); none otherwise."""
        table = self._table
        if not self.active(step):
            if table.columns != COLUMNS:
                table.columns = COLUMNS
            return
        rows, graph = self._rows_or_why(step), step.graph
        if table.extra is self._sent or isinstance(rows, str):
            return
        n = len(graph)
        errors = rows["max_rel"].reindex(list(graph)).astype(object)
        extra = table.extra.columns if len(table.extra) == n else {}
        made = Columns({**extra, "error": errors.where(errors.notna(), None).tolist()}, n)
        with table.hold_sync():
            table.columns, table.extra = [*COLUMNS, error_column(self.reference(step).index)], made
        self._sent = made

    def details_html(self, name: str) -> str:
        """The Details rows of node ``name``'s error, while the step's errors are shown
        (and, in a training step, of the gradients it gives)."""
        step = self._session.current
        if not self.active(step) or name not in step.graph:
            return ""
        rows, previous = self._rows_or_why(step), self.reference(step).index
        if isinstance(rows, str):
            return _section(previous, [("error", rows)])
        return _node_html(step, rows, name, previous) + _gradients_html(rows, name, step.graph, previous)


def _node_html(step: Any, rows: pd.DataFrame, name: str, previous: int) -> str:
    """Node ``name``'s error: how far it is, what it introduced, what it carried in."""
    if name not in rows.index or math.isnan(rows.at[name, "max_rel"]):
        why = ("a node the pass added: nothing in step {0} stands for it" if name in rows.index
               and not rows.at[name, "counterpart"] else "no tensor of the same shape to compare in step {0}")
        return _section(previous, [("error", why.format(previous))])
    row, inputs = rows.loc[name], list(step.graph.pred[name])
    carried = [(p, rows.at[p, "max_rel"]) for p in inputs if p in rows.index and not math.isnan(rows.at[p, "max_rel"])]
    worst = max(carried, key=lambda item: item[1], default=None)
    added = [p for p in inputs if p in rows.index and not rows.at[p, "counterpart"]]
    source = f"comes in through {', '.join(added)}, which the pass added" if added else "starts here"
    verdict = (f"the first node beyond the check's tolerance: the error {source}"
               if _numerics().first_divergence(rows.reset_index()) == name else
               _within(row["diverged"], row["rounding"]))
    compared = "" if row["counterpart"] == name else f" (compared with its {row['counterpart']})"
    return _section(previous, [
        ("max rel", f"{_number(row['max_rel'])} (max abs {_number(row['max_abs'])}){compared}"),
        ("SQNR", _sqnr(row["sqnr_db"])),
        ("cosine", f"{row['cosine']:.6f}" if row["cosine"] == row["cosine"] else "—"),
        ("introduced here", f"{_number(row['introduced'])} (run on step {previous}'s values of its inputs)"),
        ("carried in", _carried(worst, inputs, added, previous)),
        ("verdict", verdict),
    ])


def _gradients_said(rows: pd.DataFrame) -> str:
    """How many of a training step's gradients diverge, whose first ("" for a forward)."""
    gradients = rows.attrs.get("gradients")
    if gradients is None or gradients.empty:
        return ""
    first = _numerics().first_gradient_divergence(rows)
    where = gradients.loc[gradients["parameter"] == first, "node"].iloc[0] if first else ""
    return (f"{int(gradients['diverged'].sum())} of {len(gradients)} beyond the check's tolerance"
            + (f", the first {first}'s (node {where})" if first else ""))


def _gradients_html(rows: pd.DataFrame, name: str, graph: Any, previous: int) -> str:
    """A training step's gradients against step ``previous``'s: all of them at the output
    node (the first to diverge marked), one at the node that gives it."""
    gradients = rows.attrs.get("gradients")
    if gradients is None or gradients.empty:
        return ""
    if graph.nodes[name]["op"] != "output":
        mine = gradients[gradients["node"] == name]
        return "" if mine.empty else _section(previous, [
            (f"gradient of {g.parameter}", f"max rel {_number(g.max_rel)}, {_sqnr(g.sqnr_db)}, "
             f"{_within(g.diverged, g.rounding)}") for g in mine.itertuples()], "Gradient")
    first = _numerics().first_gradient_divergence(rows)
    cells = "".join(
        f"<tr><td>{escape(g.parameter)}{' (first to diverge)' if g.parameter == first else ''}</td>"
        f"<td>{escape(_number(g.max_rel))}</td><td>{escape(_sqnr(g.sqnr_db))}</td>"
        f"<td>{_within(g.diverged, g.rounding).split(' the ')[0]}</td></tr>" for g in gradients.itertuples())
    return (f'<div class="fxviz-details-gradients"><b>Gradients vs step {previous}</b>'
            f'<p class="fxviz-hint">{escape(_gradients_said(rows))}.</p>'
            '<table class="fxviz-table"><tr><th>parameter</th><th>max rel</th><th>SQNR</th><th>tolerance</th></tr>'
            f"{cells}</table></div>")


def _within(diverged: bool, rounding: bool) -> str:
    """A node's or gradient's verdict: beyond the check's tolerance only by float32's own
    rounding is no divergence, as the check judges outputs (``numerics``' ``rounding``)."""
    return ("beyond the check's tolerance" if diverged else
            "within float32's own error against float64" if rounding else "within the check's tolerance")


def _sqnr(db: float) -> str:
    return "exact" if db == math.inf else "—" if db != db else f"{db:.1f} dB"


def _section(previous: int, rows: list[tuple[str, str]], what: str = "Error") -> str:
    cells = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return (f'<div class="fxviz-details-error"><b>{what} vs step {previous}</b>'
            f'<table class="fxviz-kv">{cells}</table></div>')


def _carried(worst: tuple[str, float] | None, inputs: list[str], added: list[str], previous: int) -> str:
    """The error a node's inputs bring: the worst compared one's; inputs the pass added
    have nothing to be compared with, so what they change counts as introduced here."""
    text = (f"{_number(worst[1])} (the worst of its inputs: {worst[0]})" if worst
            else "nothing to compare" if inputs else "nothing: it has no inputs")
    if not added:
        return text
    many = len(added) > 1
    return (f"{text}; input{'s' if many else ''} {', '.join(added)} added by the pass (no counterpart in step "
            f"{previous}): {'their' if many else 'its'} change counts as introduced here")


def _number(value: float) -> str:
    """An error in three significant digits ("0" when exact)."""
    return "—" if value != value else "0" if value == 0 else f"{value:.3g}"

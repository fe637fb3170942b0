"""The pass panel: pick a registered pass, fill in its parameters, choose the whole
graph or selected nodes, and see the session's steps with their numeric checks.

The form is built from the pass's :class:`fxviz.passes.PassSpec`, so a user's own
registered pass gets a form like the built-ins. Applying is the Explorer's job: it
reads :meth:`PassPanel.request` when the apply button is clicked.
"""
from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import ipywidgets as w

from fxviz import passes
from fxviz.errors import InputError
from fxviz.present.markup import escape
from fxviz.passes import PassParam, PassSpec

from ._busy import working
from ._tree import replace_children

WHOLE, SELECTED = "whole graph", "selected nodes"
#: check statuses whose badge gets a "show where": the outputs differ from the original model's
DIFFERS = ("mismatch", "expected to differ")
BADGE_SLUGS = {"match": "match", "expected to differ": "expected", "mismatch": "mismatch", "error": "mismatch",
               "nothing compared": "unknown", "not checked": "unknown"}
PENDING_BADGE = '<span class="fxviz-badge-pending" title="comparing outputs with the original model">checking…</span>'


def step_badge(step: Any) -> str:
    """The step's check badge, or "checking…" while the check has not run: reading
    ``step.check`` would run the model on the kernel's thread."""
    return badge_html(step.check) if step.check_done else PENDING_BADGE


def badge_html(check: Any) -> str:
    """A step's numeric check as a small badge; the full message is its tooltip."""
    text = check.summary  # the status, with what it covered where that is less than it reads
    if check.status == "mismatch":
        text += f" (max abs {check.max_abs:.3g}, max rel {check.max_rel:.3g})"
    slug = BADGE_SLUGS.get(check.status, "mismatch")
    return f'<span class="fxviz-badge-{slug}" title="{escape(check.message)}">{escape(text)}</span>'


AUTOCOMPLETE_NODES = 5000


class PassPanel(w.VBox):
    """Pass picker, parameter form, scope, apply button and the step history.
    ``goto(index)`` is called when a step in the history is clicked; ``where(index)``
    when the "show where" beside a step's differing outputs is (none: no such link)."""

    def __init__(self, goto: Callable[[int], Any], where: Callable[[int], Any] | None = None):
        self._goto, self._where = goto, where
        self.select = w.Dropdown(description="pass", layout=w.Layout(width="auto"))
        self.select.add_class("fxviz-pass-select")
        self.doc = w.Label()
        self.doc.add_class("fxviz-pass-doc")
        self.form = w.VBox()
        self.form.add_class("fxviz-pass-form")
        self.scope = w.ToggleButtons(options=[WHOLE, SELECTED], value=WHOLE)
        self.scope.add_class("fxviz-pass-scope")
        self.nodes = w.TagsInput(value=[], allowed_tags=[], allow_duplicates=False,
                                 layout=w.Layout(display="none"))
        self.nodes.add_class("fxviz-pass-nodes")
        self.apply = w.Button(description="apply", button_style="primary", icon="play")
        self.apply.add_class("fxviz-apply")
        self.history = w.VBox()
        self.history.add_class("fxviz-history")
        self._fields: list[tuple[PassParam, w.Widget]] = []
        self._selected = ""
        self._holds = 0  # Explorer actions running (:meth:`held`)
        self._gm: Any = None
        self._why_not: dict[tuple, str | None] = {}  # per pass, for ``_gm``: a step's graph does not change
        super().__init__([self.select, self.doc, self.form, self.scope, self.nodes, self.apply,
                          w.HTML("<b>Steps</b>"), self.history])
        self.add_class("fxviz-pass-panel")
        self.select.observe(lambda _: self._build_form(), "value")
        self.scope.observe(self._on_scope, "value")

    @property
    def spec(self) -> PassSpec:
        return passes.get(self.select.value)

    def show(self, session: Any, selected: str) -> None:
        """Refresh the list of passes (a user may have registered one since), the node
        names the selection may use, and the history of ``session``."""
        names = passes.available()
        if tuple(self.select.options) != names:
            self.select.options = names
            if self.select.value is None:  # ipywidgets leaves a new Dropdown unselected
                self.select.value = names[0]
        names = [n.name for n in session.current.gm.graph.nodes]
        known = set(names)
        self.nodes.value = [n for n in self.nodes.value if n in known]  # valid before and after
        # Typed names autocomplete from the graph's; past a few thousand that list is
        # megabytes resent on every step and a datalist no one scrolls, so any name is
        # taken and apply says which ones the graph lacks.
        self.nodes.allowed_tags = names if len(names) <= AUTOCOMPLETE_NODES else []
        self.select_node(selected)
        self.show_history(session)
        if session.current.gm is not self._gm:
            self._gm, self._why_not = session.current.gm, {}
        self._describe()

    def show_history(self, session: Any) -> None:
        """The steps, each with its check badge; the current one marked."""
        replace_children(self.history, [self._history_row(step, step.index == session.index) for step in session.steps])

    def select_node(self, name: str) -> None:
        """While the scope is "selected nodes", every node the user selects is added."""
        self._selected = name
        if name and self.scope.value == SELECTED and name not in self.nodes.value:
            self.nodes.value = [*self.nodes.value, name]

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Apply takes no click while any Explorer action runs (a click made meanwhile
        is dropped), whatever redraws the panel meanwhile; then as the pass allows."""
        self._holds += 1
        self.apply.disabled = True
        try:
            yield
        finally:
            self._holds -= 1
            self._describe()

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """The apply button says the pass is running until it ends (:func:`working`)."""
        try:
            with working(self.apply, "applying…"):
                yield
        finally:
            self._describe()  # disabled again where the pass does not apply to the new current step

    def request(self) -> tuple[str, dict[str, Any], tuple[str, ...] | None]:
        """``(pass name, parameters, nodes or None)`` from the form; ValueError names a
        field that cannot be read."""
        params = {}
        for param, field in self._fields:
            value = _value(param, field)
            if value is not None:
                params[param.name] = value
        nodes = None
        if self.scope.value == SELECTED:
            if not self.nodes.value:
                raise InputError("No nodes selected: click nodes in the graph or table, or apply to the whole graph.")
            nodes = tuple(self.nodes.value)
        return self.select.value, params, nodes

    def _build_form(self) -> None:
        if self.select.value is None:
            return
        spec = self.spec
        self._describe()
        self._fields = [(p, _field(p)) for p in spec.params]
        replace_children(self.form, [field for _, field in self._fields])
        self.scope.disabled = not spec.targets_nodes
        if not spec.targets_nodes:
            self.scope.value = WHOLE

    def _describe(self) -> None:
        """The pass's description and flags; why it is not offered for this graph (its IR
        level, nothing in it to act on) and Apply disabled, when it is not."""
        if self.select.value is None:
            return
        spec = self.spec
        key = (spec.name, spec.fn)  # a pass registered again under its name is asked again
        if self._gm is not None and key not in self._why_not:
            self._why_not[key] = spec.why_not(self._gm)  # tens of ms at 30k nodes: asked after every action
        why_not = self._why_not.get(key)
        flags = [("changes the outputs" if not spec.preserves_semantics else ""),
                 ("needs eval mode" if spec.needs_eval else ""), (f"does not apply: {why_not}" if why_not else "")]
        self.doc.value = " · ".join(filter(None, [spec.doc, *flags]))
        self.apply.disabled = why_not is not None or self._holds > 0

    def _on_scope(self, change: dict[str, Any]) -> None:
        chosen = change["new"] == SELECTED
        self.nodes.layout.display = "" if chosen else "none"
        if chosen:
            self.select_node(self._selected)

    def _history_row(self, step: Any, current: bool) -> w.HBox:
        button = w.Button(description=f"{step.index} · {step.pass_name}", tooltip=_action_text(step),
                          layout=w.Layout(width="auto"))
        button.add_class("fxviz-history-step")
        if current:
            button.add_class("fxviz-history-current")
        button.on_click(lambda _, index=step.index: self._goto(index))
        badge = w.HTML(step_badge(step))
        badge.add_class("fxviz-badge")
        if self._where is None or not step.index or not step.check_done or step.check.status not in DIFFERS:
            return w.HBox([button, badge])
        where = w.Button(description="where", icon="crosshairs", layout=w.Layout(width="auto"),
                         tooltip=f"go to step {step.index} and select its first node that differs from step "
                                 f"{step.index - 1}'s")
        where.add_class("fxviz-history-where")
        where.on_click(lambda _, index=step.index: self._where(index))
        return w.HBox([button, badge, where])


def _action_text(step: Any) -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in step.params.items())
    nodes = f" on {', '.join(step.nodes)}" if step.nodes else ""
    return f"{step.pass_name}({params}){nodes}"


def _field(param: PassParam) -> w.Widget:
    """A form field for ``param``: a picker for choices, a checkbox or number box for a
    bool/int/float default, else free text read as a literal (see :func:`_value`)."""
    kind = param.annotation if isinstance(param.annotation, type) else type(param.default)
    common = {"description": param.name, "style": {"description_width": "initial"}}
    if param.choices is not None and isinstance(param.default, (tuple, list)):
        field = w.SelectMultiple(options=param.choices, value=tuple(param.default), **common)
    elif param.choices is not None:
        field = w.Dropdown(options=param.choices, value=param.default if param.default in param.choices else None,
                           **common)
    elif not param.required and kind is bool:
        field = w.Checkbox(value=param.default, indent=False, description=param.name)
    elif not param.required and kind in (int, float):
        field = (w.IntText if kind is int else w.FloatText)(value=param.default, **common)
    else:
        text = "" if param.required else param.default if isinstance(param.default, str) else repr(param.default)
        field = w.Text(value=text, placeholder="required" if param.required else "", **common)
    field.add_class("fxviz-param")
    return field


def _value(param: PassParam, field: w.Widget) -> Any:
    """What a field holds, None when left empty. Free text is a string for ``str``
    parameters, else a Python literal (``3``, ``0.5``, ``("a", "b")``)."""
    if isinstance(field, w.SelectMultiple):
        return tuple(field.value)
    if not isinstance(field, w.Text):
        return field.value
    text = field.value
    if not text.strip():
        return None
    if param.annotation is str or isinstance(param.default, str):
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise InputError(f"Parameter '{param.name}': {text!r} is not a Python literal (a number, string, "
                         "tuple, list or dict).") from None

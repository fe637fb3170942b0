"""The code panel: a step's generated Python, highlighted with pygments, with the
selected node's line marked and scrolled into view, or its diff against another step
of the session (unified when the panel is narrow, side by side when it is wide), or
(``source`` on) the model's own source around the line the selected node came from."""
from __future__ import annotations

import functools
import linecache
import pathlib
import re
from typing import Any

import anywidget
import ipywidgets as w
import traitlets
from pygments import format as format_tokens, highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, PythonLexer

from fxviz.present.markup import escape
from fxviz.capture import cell_name

#: diff layouts: "fit" picks unified or side by side from the panel's width (CSS)
DIFF_LAYOUTS = ("fit", "unified", "side by side")


def node_line(code: str, name: str, op: str) -> int | None:
    """1-based line of ``code`` where node ``name`` is computed: its assignment, the
    ``def forward`` line for a placeholder, the ``return`` for the output."""
    pattern = {"placeholder": r"\s*def forward\(", "output": r"\s*return\b"}.get(op, rf"\s*{re.escape(name)} = ")
    for number, line in enumerate(code.splitlines(), start=1):
        if re.match(pattern, line):
            return number
    return None


#: lines of a longer code shown at once, around the selected node: highlighting costs
#: about 90 µs a line and the browser holds all of it (100k nodes: 9 s and 29 MB whole)
CODE_WINDOW = 400
#: lines shown before the selected node's in a part of a long diff: what leads to it
NEAR_BEFORE = 5


def code_html(code: str, line: int | None = None, *, first: int = 1) -> str:
    """``code`` as highlighted HTML (pygments escapes it), ``line`` marked; a code longer
    than CODE_WINDOW lines as the window of it around ``line`` (else its start), numbered
    (``first``: the number of its first line), under a note that says which lines these are."""
    lines = code.splitlines(keepends=True)
    if len(lines) <= CODE_WINDOW:
        formatter = HtmlFormatter(cssclass="fxviz-code-hl", hl_lines=[line] if line else [], nobackground=True)
        return format_tokens(_python_tokens(code), formatter)
    start = max(1, min(len(lines) - CODE_WINDOW + 1, (line or 1) - CODE_WINDOW // 2))
    end = start + CODE_WINDOW - 1
    formatter = HtmlFormatter(cssclass="fxviz-code-hl", linenos="inline", linenostart=start + first - 1,
                              hl_lines=[line - start + 1] if line else [], nobackground=True)
    where = "around the selected node" if line else "from the start: select a node to see the code around it"
    note = (f'<p class="fxviz-hint fxviz-code-window">Lines {start + first - 1:,}–{end + first - 1:,} of '
            f"{len(lines) + first - 1:,} (too long to show whole), {where}.</p>")
    return note + highlight("".join(lines[start - 1 : end]), PythonLexer(stripnl=False), formatter)


@functools.lru_cache(maxsize=8)
def _python_tokens(code: str) -> tuple[tuple[Any, str], ...]:
    """``code`` lexed: most of highlighting it (70 of 85 ms on 190 lines), which selecting
    a node repeated only to move the marked line."""
    return tuple(PythonLexer(stripnl=False).get_tokens(code))


def user_place(location: str | None) -> str:
    """``file:line`` as the user knows it: ``net.py:12``, a notebook cell as ``Cell In[3], line 7``."""
    if not location:
        return ""
    path, _, line = location.rpartition(":")
    cell = cell_name(path)
    return f"{cell}, line {line}" if cell else f"{pathlib.Path(path).name}:{line}"


def source_html(location: str, context: int = 12) -> str:
    """The model's source around ``location`` (``file:line``, as ``node.meta["source"]``),
    numbered, the line marked: read with linecache, which also holds notebook cells."""
    path, _, number = location.rpartition(":")
    lines = linecache.getlines(path)
    line = int(number) if number.isdigit() else 0
    title = f'<div class="fxviz-code-source-title" title="{escape(location)}">{escape(user_place(location))}</div>'
    if not 0 < line <= len(lines):
        return (f'{title}<p class="fxviz-hint">The source of {escape(location)} is not readable here '
                "(a file that moved, or code made at run time).</p>")
    start, end = max(1, line - context), min(len(lines), line + context)
    formatter = HtmlFormatter(cssclass="fxviz-code-hl", linenos="inline", linenostart=start,
                              hl_lines=[line - start + 1], nobackground=True)
    return title + highlight("".join(lines[start - 1 : end]), PythonLexer(stripnl=False), formatter)


def diff_html(comparison: Any, layout: str, near: int | None = None) -> str:
    """The code diff of ``comparison`` in ``layout`` (one of DIFF_LAYOUTS): a unified
    diff (one column: fits a narrow panel), the side-by-side table, or both for CSS to
    choose by width. A diff longer than CODE_WINDOW lines shows that many: from a few
    lines before line ``near`` of the second step's code, else from the start (no node
    selected) or the end (no change at or after it)."""
    lines = comparison.code_diff.splitlines()
    window = {}
    note = ""
    if len(lines) > CODE_WINDOW:
        at = _second_lines(lines)
        found = next((k for k, line in enumerate(at) if near and line is not None and line >= near), None)
        start = max(0, len(lines) - CODE_WINDOW) if near and found is None else max(0, (found or 0) - NEAR_BEFORE)
        where = ("from the selected node's line" if found is not None else
                 "its end: no change at or after the selected node" if near else
                 "from its start: select a node to see the changes at it")
        note = (f'<p class="fxviz-hint fxviz-code-window">Part of a diff of {len(lines):,} lines '
                f"(too long to show whole), {where}.</p>")
        lines = lines[start : start + CODE_WINDOW]
        window = {"near": near, "max_rows": CODE_WINDOW, "before": NEAR_BEFORE}
    unified = highlight("\n".join(lines) or "(no change in the code)", DiffLexer(stripnl=False),
                        HtmlFormatter(cssclass="fxviz-code-hl fxviz-diff-unified", nobackground=True))
    if layout == "unified":
        return note + unified
    split = comparison.code_diff_html(**window)
    if layout == "side by side":
        return note + split
    return f'{note}<div class="fxviz-diff-fit">{unified}<div class="fxviz-diff-split">{split}</div></div>'


def _second_lines(diff: list[str]) -> list[int | None]:
    """For each line of a unified diff, the line of the second text it shows (None: a
    line of the first text only, a header)."""
    at: list[int | None] = []
    line = 0
    for text in diff:
        if text.startswith("@@"):  # @@ -a,b +c,d @@
            line = int(re.match(r"@@ -\S+ \+(\d+)", text).group(1))
            at.append(None)
        elif text.startswith(("-", "+++")):
            at.append(None)
        else:
            at.append(line)
            line += 1
    return at


class CodeView(anywidget.AnyWidget):
    """HTML in its own scroller, scrolled to the marked line (``.hll``) whenever it
    changes, without ever scrolling the notebook."""

    _esm = (pathlib.Path(__file__).parent / "code_view.js").read_text()  # a string: a Path would keep every CodeView alive
    html = traitlets.Unicode("").tag(sync=True)


class CodePanel(w.VBox):
    """The current step's code, or (with the diff toggle on) its diff against ``base``."""

    def __init__(self):
        self.diff = w.ToggleButton(description="diff", value=False, tooltip="show the diff against another step")
        self.diff.add_class("fxviz-code-diff")
        self.base = w.Dropdown(description="against", layout=w.Layout(width="auto"))
        self.base.add_class("fxviz-code-base")
        self.layout_choice = w.Dropdown(options=DIFF_LAYOUTS, value="fit", description="layout",
                                        layout=w.Layout(width="auto"),
                                        tooltip="fit: unified when the panel is narrow, side by side when wide")
        self.layout_choice.add_class("fxviz-code-layout")
        self.source = w.ToggleButton(description="model source", value=False,
                                     tooltip="show the model's own code that the selected node came from")
        self.source.add_class("fxviz-code-source")
        self.view = CodeView()
        self.view.add_class("fxviz-code")
        bar = w.HBox([self.source, self.diff, self.base, self.layout_choice])
        bar.add_class("fxviz-code-bar")
        super().__init__([bar, self.view])
        self.add_class("fxviz-code-panel")
        self._session: Any = None
        self._selected = ("", "")
        self.source.observe(lambda change: self._exclusive(change, self.diff), "value")
        self.diff.observe(lambda change: self._exclusive(change, self.source), "value")
        self.base.observe(lambda _: self._draw(), "value")
        self.layout_choice.observe(lambda _: self._draw(), "value")

    def show(self, session: Any, selected: str = "", op: str = "") -> None:
        """Show ``session.current``; ``selected``/``op``: the node whose line to mark.
        On a new step the diff base resets to the previous step."""
        step_changed = self._session is None or self._step is not session.current
        kept = self.base.value
        self._session = None  # no drawing while the pickers change
        others = [(f"step {s.index} · {s.pass_name}", s.index) for s in session.steps if s is not session.current]
        self.base.options = others
        if step_changed or kept not in [index for _, index in others]:
            kept = session.index - 1 if session.index > 0 else (others[0][1] if others else None)
        self.base.value = kept
        self.diff.disabled = self.base.disabled = self.layout_choice.disabled = not others
        if not others:
            self.diff.value = False
        self._session, self._step, self._selected = session, session.current, (selected, op)
        self._draw()

    def _exclusive(self, change: dict[str, Any], other: w.ToggleButton) -> None:
        """Source and diff are two views of the one code box: turning one on turns the other off."""
        if change["new"] and other.value:
            other.value = False  # draws once, through its own observer
        else:
            self._draw()

    def _draw(self) -> None:
        if self._session is None:
            return
        step = self._step
        if self.source.value:
            name = self._selected[0]
            location = step.graph.nodes[name].get("source") if name in step.graph else None
            self.view.html = source_html(location) if location else (
                '<p class="fxviz-hint">' + (f"Node {escape(name)} has no source line: it was made by a pass or by "
                                            "the tracer itself." if name else
                                            "Select a node to see the model code it came from.") + "</p>")
        elif self.diff.value and self.base.value is not None:
            comparison = self._session.compare(self.base.value, step.index)
            name, op = self._selected
            self.view.html = diff_html(comparison, self.layout_choice.value, node_line(step.code, name, op) if name else None)
        else:
            name, op = self._selected
            code = step.code.lstrip("\n")  # torch.fx starts its code with blank lines; numbered as in diffs
            self.view.html = code_html(code, node_line(code, name, op) if name else None,
                                       first=step.code.count("\n", 0, len(step.code) - len(code)) + 1)

"""What every capture method shares: the record it returns, module paths from
``nn_module_stack``, source lines from ``stack_trace``, and the user's frame of an error."""
from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import re
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch import nn

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep  # the separator: torchvision is not torch
_FXVIZ_DIR = os.path.dirname(os.path.dirname(__file__)) + os.sep
_CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("fxviz_caller", default="trace")
_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')


@dataclass
class Capture:
    """One capture: the graph(s), the method that made them and why earlier methods
    were skipped or failed (``attempts``: ``(method, reason)`` pairs, in order)."""

    graphs: list[torch.fx.GraphModule]
    method: str
    attempts: list[tuple[str, str]] = field(default_factory=list)
    graph_breaks: list[dict[str, Any]] = field(default_factory=list)
    #: What the graph reproduces, when not the model itself (a copy with plain outputs).
    reference: Any = None

    @property
    def gm(self) -> torch.fx.GraphModule:
        return self.graphs[0]


@contextlib.contextmanager
def called_as(name: str) -> Iterator[None]:
    """Errors raised inside name the function the user called (``explore``, ``Session``)."""
    if _CALLER.get() != "trace":  # the outermost call is the one the user wrote
        yield
        return
    token = _CALLER.set(name)
    try:
        yield
    finally:
        _CALLER.reset(token)


def caller() -> str:
    return _CALLER.get()


def user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame outside torch and fxviz: the user's line that broke capture.
    Frames of torchvision, timm or transformers count as the user's (they are model code)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith((_TORCH_DIR, _FXVIZ_DIR, "<eval_with_key>"))]
    return frames[-1] if frames else None


def where(exc: BaseException, frame: traceback.FrameSummary | None = None) -> str:
    """`` at <file:line or notebook cell>: <code>`` of ``frame`` (default: the user's
    innermost frame in ``exc``'s traceback), or "" when there is none."""
    frame = frame or user_frame(exc)
    if frame is None:
        return ""
    cell = cell_name(frame.filename)
    place = f"{cell}, line {frame.lineno}" if cell else f"{frame.filename}:{frame.lineno}"
    return f" at {place}: {frame.line}"


def cell_name(filename: str) -> str | None:
    """A notebook cell's code runs from a temporary file: name it as IPython's own
    tracebacks do ("Cell In[3]"), the name the user can find on the page."""
    ipython = sys.modules.get("IPython")  # never imported here: only a running shell has cells
    shell = ipython.get_ipython() if ipython is not None else None
    label = shell.compile.format_code_name(filename) if shell is not None else None
    return " ".join(label) if label else None


class _BelowError(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR


@contextlib.contextmanager
def torch_errors_quiet() -> Iterator[None]:
    """While capturing, torch logs the traceback of a failed meta kernel or export before
    raising it: pages of stderr in the cell. fxviz reports that exception itself (kept as
    the ``__cause__``; ``%tb`` shows it), so torch's ERROR records are dropped meanwhile."""
    names = ["torch", *(name for name in logging.root.manager.loggerDict if name.startswith("torch."))]
    handlers = {h for name in names for h in logging.getLogger(name).handlers}
    quiet = _BelowError()
    for handler in handlers:
        handler.addFilter(quiet)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(quiet)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__


def module_types(model: nn.Module | None) -> dict[str, str]:
    """Class name per module path; the GraphModule itself keeps only plain containers."""
    if not isinstance(model, nn.Module):
        return {}
    return {path: type(m).__name__ for path, m in model.named_modules() if path}


def path_from_stack(node: torch.fx.Node) -> str:
    """The innermost module path of ``nn_module_stack``, normalised: export writes
    ``L__self___layer1_0`` keys but plain dotted paths as values, sometimes with a
    ``_orig_mod.`` or ``self.`` prefix; a module called twice gets an ``@1`` suffix."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = str(list(stack.values())[-1][0])
    path = re.sub(r"@\d+$", "", path)
    for prefix in ("_orig_mod.", "self.", "L['self']."):
        path = path.removeprefix(prefix)
    return "" if path in ("L['self']", "self") else path


def source_line(node: torch.fx.Node) -> str | None:
    """``file:line`` of the innermost frame in ``stack_trace`` outside torch (the
    model's own line), or None."""
    found = [m for m in _FRAME_RE.finditer(node.meta.get("stack_trace") or "")
             if not m.group(1).startswith((_TORCH_DIR, _FXVIZ_DIR))]
    return f"{found[-1].group(1)}:{found[-1].group(2)}" if found else None


def finish(gm: torch.fx.GraphModule, method: str, root: Any, **extra: Any) -> torch.fx.GraphModule:
    """Module paths and source lines on every node, and ``gm.meta["fxviz"]``."""
    for node in gm.graph.nodes:
        if node.op == "output":
            node.meta["module_path"] = None
            continue
        node.meta.setdefault("module_path", path_from_stack(node))
        line = source_line(node)
        if line:
            node.meta["source"] = line
    gm.meta["fxviz"] = {"tracer": method, "leaves_added": [], "module_types": module_types(root), **extra}
    return gm


def as_inputs(example_inputs: Any) -> tuple:
    """Example inputs as a tuple; a single tensor is accepted for convenience."""
    if example_inputs is None:
        return ()
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs)
    return (example_inputs,)

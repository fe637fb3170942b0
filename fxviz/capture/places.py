"""Where in the user's code something happened, named as the user can find it: a
notebook cell as IPython names it ("Cell In[3]"), an installed library's file by its
package path (``transformers/masking_utils.py``), any other file by its path; and the
function the user called, which errors name (:func:`called_as`)."""
from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os
import re
import site
import sys
import sysconfig
import traceback
from collections.abc import Container, Iterator, Mapping
from types import CodeType

import torch
import torch.fx


_CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("fxviz_caller", default="trace")


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


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep  # the separator: torchvision is not torch
_FXVIZ_DIR = os.path.dirname(os.path.dirname(__file__)) + os.sep
_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')


def user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame outside torch and fxviz: the user's line that broke capture.
    Frames of torchvision, timm or transformers count as the user's (they are model code).
    Dynamo's errors (strict torch.export) raise from dynamo's own interpreter: the frames
    it was tracing are on the error as ``real_stack``, innermost last. Code generated at run
    time (``<string>``, no source to read) is passed over for the line that ran it."""
    stack = [*traceback.extract_tb(exc.__traceback__), *(getattr(exc, "real_stack", None) or ())]
    frames = [f for f in stack if not f.filename.startswith((_TORCH_DIR, _FXVIZ_DIR, "<eval_with_key>"))
              and not (f.filename.startswith("<") and not f.line)]  # generated code: no line to show
    return frames[-1] if frames else None


def where(exc: BaseException, frame: traceback.FrameSummary | None = None) -> str:
    """`` at <file:line or notebook cell>: <code>`` of ``frame`` (default: the user's
    innermost frame in ``exc``'s traceback), or "" when there is none."""
    frame = frame or user_frame(exc)
    if frame is None:
        return ""
    cell = cell_name(frame.filename)
    place = f"{cell}, line {frame.lineno}" if cell else f"{package_relative(frame.filename)}:{frame.lineno}"
    return f" at {place}: {frame.line}"


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """Where this environment installs libraries, each with a trailing separator, longest first."""
    dirs = {sysconfig.get_paths()[kind] for kind in ("purelib", "platlib")}
    with contextlib.suppress(AttributeError):  # an old virtualenv's site module has neither
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    return tuple(sorted({os.path.join(os.path.normpath(d), "") for d in dirs if d}, key=len, reverse=True))


def package_relative(filename: str) -> str:
    """An installed library's file by its package path (``transformers/masking_utils.py``),
    not where the environment keeps it; any other file as it is."""
    for directory in _library_dirs():
        if filename.startswith(directory):
            return filename[len(directory):]
    return filename


def cell_name(filename: str) -> str | None:
    """A notebook cell's code runs from a temporary file: name it as IPython's own
    tracebacks do ("Cell In[3]"), the name the user can find on the page."""
    ipython = sys.modules.get("IPython")  # never imported here: only a running shell has cells
    shell = ipython.get_ipython() if ipython is not None else None
    label = shell.compile.format_code_name(filename) if shell is not None else None
    return " ".join(label) if label else None


def source_line(node: torch.fx.Node) -> str | None:
    """``file:line`` of the innermost frame in ``stack_trace`` outside torch (the
    model's own line), or None."""
    text = node.meta.get("stack_trace")
    return _innermost_line(text) if text else None


@functools.lru_cache(maxsize=1024)
def _innermost_line(stack_trace: str) -> str | None:
    """:func:`source_line` of a ``stack_trace``, read once per distinct text: a graph's nodes
    share a few dozen (a 24-layer Qwen2's 1,900 nodes, 39), and reading one was over half of
    what capture adds to each node."""
    found = [m for m in _FRAME_RE.finditer(stack_trace) if not m.group(1).startswith((_TORCH_DIR, _FXVIZ_DIR))]
    return f"{found[-1].group(1)}:{found[-1].group(2)}" if found else None


_FORWARD_RE = re.compile(r'File "([^"]+)", line \d+, in forward\n[ \t]*(.*)')
# torch's tracing machinery, whose frames are no module's (strict export's root wrapper has a forward)
_TRACING_DIRS = tuple(os.path.join(_TORCH_DIR, d, "") for d in ("_dynamo", "export", "_export", "fx"))
_METHOD_CALL_RE = re.compile(r"\bself\.((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\.([A-Za-z_]\w*)\(")


def method_path(node: torch.fx.Node, path: str, modules: Container[str] = ()) -> str:
    """``path`` (the innermost module of ``nn_module_stack``), or the submodule of it whose
    method (not ``forward``) made the node: module hooks see ``self.corr_block.index_pyramid(...)``
    (RAFT's refinement loop) or ``self.altup.predict(...)`` (Gemma 3n) as ops of the caller,
    and its boxes fall apart. Read from the innermost ``forward`` frame of ``stack_trace``,
    only where it is that module's (one such frame per module on the stack), and, where the
    model's ``modules`` (paths) are known, only when it is one of them (``self.config.f()`` is not)."""
    text, stack = node.meta.get("stack_trace"), node.meta.get("nn_module_stack")
    if not text or not stack:
        return path
    owner = _called_on(text, len(stack))
    if not owner:
        return path
    called = f"{path}.{owner}" if path else owner
    return called if not modules or called in modules else path


@functools.lru_cache(maxsize=1024)
def _called_on(stack_trace: str, modules: int) -> str | None:
    """The attribute chain of ``self`` whose method the innermost of ``modules`` forward frames
    calls, when that line calls one (and only one) such method, not a tensor's (``self.weight.float()``);
    read once per distinct text."""
    lines = [line for file, line in _FORWARD_RE.findall(stack_trace) if not file.startswith(_TRACING_DIRS)]
    if len(lines) != modules:
        return None
    owners = {chain for chain, method in _METHOD_CALL_RE.findall(lines[-1]) if not hasattr(torch.Tensor, method)}
    return owners.pop() if len(owners) == 1 else None


def running_method(modules: Mapping[int, str], scope: str) -> str:
    """What :func:`method_path` reads from a stack trace, read from the live stack while a
    tracer records a node (symbolic tracing keeps no stack trace): the path of the submodule
    of ``scope`` whose method made the node, from the innermost frame of model code whose
    ``self`` is one of ``modules`` (``id`` to path); ``scope`` where that frame is ``scope``'s
    own (its forward, a helper of its own) or an outer module's (the caller of a leaf)."""
    frame = inspect.currentframe()
    while frame is not None:
        if _model_method(frame.f_code):
            path = modules.get(id(frame.f_locals.get("self")))
            if path is not None:
                return path if (path.startswith(f"{scope}.") if scope else path) else scope
        frame = frame.f_back
    return scope


@functools.lru_cache(maxsize=4096)
def _model_method(code: CodeType) -> bool:
    """A method (its first parameter ``self``) of the model's code, not torch's or fxviz's:
    torch's frames (Sequential's forward, the tracer's own) never own a user's method call."""
    return bool(code.co_argcount) and code.co_varnames[0] == "self" and \
        not code.co_filename.startswith((_TORCH_DIR, _FXVIZ_DIR))

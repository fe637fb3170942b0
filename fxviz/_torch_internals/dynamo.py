"""torch's private dynamo and AOT autograd APIs, each behind one small function.

These names move between torch releases (pyproject allows torch>=2.5): every use of a
private one is here, and each says what it falls back to when it is missing, so a
release that renames one loses a detail (a guard tree, a friendly break message),
never the capture.
"""
from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx


@contextlib.contextmanager
def fresh_dynamo() -> Iterator[None]:
    """Dynamo caches compiled frames per code object, with their guards and recompile
    counts: reset before (a second capture must trace again, not reuse the first's
    entries or hit the recompile limit) and after (the user's next ``torch.compile`` of
    the same model must not meet our recording backend's entries). Like
    ``torch._dynamo.explain``, this also drops code compiled earlier by other
    ``torch.compile`` calls: they compile again on their next call."""
    import torch._dynamo

    torch._dynamo.reset()
    try:
        yield
    finally:
        torch._dynamo.reset()


def optimize(backend: Callable[..., Any], guards: Callable[[Any], None]) -> Callable[[Any], Any]:
    """``torch._dynamo.optimize``: unlike ``torch.compile`` it takes ``guard_export_fn``
    (the guards of each compiled frame), and exists in every torch since 2.0."""
    import torch._dynamo

    return torch._dynamo.optimize(backend, nopython=False, guard_export_fn=guards)


def compile_reason(gm: torch.fx.GraphModule) -> tuple[bool, str, list]:
    """Why dynamo ended this graph: ``(graph_break, reason, user_stack)``, from the
    ``compile_subgraph_reason`` dynamo sets on every graph it hands a backend."""
    reason = getattr(gm, "compile_subgraph_reason", None)
    if reason is None:
        return False, "", []
    return bool(reason.graph_break), str(reason.reason), list(reason.user_stack or ())


def frame_scope() -> tuple[dict[str, Any], Any]:
    """Inside a backend: the locals of the frame dynamo is compiling (where its graph's
    ``L['name']`` sources start) and the object that frame is a method of (its ``self``).
    A resume function (the frame's rest after a graph break) keeps only the values still
    live: its ``self`` is read from the frame it continues, which is calling it on the
    Python stack. ``({}, None)`` on a torch without these."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        scope, code = dict(tx.output.local_scope), tx.f_code
    except (ImportError, AttributeError):
        return {}, None
    if "self" in scope or not code.co_name.startswith(_RESUMED):
        return scope, scope.get("self")
    frame = sys._getframe(1)
    name = _original(code.co_name)
    while frame is not None and not (frame.f_code.co_filename == code.co_filename
                                     and _original(frame.f_code.co_name) == name and "self" in frame.f_locals):
        frame = frame.f_back
    return scope, None if frame is None else frame.f_locals["self"]


_RESUMED = "torch_dynamo_resume_in_"


def _original(name: str) -> str:
    """``forward`` of ``torch_dynamo_resume_in_forward_at_12`` (and of a resume's resume)."""
    return re.sub(r"(_at_\d+)+$", "", re.sub(f"^({_RESUMED})+", "", name))


def error_frame(exc: BaseException) -> Any:
    """The user's frame where dynamo failed: its exceptions carry it as ``real_stack``
    (their traceback holds only dynamo's own frames)."""
    stack = list(getattr(exc, "real_stack", None) or ())
    return stack[-1] if stack else None


def compile_id() -> str | None:
    """The id (``"frame/attempt"``) of the frame dynamo is compiling now, inside a backend."""
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
    except (ImportError, AttributeError):
        return None
    return None if cid is None else str(cid)


class BreakMessages(dict):
    """Dynamo's full graph-break message per compile id ("Data-dependent branching",
    its explanation and hints), which ``compile_subgraph_reason`` abbreviates to
    ``generic_jump TensorVariable()`` for a branch. Dynamo writes it only to its
    structured trace log, and only when that log has a handler: ours, while collecting.
    Any handler there makes torch format every artifact (graphs, guards): ``quiet()``
    takes ours off meanwhile (a backend's AOT compile writes pages and breaks nothing)."""

    def __init__(self) -> None:
        super().__init__()
        try:
            from torch._logging._internal import trace_log
        except ImportError:  # older torch: the abbreviated reasons only
            trace_log = None
        self._log = trace_log
        self._handler = _Collect(self)

    def __enter__(self) -> BreakMessages:
        if self._log is not None:
            self._log.addHandler(self._handler)
        return self

    def __exit__(self, *_: Any) -> None:
        if self._log is not None:
            self._log.removeHandler(self._handler)

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        self.__exit__()
        try:
            yield
        finally:
            self.__enter__()


class _Collect(logging.Handler):
    def __init__(self, found: dict[str, str]):
        super().__init__()
        self.found = found

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", {})
        if (meta.get("artifact") or {}).get("name") == "dynamo_graph_break_reason":
            self.found[f"{meta.get('frame_id')}/{meta.get('frame_compile_id')}"] = str(record.payload)


def guard_trees(backend: Callable[..., Any]) -> dict[str, str]:
    """The guard tree of every frame compiled with ``backend``, per compile id: the
    text ``TORCH_LOGS=guards`` prints (each check with the source line that needed it).
    Read from dynamo's cache entries, which ``fresh_dynamo`` clears afterwards; empty
    on a torch without them (the guard list of :func:`guard_lines` remains)."""
    try:
        from torch._dynamo import convert_frame
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        codes = [ref() for ref in convert_frame.input_codes.seen]
        entries = [e for code in codes if code is not None for e in _debug_get_cache_entry_list(code)]
        return {str(e.compile_id): str(e.guard_manager).strip() for e in entries
                if getattr(e, "backend", backend) is backend}
    except (ImportError, AttributeError):
        return {}


def guard_lines(guards: Any) -> list[str]:
    """One line per exported guard: its kind, what it guards and the check's code."""
    lines = []
    for guard in guards:
        code = "; ".join(guard.code_list or ())
        lines.append(" ".join(filter(None, [guard.create_fn_name(), guard.name, code and f"→ {code}"])))
    return lines


def aot_backend(forward: Callable[..., Any], backward: Callable[..., Any]) -> Callable[..., Any]:
    """A dynamo backend running AOT autograd with our forward and backward compilers
    (each gets the ATen graph, returns a boxed callable: one list argument)."""
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=forward, bw_compiler=backward, inference_compiler=forward)


def boxed(fn: Callable[..., Any]) -> Callable[[list], Any]:
    """``fn(*args)`` in AOT autograd's boxed calling convention (``f(args)``)."""
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(fn)

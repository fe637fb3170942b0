"""The timing engine behind :func:`fxviz.timing.profiling.profile`: clock stamps between nodes.

A timed forward executes ``gm``'s own generated code with one ``tick(i)`` call before
node i (:func:`instrument`), so what is measured is the forward the user runs, at well
under a microsecond per node. A generic ``Interpreter`` costs about 24 µs per node,
which would drown small nodes. The ATen breakdown runs the same code, its ticks
entering each node's profiler region (:mod:`fxviz.timing.aten_breakdown`); shapes are noted by
:mod:`fxviz.annotation.shapes`' own loop, which must see every value.
"""
from __future__ import annotations

import contextlib
import marshal
import os
import subprocess
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.fx

from fxviz.errors import MeasureError, UsageError
from fxviz.background.jobs import pause_point, runs_no_model, stop_if_cancelled
from fxviz._torch_internals import code_by_node, tree_leaves

PREEMPTED_US = 50.0
# Compiling a timed forward holds the interpreter's lock throughout (3.6 s at 100,000
# nodes, about 0.5 s at this size): a longer one is compiled in a child process.
COMPILE_APART_CHARS = 2_000_000
COMPILE_APART_S = 10.0  # the child's time limit, plus a second per MB of source
PAUSE_EVERY = 32  # nodes: a pause point in making the timed source
TICK = "_fxviz_tick"  # the timed code's global that a clock's tick is bound to
_COMPILE = ("import marshal, sys; code = compile(sys.stdin.buffer.read(), sys.argv[1], 'exec', dont_inherit=True, "
            "optimize=int(sys.argv[2])); sys.stdout.buffer.write(sys.version.encode() + b'\\0' + marshal.dumps(code))")

class Clock:
    """Stamps at node boundaries: ``tick(i)`` before node i, the last one as the timed
    forward returns. Host clock on CPU; CUDA events on CUDA, read after the forward, so
    nodes get device time without stalling the launch queue; other accelerators are
    synchronised at every stamp (slower, but honest)."""

    def __init__(self, n: int, device: torch.device, *, preemption: bool = False):
        self.n = n
        self._sync = _synchronizer(device)
        self._cpu: list[int] | None = None  # thread CPU stamps, when asked to spot preemption
        if device.type == "cuda":
            events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]

            def record(i: int) -> None:
                events[i].record()

            self.tick: Callable[[int], None] = record
            self._read = lambda: [a.elapsed_time(b) * 1e3 for a, b in zip(events, events[1:])]
            return
        stamps = [0] * (n + 1)
        sync, now = self._sync, time.perf_counter_ns
        if device.type == "cpu" and preemption:
            cpu, cpu_now = [0] * (n + 1), time.thread_time_ns
            self._cpu = cpu

            def tick(i: int) -> None:
                stamps[i] = now()
                cpu[i] = cpu_now()
        elif device.type == "cpu":
            def tick(i: int) -> None:
                stamps[i] = now()
        else:
            def tick(i: int) -> None:
                sync()
                stamps[i] = now()
        self.tick = tick
        self._read = lambda: np.diff(np.array(stamps, dtype=np.int64)) / 1e3

    def wall_us(self, fn: Callable[..., Any], inputs: tuple, *, timed: bool = False) -> float:
        """Wall time (µs) of one whole forward, the device drained before and after.
        ``timed=True`` for the instrumented forward: its last stamp is taken on return."""
        self._sync()
        start = time.perf_counter_ns()
        fn(*inputs)
        if timed:
            self.tick(self.n)
        self._sync()
        return (time.perf_counter_ns() - start) / 1e3

    def intervals_us(self) -> np.ndarray:
        """Per-node times (µs) of the last timed forward."""
        return np.asarray(self._read(), dtype=float)

    def preempted(self) -> np.ndarray:
        """Per node of the last timed forward (a clock made with ``preemption=True`` on
        CPU): whether the thread was off the CPU for part of it (wall time exceeds its
        CPU time by more than 50 µs and 10 %: a descheduling costs a time slice, far
        more). All False where it cannot be told."""
        if self._cpu is None:
            return np.zeros(self.n, dtype=bool)
        wall = self.intervals_us()
        off_cpu = wall - np.diff(np.array(self._cpu, dtype=np.int64)) / 1e3
        return off_cpu > PREEMPTED_US + 0.1 * wall


def device_of(gm: torch.nn.Module, inputs: tuple) -> torch.device:
    """The device work runs on: the first tensor input's, else the first parameter's."""
    for value in tree_leaves(inputs):
        if isinstance(value, torch.Tensor):
            return value.device
    for tensor in (*gm.parameters(), *gm.buffers()):
        return tensor.device
    return torch.device("cpu")


def _synchronizer(device: torch.device) -> Callable[[], None]:
    if device.type == "cpu":
        return lambda: None
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: torch.accelerator.synchronize(device)  # MPS, XPU, …: torch >= 2.7


def instrument(gm: torch.fx.GraphModule, tick: Callable[[int], None]) -> Callable[..., Any]:
    """``gm``'s forward with ``tick(i)`` before node i, called as :func:`plain` is: the
    code of ``gm.forward``, from ``gm``'s own code generator, plus one call per node,
    run on ``gm`` itself (its submodules and tensors). The code is made once per ``gm``
    (:func:`_timed_code`); each call binds a new ``tick``."""
    return _Forward(gm, _timed_code(gm).bind(tick))


class _TimedCode:
    """The compiled timed forward of a graph (:func:`timed_source`), in the globals of
    ``gm``'s own code plus its tick, ``TICK`` (binding a clock costs a dict copy)."""

    def __init__(self, gm: torch.fx.GraphModule, made_for: tuple[str, int]):
        src, namespace = timed_source(gm)
        namespace = dict(namespace)
        exec(_compiled(src, f"<fxviz timed {type(gm).__name__}>"), namespace)
        self.made_for = made_for  # gm's code and node count it was made from (:func:`_version`)
        self._forward = namespace.pop("forward")

    def bind(self, tick: Callable[[int], None]) -> Callable[..., Any]:
        forward = self._forward
        bound = types.FunctionType(forward.__code__, {**forward.__globals__, TICK: tick},
                                   forward.__name__, forward.__defaults__, forward.__closure__)
        bound.__kwdefaults__ = forward.__kwdefaults__
        return bound


def timed_source(gm: torch.fx.GraphModule) -> tuple[str, dict[str, Any]]:
    """``gm``'s code with a line ``TICK(i)`` before node i's code (a placeholder's: before
    the first node's), by torch's map of its lines to nodes (no copy of the graph, no code
    generation: seconds at 100,000 nodes), and the globals it runs in. A graph edited since
    its code was made (as FX allows) is timed as edited, from code made afresh. A
    :func:`~fxviz.background.jobs.pause_point` every ``PAUSE_EVERY`` nodes."""
    nodes = list(gm.graph.nodes)
    src, owner, namespace = code_by_node(gm)
    timed = _ticked(nodes, src, owner)
    if timed is None:  # edited since its code was made
        src, owner, namespace = code_by_node(gm, regenerate=True)
        timed = _ticked(nodes, src, owner)
    if timed is None:
        raise MeasureError(f"Cannot time {type(gm).__name__}: torch's code for it does not map line by line to "
                           "its nodes. Profile a copy made by fxviz.trace instead.")
    return timed, namespace


def _ticked(nodes: list[torch.fx.Node], src: str, owner: list[int | None]) -> str | None:
    """``src`` with the tick lines; None where its lines are not those of ``nodes``."""
    lines, ticked = [], 0
    for line, index in zip(src.split("\n"), owner):
        if index is not None and index >= ticked:
            if index >= len(nodes) or (nodes[index].op != "output" and nodes[index].name not in line):
                return None
            for i in range(ticked, index + 1):
                if i % PAUSE_EVERY == 0:
                    pause_point()
                lines.append(f"    {TICK}({i})")
            ticked = index + 1
        lines.append(line)
    return "\n".join(lines) if ticked == len(nodes) else None


def _compiled(src: str, name: str) -> types.CodeType:
    """``compile(src, name, "exec")``; a long ``src`` in a child process of this Python,
    the code object marshalled back, so the kernel is not frozen meanwhile, and at the
    lowest CPU priority, so the kernel's work goes first on a busy machine. In process
    where no child Python can run (an embedding application's kernel) or it fails or
    takes longer than compiling here could (it is then killed)."""
    if len(src) >= COMPILE_APART_CHARS and os.path.basename(sys.executable).lower().startswith("python"):
        try:
            code = _compiled_apart(src, name)
            if code is not None:
                return code
        except (OSError, ValueError, EOFError, TypeError, subprocess.TimeoutExpired):
            pass
    return compile(src, name, "exec", dont_inherit=True)


def _compiled_apart(src: str, name: str) -> types.CodeType | None:
    windows = getattr(subprocess, "IDLE_PRIORITY_CLASS", 0) | getattr(subprocess, "CREATE_NO_WINDOW", 0)
    child = subprocess.Popen([sys.executable, "-I", "-S", "-c", _COMPILE, name, str(sys.flags.optimize)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             creationflags=windows)
    try:
        with contextlib.suppress(OSError, AttributeError):  # not on Windows (creationflags there)
            os.setpriority(os.PRIO_PROCESS, child.pid, 19)
        deadline = time.monotonic() + COMPILE_APART_S + len(src) / 1e6  # ~3 MB/s in process: a wide margin
        data: bytes | None = src.encode()
        while True:
            try:
                out, _ = child.communicate(data, timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                data = None  # sent once: a retry goes on reading
                if time.monotonic() > deadline:
                    raise
                pause_point()  # raises Cancelled once the Explorer is closed
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    version, _, code = out.partition(b"\0")
    if child.returncode == 0 and version == sys.version.encode():  # marshal's format is this Python's
        return marshal.loads(code)
    return None


def plain(gm: torch.fx.GraphModule) -> Callable[..., Any]:
    """``gm``'s own forward, called as :func:`instrument`'s is (module hooks aside in
    both: an exported program's input checks would otherwise count as the clock's
    overhead)."""
    return _Forward(gm, type(gm).forward)


class _Forward(torch.nn.Module):
    """Code bound to ``gm``, called through ``Module.__call__`` (without ``gm``'s hooks)."""

    def __init__(self, gm: torch.fx.GraphModule, forward: Callable[..., Any]):
        super().__init__()
        object.__setattr__(self, "gm", gm)  # not registered: not a submodule of this wrapper
        self.code = forward

    def forward(self, *args: Any) -> Any:
        return self.code(self.gm, *args)


MAX_KEPT = 3  # a step's profile and an A/B pair
_kept: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # gm -> _TimedCode, while gm lives
_kept_lock = threading.Lock()


def _timed_code(gm: torch.fx.GraphModule) -> _TimedCode:
    """``gm``'s timed code, kept for its next measurements (the last ``MAX_KEPT`` graphs'):
    a step is measured again and again (a profile retaken after a pass or a preemption,
    its A/B compare, a re-measure), and at 100,000 nodes compiling the code takes
    seconds that cannot be cancelled."""
    version = _version(gm)  # first: the kernel may recompile gm while the code is made
    with _kept_lock:
        kept = _kept.pop(gm, None)
        if kept is not None and kept.made_for == version:
            _kept[gm] = kept  # the most recently measured last
            return kept
    stop_if_cancelled()  # the job's last stopping point before the code is made
    with runs_no_model():  # making and compiling the code cannot be interrupted
        made = _TimedCode(gm, version)
        with _kept_lock:  # kept even if the kernel ran meanwhile (the job then stops, to run again)
            _kept.pop(gm, None)
            _kept[gm] = made
            while len(_kept) > MAX_KEPT:
                _kept.pop(next(iter(_kept.keys())))
    return made


def _version(gm: torch.fx.GraphModule) -> tuple[str, int]:
    """What the kept code must match: ``gm``'s generated code (the same object until a
    recompile) and its node count (a graph edited without recompiling, as FX allows)."""
    return gm.code, len(gm.graph.nodes)


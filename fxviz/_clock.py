"""The timing engine behind :func:`fxviz.profiling.profile`: clock stamps between nodes.

A timed forward executes ``gm``'s own generated code with one ``tick(i)`` call before
node i (:func:`instrument`), so what is measured is the forward the user runs, at well
under a microsecond per node. A generic ``Interpreter`` costs about 24 µs per node,
which would drown small nodes.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.fx

from fxviz._cancel import stop_if_cancelled
from fxviz._torch_internals import share_codegen

PREEMPTED_US = 50.0

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

            def record(i: int) -> None:  # a def, not a lambda: FX codegen names its target
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


def _synchronizer(device: torch.device) -> Callable[[], None]:
    if device.type == "cpu":
        return lambda: None
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: torch.accelerator.synchronize(device)  # MPS, XPU, …: torch >= 2.7


def instrument(gm: torch.fx.GraphModule, tick: Callable[[int], None]) -> torch.fx.GraphModule:
    """A GraphModule running ``gm``'s nodes with ``tick(i)`` before node i (``tick`` a
    Python function: FX's code generator names it by its module). It shares
    ``gm``'s submodules and tensors and its code generator: the timed code is the code
    of ``gm.forward`` plus one call per node. Cancellable between nodes (at 100,000
    nodes the copy takes seconds; generating and compiling its code after it cannot
    be interrupted)."""
    graph = torch.fx.Graph()
    share_codegen(graph, gm.graph)
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    for i, node in enumerate(gm.graph.nodes):
        stop_if_cancelled()
        graph.call_function(tick, (i,))
        copies[node] = graph.node_copy(node, copies.__getitem__)
    return torch.fx.GraphModule(gm, graph, type(gm).__name__)

"""torch.export runs below a frame that takes a chunk of CPython's frame stack of its own
(:func:`fxviz.capture._common.with_stack_room`): a hot call whose frame lands at a chunk's
start maps and unmaps memory on each call, at some caller depths and not others."""
import platform
import sys

import pytest
import torch
from torch import nn

from fxviz.capture import capture
from fxviz.capture._common import with_stack_room


def test_the_call_returns_and_raises_as_it_would():
    assert with_stack_room(lambda: 41 + 1) == 42
    error = ValueError("the model's own")

    def fails():
        raise error

    with pytest.raises(ValueError) as raised:
        with_stack_room(fails)
    assert raised.value is error


def _sized(fn, slots: int):
    """``fn`` with a frame of ``slots`` stack slots (8 bytes each) more than it needs."""
    fn.__code__ = fn.__code__.replace(co_stacksize=fn.__code__.co_stacksize + slots)
    return fn


_hot = _sized(lambda: None, 120)  # ~1 KB frames: one depth per 16 KB chunk puts it at a chunk's start


def _faults_at_each_depth(depths: int, calls: int) -> list[int]:
    import resource

    def at(depth: int) -> int:
        if depth:
            return step(depth - 1)
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        for _ in range(calls):
            _hot()
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before

    step = _sized(at, 120)
    return [at(depth) for depth in range(depths)]


@pytest.mark.skipif(sys.platform != "linux" or platform.python_implementation() != "CPython",
                    reason="page faults per thread: Linux; frame stack chunks: CPython")
def test_a_hot_call_below_the_room_maps_no_stack_chunk_at_any_depth():
    plain = _faults_at_each_depth(40, 2000)  # 40 KB of frames: at least two chunk starts
    if max(plain) < 1000:
        pytest.skip("this CPython keeps its frame stack chunks: nothing to avoid")
    roomy = with_stack_room(lambda: _faults_at_each_depth(40, 2000))
    assert sum(roomy) < 200, roomy


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x).relu()  # the line stack_trace points at


def test_export_runs_below_the_room_and_records_the_same_source_lines(monkeypatch):
    model, x = Net().eval(), torch.randn(2, 4)
    alone = torch.export.export(model, (x,))
    export, callers = torch.export.export, []

    def recorded(*args, **kwargs):
        frame, names = sys._getframe(1), []
        while frame is not None:
            names.append(frame.f_code.co_name)
            frame = frame.f_back
        callers.append(names)
        return export(*args, **kwargs)

    monkeypatch.setattr(torch.export, "export", recorded)
    gm = capture(model, (x,), tracer="export").gm
    assert callers and "_roomy" in callers[0]
    traces = {n.name: n.meta.get("stack_trace") for n in alone.graph.nodes if n.op == "call_function"}
    assert traces and all("the line stack_trace points at" in t for t in traces.values())
    assert {n.name: n.meta.get("stack_trace") for n in gm.graph.nodes if n.op == "call_function"} == traces

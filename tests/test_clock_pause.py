"""Making a large graph's timed code and a kernel action at the same time: making the
timed source waits at its pause points while the action runs, and a long compilation
runs in a child process; the code made is the same."""
from __future__ import annotations

import marshal
import signal
import sys
import threading

import pytest
import torch
import torch.fx
from torch import nn

from fxviz.timing import _clock
from fxviz.background.jobs import cancellable
from fxviz.background.jobs import Turns
from fxviz.errors import Cancelled


def chain(n: int) -> torch.fx.GraphModule:
    return torch.fx.symbolic_trace(nn.Sequential(*[nn.ReLU() for _ in range(n)]))


def make_code_beside_the_kernel(monkeypatch, act):
    """The worker makes ``gm``'s timed code as the scheduler runs it; at its 10th pause
    point it waits for the kernel's ``act(turns, seen, acting)`` to set ``acting``.
    Returns (what ``act`` returned, pause points seen in all, what the worker ended
    with, gm)."""
    gm, turns, seen, reached, acting = chain(1000), Turns(), [], threading.Event(), threading.Event()
    real = _clock.pause_point

    def counted() -> None:
        seen.append(1)
        if len(seen) == 10:
            reached.set()
            acting.wait()
        real()

    monkeypatch.setattr(_clock, "pause_point", counted)
    ended = {}

    def work() -> None:
        try:
            with turns.worker(), cancellable(lambda: False, turns.aside, turns.hold):
                _clock._timed_code(gm)
            ended["result"] = "made"
        except Cancelled as exc:
            ended["result"] = str(exc)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    reached.wait()
    try:
        acted = act(turns, seen, acting)
    finally:
        acting.set()
    worker.join()
    return acted, len(seen), ended.get("result"), gm


def test_a_kernel_action_holds_the_code_generator_at_its_next_node(monkeypatch):
    def act(turns, seen, acting):
        with turns.kernel():  # the worker steps aside to make code: the kernel does not wait for it
            acting.set()
            turns.wait_until(lambda: turns.held)  # the worker waits for this action to end
            return len(seen)

    during, _, result, gm = make_code_beside_the_kernel(monkeypatch, act)
    assert during == 10  # held at its next pause point, not writing code beside the kernel
    assert "runs again" in result  # the profile in flight is retaken: the kernel acted
    kept = _clock._kept[gm]  # the code made is kept for it, for this version of gm
    assert kept.made_for == _clock._version(gm)
    ticks = []
    _clock.instrument(gm, ticks.append)(torch.randn(3))
    assert ticks == list(range(len(gm.graph.nodes)))


def test_without_a_kernel_action_the_code_generator_goes_on(monkeypatch):
    def act(turns, seen, acting):
        acting.set()

    _, seen, result, gm = make_code_beside_the_kernel(monkeypatch, act)
    assert seen == points(gm) and result == "made"


def test_closing_stops_a_held_code_generator(monkeypatch):
    def act(turns, seen, acting):
        with turns.kernel():
            acting.set()
            turns.wait_until(lambda: turns.held)
            turns.close()  # the Explorer closed while the kernel acts (e.g. at exit)

    _, seen, result, gm = make_code_beside_the_kernel(monkeypatch, act)
    assert seen == 10 and "cancelled before it finished" in result and gm not in _clock._kept


def test_a_long_source_is_compiled_in_a_child_process_to_the_same_code(monkeypatch):
    gm = chain(30)
    src, _ = _clock.timed_source(gm)
    here = compile(src, "<fxviz timed t>", "exec", dont_inherit=True)
    monkeypatch.setattr(_clock, "COMPILE_APART_CHARS", 0)
    runs = []
    real_popen = _clock.subprocess.Popen
    monkeypatch.setattr(_clock.subprocess, "Popen", lambda *a, **k: runs.append(a[0][0]) or real_popen(*a, **k))
    niced = []
    monkeypatch.setattr(_clock.os, "setpriority", lambda *a: niced.append(a[2]))
    monkeypatch.setattr(_clock, "compile", lambda *a, **k: pytest.fail("compiled here"), raising=False)
    assert marshal.dumps(_clock._compiled(src, "<fxviz timed t>")) == marshal.dumps(here)
    assert runs == [sys.executable] and niced == [19]  # at the lowest priority: the kernel goes first
    ticks = []
    _clock.instrument(gm, ticks.append)(torch.randn(3))  # a timed forward from it runs
    assert ticks == list(range(len(gm.graph.nodes)))
    monkeypatch.delattr(_clock, "compile")
    for where in ("executable", "version"):  # no child to be had, or another Python's code: made here
        with monkeypatch.context() as patched:
            patched.setattr(_clock.sys, where, "/nonexistent/python" if where == "executable" else "3.0")
            assert marshal.dumps(_clock._compiled(src, "<fxviz timed t>")) == marshal.dumps(here)


def points(gm: torch.fx.GraphModule) -> int:
    return -(-len(gm.graph.nodes) // _clock.PAUSE_EVERY)  # nodes 0, 32, 64, ...


@pytest.mark.parametrize("n", [5, 300])
def test_the_timed_source_is_the_graphs_code_with_a_tick_before_each_node(n):
    """A pause point every 32 nodes; without its tick lines the source is gm's own code,
    each tick right before its node's line."""
    gm, calls = chain(n), []
    with cancellable(lambda: False, None, lambda: calls.append(1)):
        src, _ = _clock.timed_source(gm)
    lines = src.split("\n")
    assert [line for line in lines if _clock.TICK not in line] == gm.code.split("\n")
    assert len(calls) == points(gm)
    names = [node.name for node in gm.graph.nodes]
    for i in range(1, len(names) - 1):  # past the placeholder: node i's code follows its tick
        after = lines[lines.index(f"    {_clock.TICK}({i})") + 1]
        assert after.strip().startswith(f"{names[i]} = ")


def test_an_exported_graphs_timed_forward_gives_its_outputs():
    """torch.export's code flattens its inputs and unflattens its outputs around the nodes."""
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    gm = torch.export.export(model, (x,)).module()
    ticks = []
    out = _clock.instrument(gm, ticks.append)(x)
    assert torch.equal(out, _clock.plain(gm)(x)) and ticks == list(range(len(gm.graph.nodes)))


def test_a_graph_edited_without_recompiling_is_timed_as_edited_and_left_as_it_was():
    gm = chain(3)
    code = gm.code
    relu = next(n for n in gm.graph.nodes if n.op == "call_module")
    with gm.graph.inserting_after(relu):
        extra = gm.graph.call_function(torch.neg, (relu,))
    relu.replace_all_uses_with(extra, delete_user_cb=lambda user: user is not extra)
    ticks = []
    out = _clock.instrument(gm, ticks.append)(-torch.ones(2))
    assert ticks == list(range(len(gm.graph.nodes))) and torch.equal(out, torch.zeros(2))  # neg(relu(-1))
    assert gm.code == code  # its own code is not remade


def test_a_child_that_does_not_end_is_killed_and_the_code_made_here(monkeypatch, tmp_path):
    """An executable named python that never answers (a wrapper, a stuck machine): past
    the time limit the child is killed and the code made in process, the same code. One
    not named python (an embedding application's) is never started."""
    src, _ = _clock.timed_source(chain(30))
    code = compile(src, "<t>", "exec", dont_inherit=True)
    here = marshal.dumps(code)  # of a code object held twice, as the ones compared below (marshal's refs)
    started = []
    real_popen = _clock.subprocess.Popen
    monkeypatch.setattr(_clock.subprocess, "Popen", lambda *a, **k: started.append(real_popen(*a, **k)) or started[-1])
    monkeypatch.setattr(_clock, "COMPILE_APART_CHARS", 0)
    monkeypatch.setattr(_clock, "COMPILE_APART_S", 0.5)
    hang = tmp_path / "python-hang"
    hang.write_text("#!/bin/sh\nexec sleep 120\n")
    hang.chmod(0o755)
    monkeypatch.setattr(_clock.sys, "executable", str(hang))
    made = _clock._compiled(src, "<t>")
    assert marshal.dumps(made) == here
    assert len(started) == 1 and started[0].returncode == -signal.SIGKILL  # killed and reaped, not waited for
    monkeypatch.setattr(_clock.sys, "executable", str(tmp_path / "host-app"))
    made = _clock._compiled(src, "<t>")
    assert marshal.dumps(made) == here and len(started) == 1


def test_an_interrupt_while_a_kernel_action_waits_leaves_no_action_counted():
    """Ctrl+C while an action waits for the worker's model run: the worker must not then
    wait for an action that no longer exists."""
    turns = Turns()

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    with turns.worker():  # the worker is running a model: the action waits
        turns._gate.wait_for = interrupted
        with pytest.raises(KeyboardInterrupt), turns.kernel():
            pass
    del turns._gate.wait_for
    assert turns.waiting == 0
    turns.after_kernel()  # returns at once: no action counted

"""Undo and redo in the Explorer: busy while they run (seconds on a large graph), from
the buttons and the keys; a click or key made meanwhile is dropped, not run after."""
from __future__ import annotations

import datetime
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from fxviz.passes import registry
from fxviz.widgets import _busy, explore


def press(explorer, action):
    """What Ctrl+Z / Ctrl+Shift+Z in the browser send."""
    explorer.graph._handle_msg({"content": {"data": {"method": "custom", "content": {"action": action}}},
                                "buffers": []})


def buttons(explorer):
    return [(b.description, b.disabled) for b in (explorer.undo_button, explorer.redo_button)]


@pytest.fixture
def explorer(monkeypatch):
    """An Explorer at step 1 of 2 (it can undo and redo)."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    def unused_relu(gm):
        """Adds an unused relu: a change."""
        gm.graph.call_function(torch.relu, (next(iter(gm.graph.nodes)),))

    registry.register(unused_relu, name="unused_relu")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).eval()
    explorer = explore(model, torch.randn(1, 3, 8, 8), profile="off")
    explorer.session.apply("fuse_conv_bn")
    explorer.session.apply("unused_relu")
    explorer.session.goto(1)
    yield explorer
    explorer.close()


def watch(explorer, monkeypatch, which, fail=False):
    """Wrap ``session.<which>``: note the buttons while it runs, after the session has
    moved and the Explorer redrawn (its refresh must not enable them early)."""
    seen, real = [], getattr(explorer.session, which)

    def watched():
        seen.append(buttons(explorer))
        real()
        seen.append(buttons(explorer))
        if fail:
            raise RuntimeError("the redraw failed")

    monkeypatch.setattr(explorer.session, which, watched)
    return seen


@pytest.mark.parametrize("by_key", [False, True])
def test_undo_and_redo_say_so_while_running_then_follow_the_session(explorer, monkeypatch, by_key):
    undo, redo = watch(explorer, monkeypatch, "undo"), watch(explorer, monkeypatch, "redo")
    go = (lambda a: press(explorer, a)) if by_key else (lambda a: getattr(explorer, f"{a}_button").click())
    assert buttons(explorer) == [("undo", False), ("redo", False)]
    go("undo")
    assert undo == [[("undoing…", True), ("redo", True)]] * 2 and explorer.session.index == 0
    assert buttons(explorer) == [("undo", True), ("redo", False)]  # step 0: nothing to undo
    go("redo")
    go("redo")
    assert redo == [[("undo", True), ("redoing…", True)]] * 4  # two redos, each seen twice
    assert explorer.session.index == 2 and buttons(explorer) == [("undo", False), ("redo", True)]
    go("undo")
    assert explorer.session.index == 1 and buttons(explorer) == [("undo", False), ("redo", False)]
    assert explorer.error.value == "" and explorer.status.value == ""


def test_a_failing_undo_shows_its_error_and_leaves_the_buttons_as_the_session_is(explorer, monkeypatch):
    seen = watch(explorer, monkeypatch, "undo", fail=True)
    explorer.undo_button.click()
    assert seen[0] == [("undoing…", True), ("redo", True)]
    assert "the redraw failed" in explorer.error.value
    assert explorer.session.index == 0 and buttons(explorer) == [("undo", True), ("redo", False)]


def test_a_click_or_key_made_while_an_undo_ran_is_dropped_and_said(explorer, monkeypatch):
    """The kernel runs widget messages one at a time: a second Ctrl+Z pressed during a
    3 s undo would wait, then undo once more unseen. Its browser time tells it apart."""
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    sent = {"at": t0}
    monkeypatch.setattr(_busy, "_sent", lambda: sent["at"])
    kernel_clock = [0.0]  # the kernel's: the undo takes exactly 0.3 s of it, however busy the machine
    monkeypatch.setattr(_busy, "time", SimpleNamespace(monotonic=lambda: kernel_clock[0]))
    real = explorer.session.undo
    monkeypatch.setattr(explorer.session, "undo", lambda: (kernel_clock.__setitem__(0, kernel_clock[0] + 0.3), real()))
    press(explorer, "redo")  # 0 s: to step 2, at once
    sent["at"] = t0 + datetime.timedelta(seconds=1)
    press(explorer, "undo")  # 1 s: to step 1, ran 0.3 s or more
    assert explorer.session.index == 1
    for late, action in ((0.1, "undo"), (0.25, "redo")):  # pressed while it ran
        sent["at"] = t0 + datetime.timedelta(seconds=1 + late)
        (explorer.undo_button.click if action == "undo" else lambda: press(explorer, action))()
        assert explorer.session.index == 1 and "ignored" in explorer.status.value
    assert buttons(explorer) == [("undo", False), ("redo", False)]
    sent["at"] = t0 + datetime.timedelta(seconds=2)  # after it ended
    explorer.undo_button.click()
    assert explorer.session.index == 0 and explorer.status.value == ""


def test_outside_a_kernel_nothing_is_stale():
    requests = _busy.OneAtATime()
    with requests.running():
        pass
    assert _busy._sent() is None and not requests.stale()


def test_profiling_waits_while_an_action_runs(explorer, monkeypatch):
    """A background job making a large graph's timed code would share the interpreter
    with the undo (a pass, an export): it waits for the action's end (Scheduler.paused)."""
    waiting, real = [], explorer.session.undo
    monkeypatch.setattr(explorer.session, "undo", lambda: (waiting.append(explorer.profiler.jobs.turns.waiting), real()))
    explorer.undo_button.click()
    assert waiting == [1] and explorer.profiler.jobs.turns.waiting == 0 and explorer.session.index == 0


def test_undo_and_redo_take_no_click_while_a_pass_applies(explorer, monkeypatch):
    """A pass takes seconds on a large graph and the new step is drawn before it ends:
    undo must not look clickable meanwhile (its click would be dropped)."""
    seen, real = [], explorer.session.apply
    monkeypatch.setattr(explorer.session, "apply", lambda *a, **k: (real(*a, **k), seen.append(buttons(explorer))))
    explorer.tabs.selected_index = 2  # the Passes tab lists the pass registered by the fixture
    explorer.passes.select.value = "unused_relu"
    explorer.passes.apply.click()
    assert seen == [[("undo", True), ("redo", True)]]  # after the new step was shown, before the action ended
    assert explorer.session.index == 2 and len(explorer.session.steps) == 3  # the redo tail made way for it
    assert buttons(explorer) == [("undo", False), ("redo", True)]


def test_export_and_apply_take_no_click_while_any_action_runs(explorer, monkeypatch):
    """A click made during an action is dropped: nothing may look clickable meanwhile.
    After, export is enabled and apply as the pass allows."""
    seen, real = [], explorer.session.undo
    held = lambda: (explorer.export_button.disabled, explorer.passes.apply.disabled)  # noqa: E731
    monkeypatch.setattr(explorer.session, "undo", lambda: (seen.append(held()), real(), seen.append(held())))
    explorer.tabs.selected_index = 2
    explorer.passes.select.value = "unused_relu"
    assert held() == (False, False)
    explorer.undo_button.click()
    assert seen == [(True, True), (True, True)]  # also after the redraw of the step undone to
    assert held() == (False, False) and explorer.session.index == 0
    explorer.passes.select.value = "fuse_conv_bn"
    explorer.undo_button.click()  # nothing to undo: nothing runs, nothing held
    assert explorer.passes.apply.disabled is False

"""The headless measurement scheduler: cache per step and settings, re-measuring when
disturbed, A/B jobs, cancellation, and every job ending in a state."""
import threading

import pandas as pd
import pytest
import torch
from torch import nn

from fxviz import Session
from fxviz.background.jobs import cancellable
from fxviz.errors import Cancelled
from fxviz.background.measure import Scheduler

FAST = {"warmup": 0, "repeats": 3}
LONG = {"repeats": 10**9, "budget_s": 30.0}  # a profile that runs for 30 s unless cancelled


class FakeStep:
    """A step whose profiles are scripted: each call returns the next attrs."""

    def __init__(self, *noisy, during=None):
        self.noisy, self.during, self.calls, self.dropped = list(noisy), during, 0, 0
        self.check_done = True

    def profile(self, **kwargs):
        self.calls += 1
        if self.during:
            self.during()
        df = pd.DataFrame({"node": ["x"], "median_us": [1.0]})
        df.attrs["noisy"] = self.noisy.pop(0)
        return df

    def drop_profile(self, **kwargs):
        self.dropped += 1


def deep_session() -> Session:
    """50 linear layers: each forward takes a fraction of a millisecond."""
    return Session(nn.Sequential(*[nn.Linear(64, 64) for _ in range(50)]), (torch.randn(8, 64),))


class Forwards:
    """Counts the forwards the worker runs of ``steps``' models during ``stage`` (as a
    scheduler's ``progress`` or ``stage()`` says); ``reached`` is set at the ``n``-th. A
    profile's warm-up is two plain and two timed forwards: at the 5th, its timed forwards
    run. Waiting on this, not on a sleep, a test acts on a job surely in flight."""

    def __init__(self, *steps, stage="profiling", n=5):
        self.stage, self.n, self.count, self.now = stage, n, 0, None
        self.reached = threading.Event()
        self._hooks = [step.gm.get_submodule("0").register_forward_pre_hook(self._forward) for step in steps]

    def progress(self, what, done, total):
        self.now = what if total else None

    def remove(self):
        for hook in self._hooks:
            hook.remove()

    def _forward(self, *_):
        stage = self.stage() if callable(self.stage) else self.now == self.stage
        if stage and threading.current_thread().name == "fxviz-measure":
            self.count += 1
            if self.count >= self.n:
                self.reached.set()


@pytest.fixture(scope="module")
def session():
    s = Session(nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval(), (torch.randn(2, 8),))
    s.apply("lower_modules", types=("ReLU",))
    return s


def test_sync_mode_measures_checks_profiles_aten_and_pairs_and_caches_per_settings(session):
    scheduler = Scheduler("sync", FAST)
    a, b = session.steps
    assert scheduler.request([b], pairs=[(a, b)]) is False  # done inline
    assert b.check_done and b.check.status == "match"
    assert scheduler.known(b).table.attrs["repeats"] == 3 and "aten_op" in scheduler.known(b).aten.columns
    compared = scheduler.compared(a, b)
    assert compared.error == "" and compared.comparison.paired.rounds == 3
    assert scheduler.known(a) is None  # only what was asked
    scheduler.kwargs = {"warmup": 0, "repeats": 4}
    assert scheduler.known(b) is None and scheduler.compared(a, b) is None  # other settings: not cached
    scheduler.request([b])
    assert scheduler.known(b).table.attrs["repeats"] == 4


def test_a_noisy_profile_is_measured_again_then_marked_noisy():
    scheduler = Scheduler("sync")
    calm_second = FakeStep(True, False)
    scheduler.request([calm_second])
    assert (calm_second.calls, calm_second.dropped, scheduler.known(calm_second).noisy) == (2, 1, False)
    noisy_twice = FakeStep(True, True)
    scheduler.request([noisy_twice])
    assert (noisy_twice.calls, scheduler.known(noisy_twice).noisy) == (2, True)
    assert scheduler.request([noisy_twice]) is False  # cached, noisy and all
    noisy_twice.noisy = [False]  # a forced request ("profile this step") measures a noisy one again
    scheduler.request([noisy_twice], force=True)
    assert (noisy_twice.calls, scheduler.known(noisy_twice).noisy) == (3, False)


def test_a_pass_applied_during_a_profile_makes_it_measured_again():
    scheduler = Scheduler("sync")
    disturbed_once = FakeStep(False, False, during=None)
    disturbed_once.during = lambda: scheduler.disturb() if disturbed_once.calls == 1 else None
    scheduler.request([disturbed_once])
    assert (disturbed_once.calls, scheduler.known(disturbed_once).noisy) == (2, False)
    assert scheduler.known(disturbed_once).table.attrs["conditions"] == {"other_work": False}  # the retake


def test_a_failing_profile_ends_in_an_error_state_with_advice():
    class Broken(FakeStep):
        def profile(self, **kwargs):
            raise RuntimeError("no kernel for this dtype")

    scheduler, step = Scheduler("sync"), Broken()
    scheduler.request([step])
    error = scheduler.known(step).error
    assert error.startswith("profiling failed: RuntimeError: no kernel for this dtype.")
    assert "Run it in a cell" in error and scheduler.known(step).table is None


def test_background_jobs_call_back_and_close_cancels_an_ab_run(session):
    a, b = session.steps
    done = threading.Event()
    shown = []
    scheduler = Scheduler("background", FAST, progress=lambda *p: shown.append(p))
    assert scheduler.request([b], lambda: scheduler.known(b) and done.set()) is True  # called after each stage
    done.wait()
    assert scheduler.known(b).table is not None
    assert shown[:4] == [("queued", 0, 1), ("checking", 0, 1), ("checking", 0, 0), ("profiling", 0, 1)]
    forwards = Forwards(a, b, stage="comparing", n=3)
    try:
        endless = Scheduler("background", {"repeats": 10**9}, progress=forwards.progress)
        endless.request(pairs=[(a, b)])
        forwards.reached.wait()  # the A/B run is in its forwards
        endless.close()
        endless.jobs.worker.join()  # endless unless cancelled: a hang here is the failure
    finally:
        forwards.remove()
    assert endless.compared(a, b) is None  # nothing kept of it


def test_off_mode_checks_but_does_not_time_unless_forced(session):
    scheduler = Scheduler("off", FAST)
    step = session.steps[1]
    assert scheduler.request([step]) is False and scheduler.known(step) is None
    with pytest.raises(ValueError, match="profile must be one of"):
        Scheduler("later")


def test_a_training_steps_badge_ends_in_a_verdict_in_the_background():
    """The badge used to read "checking…" forever on a make_fx training step."""
    from fxviz.widgets import explore

    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))

    def step(x):
        return torch.autograd.grad(model(x).sum(), [model[0].weight])

    session = Session(step, (torch.randn(5, 4),), tracer="make_fx", module=model)
    explorer = explore(session, profile="background", profile_kwargs=FAST)
    try:
        explorer.profiler.wait_idle()
        assert "fxviz-badge-match" in explorer.badge.value and ">match<" in explorer.badge.value
    finally:
        explorer.close()


def test_closing_cancels_a_profile_in_flight_and_keeps_nothing_of_it():
    step = deep_session().current
    forwards = Forwards(step)
    scheduler = Scheduler("background", LONG, progress=forwards.progress)
    scheduler.request([step])
    forwards.reached.wait()  # into the timed forwards
    scheduler.close()
    scheduler.jobs.worker.join()
    # Run to its end (30 s, within the wait), the profile would be known: cancelled, nothing is.
    assert scheduler.known(step) is None and step.measured_profile is None  # neither a number nor an error
    again = Scheduler("sync", FAST)
    again.request([step])
    assert again.known(step).error == "" and again.known(step).table.attrs["repeats"] == 3


def test_a_check_that_ends_after_close_calls_nothing_back(monkeypatch):
    """A check cannot be cancelled: when it ends after close(), the panels are not
    redrawn (on the worker, while close() waits for it) and nothing is profiled."""
    import fxviz.background.jobs

    monkeypatch.setattr(fxviz.background.jobs, "START_DELAY_S", 0.0)
    scheduler = Scheduler("background")

    class SlowCheck(FakeStep):
        @property
        def check(self):  # ends once the scheduler is closed
            scheduler.jobs.turns.wait_until(lambda: scheduler.jobs.turns.closed)
            return "match"

    step, called = SlowCheck(), []
    step.check_done = False
    scheduler.request([step], lambda: called.append("redrawn"))
    scheduler.close()
    scheduler.jobs.worker.join()
    assert called == [] and step.calls == 0


@pytest.mark.parametrize("alone", [True, False])
def test_what_the_worker_measured_is_shown_after_a_kernel_action_not_during_it(monkeypatch, alone):
    """A check ending while the kernel undoes (a second at 100k nodes) redrew the old
    step on the worker, holding the Explorer's lock the undo's own redraw waited for: the
    worker's callbacks now wait for the action's end. An action that runs the model
    (``alone``) waits for the check to end; one that runs none (an undo) starts at once."""
    import fxviz.background.jobs

    monkeypatch.setattr(fxviz.background.jobs, "START_DELAY_S", 0.0)
    checking, release, ended, acting = threading.Event(), threading.Event(), threading.Event(), [False]
    scheduler = Scheduler("background", FAST)
    turns = scheduler.jobs.turns

    class SlowCheck(FakeStep):
        @property
        def check(self):
            checking.set()
            if alone:  # the check ends while the kernel action waits for it
                turns.wait_until(lambda: turns.waiting > 0)
            else:  # it ends while the kernel acts
                release.wait()
            ended.set()
            return "match"

    step, called = SlowCheck(False), []
    step.check_done = False
    try:
        scheduler.request([step], lambda: called.append(acting[0]))
        checking.wait()
        with scheduler.paused(alone=alone):
            acting[0], checked = True, ended.is_set()
            release.set()
            turns.wait_until(lambda: turns.held)  # the check has ended: the worker waits for this action
            during, acting[0] = list(called), False
        scheduler.wait_idle()  # checked, then profiled (and more)
        assert checked is alone and during == [] and len(called) >= 2 and not any(called)
    finally:
        release.set()
        scheduler.close()


def test_a_kernel_action_preempts_a_profile_in_flight_which_runs_again_after(monkeypatch):
    """Applying a pass while a step profiles used to wait for the whole profile (11 s at
    100k nodes); the profile stops at its next forward instead, keeps nothing, and is
    measured again once the kernel is done."""
    import fxviz.background.jobs

    monkeypatch.setattr(fxviz.background.jobs, "START_DELAY_S", 0.0)
    step = deep_session().current
    starts, forwards = [], Forwards(step)

    def progress(what, done, total):
        forwards.progress(what, done, total)
        if what == "profiling" and total:
            starts.append(done)

    endless = {"repeats": 10**9}  # the first profile ends only when stopped
    scheduler = Scheduler("background", endless, progress=progress)
    scheduler.request([step])
    forwards.reached.wait()  # into the timed forwards
    try:
        with scheduler.paused():  # entered once the worker has stopped: not after the whole (endless) profile
            stopped = scheduler.known(step) is None and step.measured_profile is None
            step.gm(*step.example_inputs)  # the kernel runs the model alone
            scheduler.kwargs = FAST  # the retake ends
        scheduler.wait_idle()  # measured again, to the end
        assert stopped and len(starts) == 2 and scheduler.known(step).error == ""
        assert step.measured_profile is scheduler.known(step).table
        scheduler.kwargs = endless
        assert scheduler.known(step) is None  # nothing kept of the stopped profile
    finally:
        scheduler.close()


def test_a_kernel_action_runs_beside_a_job_making_timed_code_which_is_kept(monkeypatch):
    """Compiling a timed forward runs no model and cannot stop (seconds at 100k nodes):
    an apply need not wait for it. The job stops after it and runs again, with the code
    kept, not made twice."""
    import fxviz.timing._clock
    import fxviz.background.jobs

    monkeypatch.setattr(fxviz.background.jobs, "START_DELAY_S", 0.0)
    step = deep_session().current
    generating, release, generated = threading.Event(), threading.Event(), threading.Event()
    compiled = fxviz.timing._clock._compiled

    def slow(*args):  # the worker's compilation, held until the kernel is done
        generating.set()
        release.wait()
        try:
            return compiled(*args)
        finally:
            generated.set()

    monkeypatch.setattr(fxviz.timing._clock, "_compiled", slow)
    scheduler = Scheduler("background", {"warmup": 0, "repeats": 3})
    try:
        scheduler.request([step])
        generating.wait()
        with scheduler.paused():  # entered while the code is being made: not after it (held until released)
            beside = not generated.is_set()
            step.gm(*step.example_inputs)
        release.set()
        scheduler.wait_idle()
        assert beside and scheduler.known(step).error == "" and step.measured_profile is not None
        generating.clear()
        assert step.profile(warmup=0, repeats=1) is not None and not generating.is_set()  # kept: made once
    finally:
        release.set()
        scheduler.close()


def test_a_kernel_action_beside_a_pair_in_the_making_may_compare_steps_itself(monkeypatch):
    """The worker measures an A/B pair outside Comparison's cached properties: on Python
    3.11 their lock is one per class, and a kernel action comparing two other steps
    beside the pair's code generation waited for it, while the worker waited for the
    action (a deadlock)."""
    import fxviz.timing._clock
    import fxviz.background.jobs

    monkeypatch.setattr(fxviz.background.jobs, "START_DELAY_S", 0.0)
    session = Session(nn.Sequential(*[m for _ in range(5) for m in (nn.Linear(16, 16), nn.ReLU())]),
                      (torch.randn(2, 16),))
    session.apply("lower_modules", types=("ReLU",))
    generating, release, done = threading.Event(), threading.Event(), threading.Event()
    compiled = fxviz.timing._clock._compiled

    def slow(*args):  # the worker's compilation of timed code, held while the kernel acts
        if threading.current_thread().name == "fxviz-measure":
            generating.set()
            release.wait()  # until the kernel's comparison is done: a deadlock hangs here
        return compiled(*args)

    monkeypatch.setattr(fxviz.timing._clock, "_compiled", slow)
    scheduler = Scheduler("background", {"warmup": 0, "repeats": 5})

    def kernel():
        with scheduler.paused():
            session.compare(1, 0, profile_kwargs={"warmup": 0, "repeats": 5}).timing_by_node  # noqa: B018
        done.set()

    try:
        scheduler.request(pairs=[(session.steps[0], session.steps[1])])
        generating.wait()
        threading.Thread(target=kernel, daemon=True).start()
        done.wait()
        release.set()
        scheduler.wait_idle()
        assert scheduler.compared(session.steps[0], session.steps[1]).error == ""
    finally:
        release.set()
        scheduler.close()


def test_a_kernel_action_runs_beside_the_parse_of_an_aten_trace_which_goes_on(monkeypatch):
    """Parsing torch.profiler's trace (8 s at 100k nodes) runs no model and cannot stop:
    an apply runs beside it, and the breakdown, recorded before, is kept, not redone."""
    import fxviz.timing.aten_breakdown
    import fxviz.background.jobs

    monkeypatch.setattr(fxviz.background.jobs, "START_DELAY_S", 0.0)
    step = deep_session().current
    parsing, release, parsed, calls = threading.Event(), threading.Event(), threading.Event(), []
    attribute = fxviz.timing.aten_breakdown.attribute_events

    def slow(*args, **kwargs):
        calls.append(1)
        parsing.set()
        release.wait()
        try:
            return attribute(*args, **kwargs)
        finally:
            parsed.set()

    monkeypatch.setattr(fxviz.timing.aten_breakdown, "attribute_events", slow)
    scheduler = Scheduler("background", {"warmup": 0, "repeats": 3})
    try:
        scheduler.request([step])
        parsing.wait()
        with scheduler.paused():  # entered while the trace is parsed (before: after it, held until released)
            beside = not parsed.is_set()
            step.gm(*step.example_inputs)
        release.set()
        scheduler.wait_idle()
        assert beside and calls == [1] and not scheduler.known(step).aten.empty
    finally:
        release.set()
        scheduler.close()


def test_after_a_kernel_action_the_newest_request_is_measured_first(monkeypatch):
    """The step an apply made (the one on screen) is profiled before the re-run of the
    one the apply preempted."""
    import fxviz.background.jobs
    from fxviz.background.jobs import stop_if_cancelled

    monkeypatch.setattr(fxviz.background.jobs, "START_DELAY_S", 0.0)
    order, started = [], threading.Event()
    scheduler = Scheduler("background")
    turns = scheduler.jobs.turns

    class Named(FakeStep):
        def __init__(self, name):
            super().__init__(False, False)
            self.name = name

        def profile(self, **kwargs):
            order.append(self.name)
            started.set()
            while order == ["old"]:  # the first run's forwards go on until a kernel action stops them
                stop_if_cancelled()
                turns.wait_until(lambda: turns.waiting > 0)
            return super().profile(**kwargs)

    old, new = Named("old"), Named("new")
    try:
        scheduler.request([old])
        started.wait()
        with scheduler.paused():  # the kernel applies a pass, then asks for the new step
            scheduler.request([new])
        scheduler.wait_idle()
        assert order == ["old", "new", "old"] and scheduler.known(new).error == ""
    finally:
        scheduler.close()


def test_a_cancelled_profile_is_not_cached_and_the_next_call_measures_afresh():
    step = deep_session().current
    with cancellable(lambda: True), pytest.raises(Cancelled):
        step.profile(**FAST)
    assert step.measured_profile is None
    assert step.profile(**FAST).attrs["repeats"] == 3 and step.measured_profile is step.profile(**FAST)


def test_closing_the_explorer_mid_profile_cancels_the_profile():
    from fxviz.widgets import explore

    session, shown = deep_session(), []
    forwards = Forwards(session.current, stage=lambda: shown and shown[0].profiler.progress.description == "profiling")
    explorer = explore(session, profile="background", profile_kwargs=LONG)
    shown.append(explorer)
    forwards.reached.wait()  # the Explorer's bar says "profiling", and its timed forwards run
    explorer.close()
    explorer.profiler.jobs.worker.join()  # stopped by the close: run to its end (30 s), the profile would be kept
    assert session.current.measured_profile is None


@pytest.mark.parametrize("stage", ["checking", "profiling"])
def test_a_script_that_ends_while_the_worker_measures_exits_cleanly(stage):
    """A daemon worker killed inside a torch op at interpreter exit aborts the process
    (exit 134, "terminate called without an active exception"). At exit the scheduler
    stops its worker: a check ends, and a profile in flight (30 s here; 11 s for a step
    of 100k nodes) is cancelled, so the worker stops within the 5 s the exit waits. The
    script exits once the worker runs the model in that stage (a profile: its timed forwards)."""
    import os
    import re
    import subprocess
    import sys

    script = f"""
import atexit, threading, time
def report():  # registered before fxviz's exit handler: runs after it
    print(f"worker alive: {{scheduler.jobs.worker.is_alive()}} after {{time.monotonic() - exiting:.2f}} s", flush=True)
atexit.register(report)
import torch
from torch import nn
from fxviz import Session
from fxviz.background.measure import Scheduler
session = Session(nn.Sequential(*[nn.Linear(64, 64) for _ in range(50)]), (torch.randn(8, 64),))
started, now, forwards = threading.Event(), [None], []
def forward(*_):  # a profile's 5th forward is a timed one (after 2 warm-ups of 2)
    if now[0] == {stage!r} and threading.current_thread().name == "fxviz-measure":
        forwards.append(1)
        if len(forwards) >= {5 if stage == "profiling" else 1}:
            started.set()
session.current.gm.get_submodule("0").register_forward_pre_hook(forward)
scheduler = Scheduler("background", {LONG}, progress=lambda what, done, total: now.__setitem__(0, total and what))
scheduler.request([session.current])
started.wait()  # the worker is running the model now: exit in the middle of it
print("exiting", flush=True)
exiting = time.monotonic()
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert "exiting" in done.stdout, done.stderr
    assert done.returncode == 0 and "terminate" not in done.stderr, (done.returncode, done.stderr[-2000:])
    alive = re.search(r"worker alive: (\w+) after [\d.]+ s", done.stdout).group(1)
    assert alive == "False", done.stdout  # stopped within the exit's 5 s wait, not left running

"""The auto chain: each method tried in order, with the reason earlier ones failed."""
import pathlib
import re
import time

import pytest
import torch
import torch.fx
from torch import nn

import fxviz
import fxviz.capture as capture_package
from fxviz.capture import auto_order, capture, data_dependent, forget_front_end, front_end, methods
from fxviz.capture import make_fx as make_fx_module
from fxviz.capture._common import finish
from fxviz.errors import TraceError


class DataBranch(nn.Module):
    """A branch on a tensor's value: only dynamo's split graphs capture it."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        x = self.lin(x)
        if x.sum() > 0:  # the graph break
            return x * 2
        return x - 1


class KVCache:
    """The shape of Hugging Face's DynamicCache: per layer, keys and values."""

    class Layer:
        def __init__(self, keys, values):
            self.keys, self.values = keys, values

    def __init__(self, layers):
        self.layers = layers


class CachingModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.k, self.v = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return {"out": torch.tanh(self.k(x) + self.v(x)), "cache": KVCache([KVCache.Layer(self.k(x), self.v(x))])}


def test_data_dependent_branch_opens_as_dynamo_graphs_with_the_break_and_user_line():
    result = capture(DataBranch(), torch.randn(2, 3))
    assert result.method == "dynamo"
    assert [m for m, _ in result.attempts] == ["symbolic", "export", "export (strict)", "make_fx"]
    assert all("test_capture_auto.py" in why for _, why in result.attempts)
    tried = [why for m, why in result.attempts if m != "export (strict)"]
    assert all(why.endswith(" s]") for why in tried)  # what each failed try cost
    assert dict(result.attempts)["export (strict)"].startswith("skipped: it would stop where torch.export did")
    assert len(result.graphs) == 2
    (brk,) = result.graph_breaks
    assert brk["user_line"].endswith(f"test_capture_auto.py:{DataBranch.forward.__code__.co_firstlineno + 2}")
    linear = next(n for n in result.gm.graph.nodes if n.op == "call_function" and "linear" in str(n.target))
    assert linear.meta["module_path"] == "lin"
    x_input = next(n for n in result.gm.graph.find_nodes(op="placeholder") if n.name == "x")  # forward's parameter, not dynamo's l_x_
    assert x_input.meta["module_path"] == ""


class KeepsPositives(nn.Module):
    """A size read from the data (``x[x > 0]``) and a branch on it: export stops at the
    branch; make_fx on the real inputs, where the size is a number, does not."""

    def forward(self, x):
        kept = x[x > 0]
        return kept.sum() * 2 if kept.numel() > 2 else kept.sum()


@pytest.fixture
def traces(monkeypatch):
    """The exports and make_fx retries on fakes the chain makes: ("export", strict) and
    ("fakes", compiling)."""
    made, export, on_fakes = [], torch.export.export, make_fx_module.make_fx_on_fakes

    def counted_export(*args, strict=False, **kwargs):
        made.append(("export", strict))
        return export(*args, strict=strict, **kwargs)

    def counted_fakes(fn, decompositions, record, compiling=False):
        made.append(("fakes", compiling))
        return on_fakes(fn, decompositions, record, compiling)

    monkeypatch.setattr(torch.export, "export", counted_export)
    monkeypatch.setattr(make_fx_module, "make_fx_on_fakes", counted_fakes)
    return made


def test_methods_that_would_stop_where_export_stopped_on_a_data_dependent_branch_are_skipped(traces):
    """Strict export and make_fx's retry as torch.export traces meet the same guard on fake
    tensors: not tried, each skip said; make_fx on the real inputs and on fakes, and dynamo, are."""
    result = capture(DataBranch(), torch.randn(2, 3))
    assert result.method == "dynamo"
    assert traces == [("export", False), ("fakes", False)]
    line = f"test_capture_auto.py:{DataBranch.forward.__code__.co_firstlineno + 2}"
    strict = dict(result.attempts)["export (strict)"]
    assert strict.startswith("skipped: it would stop where torch.export did") and line in strict
    assert "export (strict): skipped: it would stop" in result.note  # dynamo's note lists it among the stops


def test_make_fx_says_why_it_did_not_retry_as_export_traces():
    with pytest.raises(TraceError) as stopped:
        capture(DataBranch(), torch.randn(2, 3), tracer="export")
    line = f"test_capture_auto.py:{DataBranch.forward.__code__.co_firstlineno + 2}"
    with data_dependent.kept(), pytest.raises(TraceError, match=r"(?s)not retried as torch\.export traces: torch\.export "
                                                                rf"stopped at a branch on a tensor's value at .*{line}"):
        data_dependent.note("export", stopped.value)  # as the chain keeps it
        capture(DataBranch(), torch.randn(2, 3), tracer="make_fx")


def test_a_method_that_gets_past_exports_data_dependent_stop_still_runs(traces):
    """make_fx on the real inputs reads the size as a number: it captures the model, after
    export stopped at the branch and strict export was skipped."""
    result = capture(KeepsPositives(), torch.tensor([1.0, -1.0, 2.0, 3.0]))
    assert result.method == "make_fx"
    assert [m for m, _ in result.attempts] == ["symbolic", "export", "export (strict)"]
    assert dict(result.attempts)["export (strict)"].startswith("skipped:")
    assert traces == [("export", False)]


def test_named_tracers_and_other_export_failures_skip_nothing(traces, monkeypatch):
    with pytest.raises(TraceError):
        capture(DataBranch(), torch.randn(2, 3), tracer="make_fx")
    assert traces == [("fakes", False), ("fakes", True)]  # outside the chain: every retry
    traces.clear()
    export = torch.export.export

    def refused(*args, strict=False, **kwargs):  # non-strict export fails, not on a data-dependent guard
        if not strict:
            raise RuntimeError("not this time")
        return export(*args, strict=strict, **kwargs)

    monkeypatch.setattr(torch.export, "export", refused)
    result = capture(DataBranch(), torch.randn(2, 3))
    assert result.method == "dynamo"
    assert not dict(result.attempts)["export (strict)"].startswith("skipped")
    assert traces == [("export", True), ("fakes", False), ("fakes", True)]


def test_dynamo_paths_of_a_torch_module_at_the_root_are_relative_to_it():
    """dynamo compiles a wrapper around nn.Sequential (one of torch's own modules): its paths start ``L['fn']``."""
    gm = capture(nn.Sequential(nn.Linear(3, 3), nn.Tanh()), torch.randn(2, 3), tracer="dynamo").gm
    assert [n.meta["module_path"] for n in gm.graph.nodes if n.op == "call_function"] == ["0", "1"]


class ReadsAValue(nn.Module):
    def forward(self, x):
        return x * (int(x.abs().sum().item() > 1) + 1)


def test_dynamos_graph_break_warnings_are_listed_not_printed(capfd):
    """dynamo logs a graph break at .item() as a warning with its stack (24 lines per
    break for maskrcnn); fxviz lists it among the graph breaks."""
    result = capture(ReadsAValue(), torch.randn(2, 3), tracer="dynamo")
    assert [b["reason"] for b in result.graph_breaks] == ["Unsupported Tensor.item() call with capture_scalar_outputs=False"]
    assert "Graph break" not in capfd.readouterr().err


def test_session_on_dynamo_graph_runs_on_the_inputs_dynamo_saw():
    session = fxviz.Session(DataBranch(), torch.randn(2, 3), n_random_inputs=0)
    assert session.capture.method == "dynamo"
    assert len(session.example_inputs) == 3  # weight, bias, x: dynamo lifts parameters to inputs
    torch.testing.assert_close(session.current.gm(*session.example_inputs)[0],
                               session._root(*session.example_inputs)[0])


def test_cache_object_output_is_captured_by_export_and_checked():
    x = torch.randn(2, 4)
    session = fxviz.Session(CachingModel(), x)
    assert session.capture.method == "export"
    out = session.current.gm(x)
    assert isinstance(out["cache"], tuple) and out["cache"][0][0].shape == (2, 4)
    assert session.current.check.status == "match"


def test_explicit_tracer_still_picks_one_method():
    with pytest.raises(TraceError, match="make_fx could not trace DataBranch.*test_capture_auto.py"):
        capture(DataBranch(), torch.randn(2, 3), tracer="make_fx")
    with pytest.raises(TraceError, match="tracer='auto'") as info:
        capture(DataBranch(), torch.randn(2, 3), tracer="symbolic")
    assert "fallback=True" not in str(info.value)  # the branch is in the top level: a leaf cannot help
    assert capture(DataBranch(), torch.randn(2, 3), tracer="auto").graphs  # the advice works


def test_the_same_tensor_passed_twice_does_not_specialise_the_graph():
    class TwoInputs(nn.Module):
        def forward(self, a, b):
            return {"out": a * 2 - b}  # a dict output: symbolic is fine, so force export

    x = torch.randn(3)
    gm = fxviz.trace(TwoInputs(), (x, x), tracer="export")
    a, b = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(gm(a, b)["out"], a * 2 - b)


@pytest.fixture
def stubs():
    """Front-ends a test declares are forgotten after it."""
    names = []

    def declare(name, run, **options):
        front_end(name, **options)(run)
        names.append(name)

    yield declare
    for name in names:
        forget_front_end(name)


class FakeClock:
    """The auto chain's clock (``time`` in :mod:`fxviz.capture`), moved on by the stubs
    themselves: a slow attempt takes no real time, and exactly as long as it says."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now

    def __getattr__(self, name):  # the rest of the time module, as it is
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(capture_package, "time", fake)
    return fake


def slow_failure(clock):
    def run(request):
        clock.now += 0.5
        raise TraceError("slow stub gave up")

    return run


def _linear_graph(request):
    return finish(torch.fx.symbolic_trace(nn.Linear(3, 3)), "quick stub", request.model)


def test_front_ends_are_a_registry_that_tracer_names_and_the_auto_chain_follow(stubs):
    assert auto_order() == ("symbolic", "export", "export (strict)", "make_fx", "dynamo")
    assert set(capture_package.MODULES) >= {f"fxviz.capture.{m}" for m in ("symbolic", "export", "make_fx", "dynamo")}
    stubs("quick stub", _linear_graph, auto=15)
    assert auto_order()[:2] == ("symbolic", "quick stub")
    assert methods()[-1] == "export (joint)" and "quick stub" in methods()
    with pytest.raises(TraceError, match="Unknown tracer 'jit': use one of 'auto', 'symbolic', 'quick stub'"):
        capture(DataBranch(), torch.randn(2, 3), tracer="jit")
    result = capture(DataBranch(), torch.randn(2, 3))  # symbolic fails on the branch; the stub is next
    assert result.method == "quick stub" and [m for m, _ in result.attempts] == ["symbolic"]
    assert capture(DataBranch(), torch.randn(2, 3), tracer="quick stub").method == "quick stub"


def test_every_module_of_the_package_that_declares_a_front_end_is_discovered():
    folder = pathlib.Path(capture_package.__file__).parent
    declaring = {f"fxviz.capture.{p.stem}" for p in folder.glob("*.py")
                 if re.search(r"^front_end\(", p.read_text(), re.M)}
    assert declaring == {f.run.__module__ for f in capture_package.front_ends().values()}
    assert len(declaring) == 5


def test_an_option_the_chosen_tracer_does_not_take_is_refused():
    with pytest.raises(TraceError, match="fallback applies to tracer 'symbolic' only, not 'make_fx'"):
        capture(DataBranch(), torch.randn(2, 3), tracer="make_fx", fallback=True)
    with pytest.raises(TraceError, match="export needs an nn.Module, got function: .*tracer='make_fx'"):
        capture(lambda x: x + 1, torch.randn(2, 3), tracer="export")


def test_the_auto_chain_stops_after_its_time_and_says_what_each_try_took(stubs, clock, monkeypatch):
    stubs("slow stub", slow_failure(clock), auto=15)
    tried, choose = [], capture_package.choose
    monkeypatch.setattr(capture_package, "choose", lambda method: tried.append(method) or choose(method))
    with pytest.raises(TraceError) as info:
        capture(DataBranch(), torch.randn(2, 3), capture_timeout=0.2)
    assert tried == ["symbolic", "slow stub"]  # export, make_fx and dynamo were not started
    message = str(info.value)
    assert "could not capture DataBranch within capture_timeout=0.2 s" in message, message
    assert "- slow stub: slow stub gave up [0.5 s]" in message, message
    assert re.search(r"- symbolic: .* \[\d+\.\d s\]", message), message
    for method in ("export", "export (strict)", "make_fx", "dynamo"):
        assert f"- {method}: not tried: out of time" in message, message
    assert "tracer='export'" in message and "capture_timeout=None" in message


def test_without_a_time_limit_the_chain_goes_on_past_a_slow_failure(stubs, clock):
    stubs("slow stub", slow_failure(clock), auto=15)
    stubs("quick stub", _linear_graph, auto=16)
    result = capture(DataBranch(), torch.randn(2, 3), capture_timeout=None)
    assert result.method == "quick stub"
    assert [m for m, _ in result.attempts] == ["symbolic", "slow stub"]


def test_a_capture_that_succeeds_past_the_time_limit_is_kept(stubs, clock):
    def slow_success(request):
        clock.now += 0.3
        return _linear_graph(request)

    stubs("slow success", slow_success, auto=15)
    assert capture(DataBranch(), torch.randn(2, 3), capture_timeout=0.1).method == "slow success"

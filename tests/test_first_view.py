"""What a Session does before its first view: the model run once, an exported program's
reference made only when the check needs it; the check still says what it did before."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

import fxviz

CALLS: list[tuple[int, ...]] = []


def counted(x: torch.Tensor) -> torch.Tensor:
    """An op the graph keeps as one call (torch.fx.wrap): each call with real tensors is noted."""
    if isinstance(x, torch.Tensor):
        CALLS.append(tuple(x.shape))
    return x * 2


torch.fx.wrap("counted")


class Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return counted(self.lin(x)).relu()


class Noisy(nn.Module):
    """Random inside the forward: the run before the first view must be seeded as the check's runs are."""

    def forward(self, x):
        return x + torch.rand_like(x)


def test_auto_runs_the_graph_once_before_the_first_view():
    CALLS.clear()
    session = fxviz.Session(Counted(), torch.randn(2, 4))
    assert session.capture.method == "symbolic"
    assert CALLS == [(2, 3)]  # the run that proved the capture is step 0's annotated run
    graph = session.current.graph
    node = next(n for n, a in graph.nodes(data=True) if "counted" in a["target"])
    assert graph.nodes[node]["shape"] == (2, 3)
    assert graph.nodes["lin"]["flops"] == 2 * 2 * 4 * 3
    assert session.capture.first_run is None  # handed to the step, not kept twice
    assert session.current.check.status == "match"


def test_the_reused_run_is_seeded_as_the_check():
    session = fxviz.Session(Noisy(), torch.randn(3, 5))
    assert session.capture.method == "symbolic"
    check = session.current.check
    assert (check.status, check.n_inputs) == ("match", 3), check.message


def test_capture_keeps_the_annotated_run_that_proved_its_graph():
    class Project(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(3, 3))

        def forward(self, x):
            return x @ self.w

    capture = fxviz.capture.capture(Project(), torch.randn(2, 3))
    assert capture.method == "symbolic" and capture.first_run is not None
    outputs, notes = capture.first_run
    assert outputs.shape == (2, 3) and notes["matmul"]["flops"] == 2 * 2 * 3 * 3


def test_an_exported_program_makes_its_reference_only_for_the_check(monkeypatch):
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)).eval()
    x = torch.randn(3, 4)
    ep = torch.export.export(model, (x,))
    made = []
    module = type(ep).module
    monkeypatch.setattr(type(ep), "module", lambda self, *a, **k: made.append(1) or module(self, *a, **k))
    session = fxviz.Session(ep, (x,))
    assert fxviz.to_svg(session.current.graph).startswith("<svg")
    assert len(made) == 1 and session.real_tensors  # the step's graph only
    check = session.current.check
    assert (check.status, check.n_inputs, len(made)) == ("match", 3, 2), check.message


def test_an_exported_program_on_the_meta_device_is_not_checked_without_making_its_reference(monkeypatch):
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).to("meta").eval()
    x = torch.randn(2, 4, device="meta")
    ep = torch.export.export(model, (x,))
    made = []
    module = type(ep).module
    monkeypatch.setattr(type(ep), "module", lambda self, *a, **k: made.append(1) or module(self, *a, **k))
    session = fxviz.Session(ep, (x,))
    assert not session.real_tensors
    assert session.current.check.status == "not checked"
    assert len(made) == 1


def test_import_fxviz_leaves_pandas_and_matplotlib_until_a_part_that_needs_them_is_read():
    code = ("import sys, fxviz, fxviz.render; heavy = ('pandas', 'matplotlib'); "
            "print(sorted(m for m in heavy if m in sys.modules)); "
            "print(fxviz.compare.__module__, 'pandas' in sys.modules, 'compare' in dir(fxviz))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["[]", "fxviz.comparison True True"]


def test_a_name_fxviz_does_not_have_is_an_attribute_error_that_says_so():
    assert not hasattr(fxviz, "no_such_thing")
    with pytest.raises(fxviz.NoSuchAttribute, match="no attribute 'no_such_thing'"):
        fxviz.no_such_thing

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
    assert not made and session.real_tensors  # the step's graph is unlifted without ep.module()
    check = session.current.check
    assert (check.status, check.n_inputs, len(made)) == ("match", 3, 1), check.message


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
    assert not made


def test_import_fxviz_leaves_pandas_and_matplotlib_until_a_part_that_needs_them_is_read():
    code = ("import sys, fxviz, fxviz.draw.render; heavy = ('pandas', 'matplotlib'); "
            "print(sorted(m for m in heavy if m in sys.modules)); "
            "print(fxviz.compare.__module__, 'pandas' in sys.modules, 'compare' in dir(fxviz))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["[]", "fxviz.diff.comparison True True"]


def test_a_name_fxviz_does_not_have_is_an_attribute_error_that_says_so():
    assert not hasattr(fxviz, "no_such_thing")
    with pytest.raises(fxviz.NoSuchAttribute, match="no attribute 'no_such_thing'"):
        fxviz.no_such_thing


@torch.library.custom_op("fxviz_first_view::counted_scale", mutates_args=())
def counted_scale(x: torch.Tensor) -> torch.Tensor:
    """Counts the runs that reach real tensors; its fake kernel (shapes only) does not."""
    CALLS.append(tuple(x.shape))
    return x * 2


@counted_scale.register_fake
def _(x):
    return torch.empty_like(x)


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return counted_scale(self.lin(x)).relu()


def test_an_exported_program_is_drawn_from_its_shapes_without_running_it_or_making_code(monkeypatch):
    x = torch.randn(2, 4)
    ep = torch.export.export(Scaled().eval(), (x,))
    CALLS.clear()
    made = []
    python_code = torch.fx.Graph.python_code
    monkeypatch.setattr(torch.fx.Graph, "python_code", lambda self, *a, **k: made.append(1) or python_code(self, *a, **k))
    session = fxviz.Session(ep, (x,))
    svg = fxviz.to_svg(session.current.graph)
    assert svg.startswith("<svg") and CALLS == [] and made == []  # not run, no code generated
    graph = session.current.graph
    linear = next(n for n, a in graph.nodes(data=True) if "linear" in a["target"])
    assert graph.nodes[linear]["shape"] == (2, 3) and graph.nodes[linear]["flops"] == 2 * 2 * 4 * 3
    check = session.current.check  # the check runs the graph, on the example too
    assert (check.status, check.n_inputs) == ("match", 3), check.message
    assert CALLS.count((2, 3)) == 6  # the program's and the graph's outputs on 3 inputs


def test_notes_read_from_shapes_are_those_of_the_run():
    from fxviz.annotation.known_shapes import known_notes
    from fxviz.annotation.shapes import annotated_run

    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(144, 5)).eval()
    x = torch.randn(2, 3, 8, 8)
    gm = fxviz.trace(torch.export.export(model, (x,)))
    known, (_, ran) = known_notes(gm, (x,)), annotated_run(gm, (x,))
    assert known.keys() == ran.keys()
    for name, note in ran.items():
        assert {k: known[name].get(k) for k in ("flops", "macs", "bytes")} == \
               {k: note.get(k) for k in ("flops", "macs", "bytes")}, name
        shapes = [getattr(n.get("tensor_meta"), "shape", None) for n in (known[name], note)]
        assert shapes[0] == shapes[1], name
    assert known_notes(gm, (torch.randn(3, 3, 8, 8),)) is None  # other shapes than noted: run it


def test_a_program_that_writes_a_buffer_back_is_unlifted_by_torch():
    from fxviz._torch_internals.unlift import unlifted

    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).train()
    x = torch.randn(3, 4)
    ep = torch.export.export(model, (x,)).run_decompositions()  # running stats: outputs written back
    assert unlifted(ep) is None
    assert fxviz.Session(ep, (x,)).current.check.status in ("match", "expected to differ")


def test_unlifted_program_is_the_graph_and_weights_of_ep_module():
    from fxviz._torch_internals.unlift import unlifted

    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU()).eval()
    x = torch.randn(3, 4)
    ep = torch.export.export(model, (x,))
    ours, torchs = unlifted(ep), ep.module()
    nodes = [(n.op, n.name, n.target) for n in torchs.graph.nodes if n.target != "_guards_fn"]
    assert [(n.op, n.name, n.target) for n in ours.graph.nodes] == nodes
    assert dict(ours.named_parameters()).keys() == dict(torchs.named_parameters()).keys()
    assert dict(ours.named_buffers()).keys() == dict(torchs.named_buffers()).keys()
    torch.testing.assert_close(ours(x), model(x))
    assert ours.graph is not ep.graph and len(ep.graph.find_nodes(op="get_attr")) == 0  # the program untouched


def test_symbolic_tracing_finds_weights_in_its_table_as_torch_finds_them():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(5, 4)
            self.head = nn.Linear(4, 5, bias=False)
            self.head.weight = self.embed.weight  # one tensor, two names: the first is kept
            self.register_buffer("scale", torch.tensor(2.0))
            self.norm = nn.LayerNorm(4)

        def forward(self, ids):
            h = self.norm(self.embed(ids)) * self.scale
            return self.head(h) + self.head.weight.sum() + self.scale

    model = Tied()
    ours = fxviz.trace(model, torch.tensor([[1, 2]]), tracer="symbolic")
    torchs = torch.fx.symbolic_trace(model)
    assert [(n.op, str(n.target)) for n in ours.graph.nodes] == [(n.op, str(n.target)) for n in torchs.graph.nodes]
    assert {n.target for n in ours.graph.find_nodes(op="get_attr")} == {"embed.weight", "scale"}


def test_auto_ending_at_export_draws_from_shapes_without_running():
    class Branchy(Scaled):
        def forward(self, x):
            if x.shape[0] != 2:  # fine for export, not for symbolic tracing
                raise ValueError("batch of 2 expected")
            return super().forward(x)

    CALLS.clear()
    session = fxviz.Session(Branchy().eval(), torch.randn(2, 4))
    assert session.capture.method == "export" and session.capture.attempts[0][0] == "symbolic"
    assert fxviz.to_svg(session.current.graph).startswith("<svg") and CALLS == []
    assert session.current.check.status == "match" and len(CALLS) == 6


def test_the_report_of_a_fresh_program_session_runs_nothing_and_says_not_checked_yet(tmp_path):
    x = torch.randn(2, 4)
    session = fxviz.Session(torch.export.export(Scaled().eval(), (x,)), (x,))
    CALLS.clear()
    page = session.to_html(tmp_path / "r.html").read_text(encoding="utf-8")
    assert CALLS == [] and "not checked yet" in page and not session.current.check_done
    session.to_html(tmp_path / "checked.html", check=True)
    assert session.current.check_done and len(CALLS) == 6


class Quoted(nn.Module):
    """A submodule whose name torch.fx cannot write in code ('getattr(self, "c"d]")')."""

    def __init__(self):
        super().__init__()
        self.add_module('c"d]', nn.Linear(2, 2))

    def forward(self, x):
        return getattr(self, 'c"d]')(x).relu()


def test_a_symbolic_graph_makes_its_code_on_first_use_unless_torch_cannot_write_it():
    session = fxviz.Session(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), (torch.randn(1, 2),))
    gm = session.current.gm
    assert fxviz.capture.graph_info(gm).tracer.endswith("Tracer")  # symbolic
    assert "_code" not in gm.__dict__  # the first view ran it node by node, no code made
    assert "getattr(self, \"1\")" in gm.code and gm(torch.ones(1, 2)).shape == (1, 2)
    quoted = fxviz.Session(Quoted(), (torch.randn(1, 2),)).current.gm  # made now: its failure lets auto go on
    attempts = dict(fxviz.capture.graph_info(quoted).attempts)
    assert "cannot generate Python code" in attempts["symbolic"] and "rename it" in attempts["symbolic"]
    assert fxviz.capture.graph_info(quoted).tracer == "export"


def test_a_buffer_passed_as_an_argument_is_the_get_attr_torch_makes():
    class Norm(nn.Module):  # as timm's BatchNormAct2d: its buffers handed to F.batch_norm
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(3)
            self.register_buffer("shared", self.bn.running_mean)  # one tensor, two names: torch's first wins

        def forward(self, x):
            return nn.functional.batch_norm(x, self.bn.running_mean, self.bn.running_var, self.bn.weight,
                                            self.bn.bias, False) + torch.ones(3)

    model = Norm().eval()
    ours, torchs = fxviz.trace(model, tracer="symbolic").graph, torch.fx.symbolic_trace(model).graph
    assert [(n.op, n.target) for n in ours.nodes] == [(n.op, n.target) for n in torchs.nodes]
    assert ("get_attr", "shared") in [(n.op, n.target) for n in ours.nodes]  # the root's own name comes first

"""CompileExplorer: torch.compile's graphs listed, the chosen one in the Explorer."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import fxviz
from fxviz.widgets import Explorer, explore
from fxviz.widgets.compile_view import CompileExplorer
from fxviz.widgets.panel_code import user_place
from test_compiled import BREAK_LINE, Branchy


class Nasty(nn.Module):
    """A graph break whose message carries user text meant to be markup."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        x = self.lin(x)
        print("<script>alert(1)</script>")  # a graph break: dynamo cannot trace print
        return x + 1


@pytest.fixture
def view():
    widget = explore(Branchy(), torch.randn(2, 3), tracer="dynamo", profile="off")
    yield widget
    widget.close()


def test_explore_with_dynamo_lists_every_graph_and_part(view):
    assert isinstance(view, CompileExplorer) and isinstance(view.explorer, Explorer)
    # dynamo asked for by name: no why, only which graph is shown (a tie: the first)
    assert "Shown first: graph 1 of 2 (listed as graph 0), the earliest of the 2 largest" in view.why.value
    assert "opened as" not in view.why.value and view.current == (0, "dynamo")
    rows = view.listing.children
    assert len(rows) == 2
    labels = [[b.description for b in row.children if hasattr(b, "on_click")] for row in rows]
    nodes = view.compiled.table().set_index(["graph", "part"])["nodes"]
    assert labels[0] == [f"{p} · {nodes[(0, p)]} nodes" for p in ("dynamo", "forward", "backward")]
    ends = [row.children[-1].value for row in rows]
    assert "Data-dependent branching" in ends[0] and f"test_compiled.py:{BREAK_LINE}" in ends[0]
    assert "end of the model" in ends[1]
    assert view.hint.value == ""  # every AOT graph is there: nothing to explain


def test_choosing_a_graph_opens_its_session_and_marks_it(view):
    first = view.explorer
    view._buttons[(1, "backward")].click()
    assert view.current == (1, "backward")
    assert view.explorer is not first and view.explorer.session is view.compiled.session(1, "backward")
    assert "graph 1 · backward" in view.explorer.title.value
    assert "fxviz-compile-current" in view._buttons[(1, "backward")]._dom_classes
    assert "fxviz-compile-current" not in view._buttons[(0, "dynamo")]._dom_classes
    assert "graph break" not in view.info.value  # graph 1 ends with the model
    assert "guards" in view.info.value


def test_a_graphs_steps_survive_switching_away_and_back(view):
    view.show(0, "forward")
    session = view.explorer.session
    session.apply("run_decompositions")  # AOT's graphs are ATen: they lower to core ATen
    view.show(1)
    view.show(0, "forward")
    assert view.explorer.session is session and session.index == 1
    assert "step 1 of 1" in view.explorer.step_label.value


def test_the_chosen_graph_shows_its_break_in_full_and_its_guards(view):
    info = view.info.value
    assert "graph 0 ends with a graph break: Data-dependent branching" in info
    assert "torch.cond" in info  # dynamo's hint
    assert "TENSOR_MATCH" in info


def test_user_text_in_break_messages_is_escaped():
    widget = CompileExplorer(fxviz.compiled(Nasty(), torch.randn(2, 3)), profile="off")
    try:
        html = widget.info.value + "".join(row.children[-1].value for row in widget.listing.children)
        assert "<script>" not in html and "&lt;script&gt;" in html
    finally:
        widget.close()


def test_auto_falling_back_to_dynamo_shows_the_list_over_the_first_graph():
    widget = explore(Branchy(), torch.randn(2, 3), profile="off")
    try:
        assert isinstance(widget, CompileExplorer)
        # AOT's forward graphs too (its inference trace adds about a quarter); no backward was run
        assert widget.compiled.views() == [(0, "dynamo"), (0, "forward"), (1, "dynamo"), (1, "forward")]
        assert widget.explorer.session.capture.method == "dynamo"
        assert "No AOT backward graphs" in widget.hint.value and "fxviz.compiled(model, x)" in widget.hint.value
        # why one graph was not possible: each method's stop, with the model's line
        why = widget.why.value
        assert "Branchy opened as 2 graphs, cut where dynamo broke (the first: Data-dependent branching" in why
        assert f"test_compiled.py:{BREAK_LINE}" in why and "- make_fx: make_fx could not trace Branchy" in why
        assert "What to do:" in why and "Branchy opened as 2 graphs" in widget._repr_mimebundle_()["text/html"]
        widget.show(1, "forward")
        forward = widget.explorer.session
        assert forward.current.check.status == "match"
        assert {forward.current.graph.nodes[n]["target"] for n in forward.current.graph} >= {"out.weight", "out.bias"}
    finally:
        widget.close()


def test_the_note_on_why_several_graphs_escapes_the_models_code():
    class Marked(nn.Module):
        def forward(self, x):
            if x.sum() > 0: return x * 2  # <b>branch</b>
            return x - 1

    widget = explore(Marked(), torch.randn(2, 3), profile="off")
    try:
        assert "&lt;b&gt;branch&lt;/b&gt;" in widget.why.value and "<b>branch" not in widget.why.value
    finally:
        widget.close()


def test_a_step_dynamo_captures_up_to_its_gradients_opens_the_list_with_the_note():
    """One dynamo graph that ends at a break (torch.autograd.grad runs outside it) is no
    whole capture either: the list and the note, not a plain Explorer that looks complete."""
    net = nn.Linear(3, 3)

    def train_step(x):
        h = net(x)
        if not torch.compiler.is_dynamo_compiling() and h.sum() > 0:  # a value check only dynamo skips
            h = h * 1
        loss = h.pow(2).mean()
        return loss, torch.autograd.grad(loss, list(net.parameters()))

    widget = explore(train_step, torch.randn(2, 3), profile="off")
    try:
        assert isinstance(widget, CompileExplorer) and len(widget.compiled.graphs) == 1
        note = widget.explorer.session.capture.note
        assert note.startswith("train_step opened as 1 graph, cut where dynamo broke "
                               "(the first: using `torch.autograd.grad`")
        assert "- make_fx: make_fx could not trace train_step at" in note and "is_dynamo_compiling()" in note
        assert "train_step opened as 1 graph" in widget.why.value
    finally:
        widget.close()


def test_a_graph_aot_cannot_trace_keeps_its_dynamo_graph_and_says_why(monkeypatch):
    from fxviz._torch_internals import dynamo as api

    def failing(forward, backward):
        def backend(gm, example_inputs):
            raise RuntimeError("<b>no AOT</b> for this graph")
        return backend

    monkeypatch.setattr(api, "aot_backend", failing)
    view = CompileExplorer(fxviz.compiled(Branchy(), torch.randn(2, 3)), profile="off")
    try:
        assert view.compiled.views() == [(0, "dynamo"), (1, "dynamo")]
        assert "graph 0: AOT could not trace it (RuntimeError: &lt;b&gt;no AOT&lt;/b&gt;" in view.hint.value
        assert view.explorer.session.current.check.status == "match"
    finally:
        view.close()


def test_a_single_graph_model_opens_the_plain_explorer():
    widget = explore(nn.Linear(3, 3), torch.randn(2, 3), profile="off")
    try:
        assert type(widget) is Explorer
    finally:
        widget.close()


def test_dynamo_explore_rejects_symbolic_only_options():
    with pytest.raises(fxviz.TraceError, match="takes n_random_inputs and backward, not leaf_modules"):
        explore(Branchy(), torch.randn(2, 3), tracer="dynamo", leaf_modules=["lin"])


def test_user_place_names_a_file_by_its_name_and_line():
    assert user_place("/home/me/models/net.py:12") == "net.py:12"
    assert user_place(None) == ""


def test_a_saved_notebook_shows_the_list_and_the_shown_graph(view):
    bundle = view._repr_mimebundle_()
    page = bundle["text/html"]
    assert "graph 0 (dynamo, forward, backward)" in page and "Data-dependent branching" in page
    assert "<svg" in page  # the shown graph, drawn


def test_lifted_parameters_and_buffers_are_named_as_the_model_names_them():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    view = CompileExplorer(fxviz.compiled(model, torch.randn(5, 3)), profile="off")
    try:
        for part, node in (("dynamo", "l_fn_modules_0_parameters_weight_"), ("forward", "primals_1")):
            view.show(0, part)
            ex = view.explorer
            assert ex.graph.nodes[node]["target"] == "0.weight"  # what search matches and the table lists
            row = next(r for r in ex.table.rows if r["name"] == node)
            assert row["target"] == "0.weight" and row["module_path"] == "0"
            ex.graph.show_weights = True  # the Weights button: parameters drawn as nodes
            svg = ex.graph.svg
            assert ">0.weight<" in svg and ">1.running_mean<" in svg and f">{node}<" not in svg
            ex.select(node)
            assert "<td>0.weight</td>" in ex.details.body.value
        view.show(0, "dynamo")
        # named after Sequential.forward's parameter (input: a builtin's name, which FX numbers)
        plain = next(n for n, rec in view.explorer.graph.nodes.items() if rec["target"].startswith("input_"))
        assert f">{plain}<" in view.explorer.graph.svg  # a plain input keeps its node name
    finally:
        view.close()

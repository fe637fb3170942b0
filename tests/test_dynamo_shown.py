"""Which of dynamo's graphs opens first: the largest (where the layers are), not graph 0
when graph 0 is setup; the Session, its check and the compile view say which, and every
other graph stays reachable."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import fxviz
from fxviz.capture import graph_info
from fxviz.capture.shown import graph_size, shown_graph, shown_note
from fxviz.session import Session
from fxviz.widgets import explore
from fxviz.widgets.compile_view import CompileExplorer


class MaskFirst(nn.Module):
    """Graph 0 builds a mask (no parameter, as a Hugging Face model's mask creation); a
    branch on its value breaks the graph; graph 1 runs the conv and the linear layer."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.lin = nn.Linear(4, 2)

    def forward(self, x):
        width = x.shape[-1]
        mask = (torch.arange(width) < width - 1).float()
        if mask.sum() > 0:  # data-dependent: a graph break
            x = x * mask
        return self.lin(self.conv(x).relu().mean((2, 3)))


class LayersFirst(nn.Module):
    """The layers in graph 0, a little arithmetic after the break."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.lin = nn.Linear(4, 2)

    def forward(self, x):
        y = self.lin(self.conv(x).relu().mean((2, 3)))
        if y.sum() > 0:  # data-dependent: a graph break
            return y + 1
        return y - 1


X = torch.randn(1, 3, 6, 6)


@pytest.fixture(scope="module")
def mask_first():
    torch.manual_seed(0)
    session = Session(MaskFirst(), X)
    assert session.capture.method == "dynamo" and len(session.capture.graphs) == 2
    return session


def test_the_session_opens_the_graph_with_the_layers_not_the_mask_plumbing(mask_first):
    sizes = [graph_size(gm) for gm in mask_first.capture.graphs]
    assert sizes[0][0] == 0 and sizes[1][0] == 4  # conv and linear: weight and bias each
    assert mask_first.capture.shown == 1 and graph_info(mask_first.current.gm).graph_index == 1
    assert {n.meta.get("qualified_name") for n in mask_first.current.gm.graph.find_nodes(op="placeholder")} >= {
        "conv.weight", "lin.weight"}
    note = mask_first.capture.note
    assert note.startswith("MaskFirst opened as 2 graphs")  # why several graphs, then which is shown
    assert ("Shown first: graph 2 of 2 (listed as graph 1), the largest: it reads 4 of the model's parameters "
            f"and runs {sizes[1][1]} operations.") in note and ".session(i)" in note


def test_its_check_names_the_graph_shown(mask_first):
    check = mask_first.current.check
    assert check.status == "match" and check.summary == "match · graph 2 of 2 checked"
    assert "ran this one alone (listed as graph 1)" in check.message


def test_check_all_graphs_keeps_the_shown_sessions_check_at_its_own_place(mask_first):
    results = mask_first.check_all_graphs()
    assert [r.scope for r in results] == ["graph 1 of 2 checked", "graph 2 of 2 checked"]
    assert results[1] is mask_first.current.check and results[0].status == "match"


def test_the_compile_view_opens_the_shown_graph_and_the_first_stays_reachable(mask_first):
    widget = explore(mask_first, profile="off")
    try:
        assert isinstance(widget, CompileExplorer) and widget.current == (1, "dynamo")
        assert widget.explorer.session is mask_first  # the Session itself, its steps kept
        assert "fxviz-compile-current" in widget._buttons[(1, "dynamo")]._dom_classes
        assert "Shown first: graph 2 of 2 (listed as graph 1)" in widget.why.value
        assert "graph 1 · dynamo" in widget.explorer.title.value
        widget._buttons[(0, "dynamo")].click()
        assert widget.current == (0, "dynamo")
        assert graph_info(widget.explorer.session.current.gm).graph_index == 0
        assert widget.explorer.session.current.check.scope == "graph 1 of 2 checked"
    finally:
        widget.close()


def test_compiled_and_its_view_open_the_largest_graph_unless_asked():
    compiled = fxviz.compiled(MaskFirst(), X)
    assert compiled.shown == 1 and compiled.session(0).current.check.status == "match"
    assert compiled.session() is compiled.session(1)  # unasked, the graph shown
    assert graph_info(compiled.session().current.gm).graph_index == 1
    assert "Shown first: graph 2 of 2 (listed as graph 1)" in compiled.capture.note
    widget = CompileExplorer(compiled, profile="off")
    asked = CompileExplorer(compiled, index=0, profile="off")
    try:
        assert widget.current == (1, "dynamo") and asked.current == (0, "dynamo")
    finally:
        widget.close()
        asked.close()


def test_a_model_whose_graph_0_is_the_largest_still_opens_graph_0():
    torch.manual_seed(0)
    session = Session(LayersFirst(), X)
    assert session.capture.method == "dynamo" and len(session.capture.graphs) == 2
    assert session.capture.shown == 0 and graph_info(session.current.gm).graph_index == 0
    assert "Shown first: graph 1 of 2 (listed as graph 0), the largest: it reads 4" in session.capture.note
    assert session.current.check.summary == "match · graph 1 of 2 checked"


def test_a_tie_opens_the_earliest_and_one_graph_needs_no_word():
    def twin():
        return torch.fx.symbolic_trace(nn.Sequential(nn.Linear(2, 2), nn.ReLU()))

    graphs = [torch.fx.symbolic_trace(nn.ReLU()), twin(), twin()]
    assert [graph_size(gm) for gm in graphs] == [(0, 1), (2, 2), (2, 2)]
    assert shown_graph(graphs) == 1
    assert "graph 2 of 3 (listed as graph 1), the earliest of the 2 largest" in shown_note(graphs, 1)
    assert shown_note(graphs[:1], 0) == ""

"""The capture's typed record of each graph (fxviz.capture.GraphInfo): made by every front-end,
read with defaults where absent, never written onto a user's own GraphModule, copied with the graph."""
import copy

import pytest
import torch
from torch import nn

import fxviz
from fxviz import _cow
from fxviz.capture import GraphInfo, capture, graph_info


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()


@pytest.mark.parametrize("tracer", ["symbolic", "export", "make_fx"])
def test_every_front_end_records_its_method_and_module_types(tracer):
    captured = capture(nn.Sequential(Block()), torch.randn(2, 4), tracer=tracer)
    info = graph_info(captured.gm)
    assert isinstance(info, GraphInfo)
    assert info.module_types["0"] == "Block" and info.module_types["0.lin"] == "Linear"
    assert info.tracer == {"symbolic": "FxVizTracer"}.get(tracer, tracer)  # symbolic tracing: its Tracer class
    assert info.graph_count == 1 and info.graph_inputs is None


def test_a_users_graph_module_reads_defaults_and_is_not_written():
    gm = torch.fx.symbolic_trace(Block())
    gm.meta.clear()
    info = graph_info(gm)
    assert info == GraphInfo() and info.real_tensors is None
    info.module_types["x"] = "Changed"  # a default, not stored: the next read is fresh
    assert graph_info(gm).module_types == {} and gm.meta == {}


def test_the_record_follows_deepcopy_and_fork_and_a_session_fills_in_real_tensors():
    session = fxviz.Session(nn.Sequential(Block()), torch.randn(2, 4), tracer="export")
    gm = session.current.gm
    assert graph_info(gm).real_tensors is True
    copied = copy.deepcopy(gm)
    assert graph_info(copied) == graph_info(gm) and graph_info(copied) is not graph_info(gm)
    assert graph_info(_cow.fork(gm)).module_types["0"] == "Block"


def test_dynamo_graphs_record_their_place_inputs_and_aot_parts():
    def step(x):
        y = x.sin()
        if y.sum() > 0:  # a graph break: two graphs
            return y.cos()
        return y

    captured = capture(step, torch.ones(3), tracer="dynamo")
    infos = [graph_info(gm) for gm in captured.graphs]
    assert [(i.graph_index, i.graph_count) for i in infos] == [(0, 2), (1, 2)]
    assert all(isinstance(i.graph_inputs, tuple) and i.aot_forward is not None for i in infos)
    assert infos[0].graph_break is not None and infos[0].graph_breaks == captured.graph_breaks

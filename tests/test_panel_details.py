"""The Details tab with no node selected: the whole graph, and how it was captured."""
from __future__ import annotations

import html
import re

import torch
from torch import nn

from fxviz.widgets import explore

SCRIPT = "<script>alert(1)</script>"


def text(markup):
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.relu = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


def by_shape(self, x):
    """Branches on a shape: symbolic tracing cannot, torch.export can."""
    x = self.lin(x)
    return x.relu() if x.shape[0] > 1 else x


def test_the_whole_graph_its_ops_flops_and_capture_until_a_node_is_selected():
    torch.manual_seed(0)
    explorer = explore(ConvBN().eval(), torch.randn(1, 3, 6, 6), profile="off")
    shown = text(explorer.details.body.value)
    graph = explorer.session.current.graph
    flops = sum(a["flops"] for _, a in graph.nodes(data=True) if a["flops"] is not None)
    assert flops > 0 and f"FLOPs {flops:,} (counted for 1 of 3 calls)" in " ".join(shown.split())
    assert "5: placeholder 1 · call_module 3 · output 1" in shown
    assert "torch.fx symbolic tracing" in shown and "tracer=\"auto\" tried" not in shown

    explorer.graph.selected = "bn"
    assert "BatchNorm2d" in explorer.details.body.value and "whole graph" not in explorer.details.body.value
    explorer.passes.select.value = "fuse_conv_bn"
    explorer.passes.apply.click()
    explorer.graph.selected = ""
    assert "4: placeholder 1 · call_module 2 · output 1" in text(explorer.details.body.value)  # the new step's
    explorer.undo_button.click()
    assert "call_module 3" in text(explorer.details.body.value)
    explorer.close()


def test_why_auto_passed_over_a_method_is_shown_and_escaped():
    model = type(SCRIPT, (nn.Module,), {"forward": by_shape})()
    model.lin = nn.Linear(3, 3)
    explorer = explore(model, torch.randn(2, 3), profile="off")
    shown = text(explorer.details.body.value)
    assert explorer.session.capture.method == "export"
    assert "torch.export (non-strict): the ATen operators the forward ran" in shown
    assert "Before export, tracer=\"auto\" tried:" in shown
    assert "symbolic :" in shown and "control flow" in shown and SCRIPT in shown  # the model's name, as text
    assert SCRIPT not in explorer.details.body.value  # never as markup
    assert text(explorer.title.value).strip() == SCRIPT and SCRIPT not in explorer.title.value  # the model's, not "GraphModule"
    explorer.close()


class ChecksValuesUnlessTraced(nn.Module):
    """Hugging Face's masks in small: a check of the values, skipped on fake tensors."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        if not isinstance(x, torch._subclasses.FakeTensor) and (x > -1e9).all():
            x = x * 1
        return self.lin(x)


def test_a_graph_traced_on_fake_tensors_says_so_and_where_the_real_trace_stopped():
    explorer = explore(ChecksValuesUnlessTraced(), torch.randn(2, 3), tracer="make_fx", profile="off")
    shown = " ".join(text(explorer.details.body.value).split())
    assert "traced on fake tensors: on the real ones the trace stopped reading a tensor's value" in shown
    assert "(x > -1e9).all()" in shown and "test_panel_details.py" in shown
    explorer.close()


def test_flops_never_counted_are_not_shown_as_zero():
    from fxviz import Session
    from fxviz.present.overview import graph_overview

    rows = dict(graph_overview(Session(nn.ReLU(), torch.randn(3)).current.graph)["rows"])
    assert rows["FLOPs"] == "— (no FLOP formula for any of its 1 calls)" and "captured by" not in rows


def test_symbolic_sizes_draw_and_sum_as_expressions():
    """Fake inputs with a dynamic size (a ShapeEnv): shapes and FLOPs are expressions of it."""
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    from fxviz.annotation.graph import to_networkx
    from fxviz.present.overview import graph_overview
    from fxviz.annotation.shapes import annotated_run

    gm = torch.fx.symbolic_trace(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
    mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
    x = mode.from_tensor(torch.randn(3, 4), source=ConstantSource("x"), symbolic_context=StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC]))
    with mode:
        _, notes = annotated_run(gm, (x,))
    graph = to_networkx(gm, notes)  # raised "unhashable type: non-nested SymInt"
    size = str(x.shape[0])
    assert str(graph.nodes["_0"]["shape"][0]) == size
    assert dict(graph_overview(graph)["rows"])["FLOPs"] == f"32*{size} (counted for 1 of 2 calls)"

"""Memory per node from shapes alone (fxviz.checks.memory): known peaks, views, in-place ops, meta models."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import torchvision
from torch import nn

import fxviz
from fxviz.diff.comparison import compare
from fxviz.checks.memory import MAX_POINTS, binned, memory, plot_memory
from fxviz.draw.render import render


class Chain(nn.Module):
    def forward(self, x):
        a = torch.cat([x, x])  # 800 bytes, alive until cat_1
        b = a * 2  # 800
        return torch.cat([b, a]).view(-1, 2)  # 1600, its view no new memory


def annotated(model, x):
    gm = fxviz.annotate(fxviz.trace(model, x), (x,))
    return gm, fxviz.to_networkx(gm)


def test_a_hand_built_chain_has_its_known_peak():
    gm, graph = annotated(Chain(), torch.randn(100))
    rows = memory(graph, gm)
    assert list(rows["node"]) == ["x", "cat", "mul", "cat_1", "view", "output"]
    assert list(rows["output_bytes"]) == [0, 800, 800, 1600, 0, 0]
    assert list(rows["live_bytes"]) == [0, 800, 1600, 3200, 1600, 1600]
    assert rows.attrs["peak_bytes"] == 3200 and rows.attrs["peak_node"] == "cat_1"
    assert rows.attrs["input_bytes"] == 400 and rows.attrs["weight_bytes"] == 0 and rows.attrs["unknown"] == []


def test_resnet18_peak_lies_between_its_largest_activation_and_all_of_them():
    model = torchvision.models.resnet18(weights=None).eval()
    gm, graph = annotated(model, torch.randn(1, 3, 32, 32))
    rows = memory(graph, gm)
    assert rows["output_bytes"].max() < rows.attrs["peak_bytes"] < rows["output_bytes"].sum()
    assert rows.attrs["peak_bytes"] == rows["live_bytes"].max()
    assert rows.set_index("node").loc["relu", "output_bytes"] == 0  # ReLU(inplace=True) writes bn1's memory
    tensors = [*model.parameters(), *model.buffers()]
    assert rows.attrs["weight_bytes"] == sum(t.numel() * t.element_size() for t in tensors)
    # without the GraphModule a module's in-place flag is unknown: its output counted as new
    assert memory(graph).set_index("node").loc["relu", "output_bytes"] == 64 * 16 * 16 * 4


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 8, 3), nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.conv(x).relu(), 1))


def test_step_memory_needs_shapes_only_so_a_meta_model_answers_the_same():
    x = torch.randn(2, 3, 8, 8)
    real = fxviz.Session(Small().eval(), x).current.memory
    meta = fxviz.Session(Small().eval().to("meta"), x.to("meta")).current.memory
    assert real.equals(meta) and real.attrs == meta.attrs
    assert real.attrs["peak_node"] == "relu" and real.attrs["peak_bytes"] == 2 * 2 * 8 * 6 * 6 * 4


def test_memory_colour_mode_shows_bytes_alive():
    gm, graph = annotated(Chain(), torch.randn(100))
    drawn = render(graph, color_by="memory")
    assert drawn.legend[-1]["label"] == "memory 3.2 kB"  # in the units a person reads
    memory_view = next(view for view in fxviz.draw.colour_modes.views() if view["name"] == "memory")
    assert memory_view["unit"] == "bytes of activations alive as the node runs"


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8)

    def forward(self, x):  # 2x3x12x12 -> conv1, bn1: 6400 bytes each; conv2, bn2: 4096 each
        x = torch.relu_(self.bn1(self.conv1(x)))
        return self.bn2(self.conv2(x)).mean((2, 3))


def test_a_fusion_moves_the_peak_and_channels_last_keeps_it():
    x = torch.randn(2, 3, 12, 12)
    session = fxviz.Session(ConvBN().eval(), x)
    session.apply("fuse_conv_bn")
    moved = session.compare(0, 1).memory
    # before: conv1's output alive while bn1 writes its own (2 x 6400); after: bn1 is gone,
    # the peak is conv2's output beside its input (6400 + 4096)
    assert moved.loc["a", ["peak_bytes", "peak_node"]].tolist() == [12800, "bn1"]
    assert moved.loc["b", ["peak_bytes", "peak_node"]].tolist() == [10496, "conv2"]
    assert moved.attrs["ratio"] == pytest.approx(10496 / 12800) and moved.attrs["moved"]
    assert moved.loc["a", "measured_peak_bytes"] is None  # only on CUDA
    session.apply("channels_last")  # the same bytes in another layout
    kept = session.compare(1, 2).memory
    assert kept.loc["b", ["peak_bytes", "peak_node"]].tolist() == [10496, "conv2"]
    assert kept.attrs["ratio"] == 1 and not kept.attrs["moved"]


def test_a_comparison_of_plain_graphs_annotates_them_without_changing_them():
    x = torch.randn(2, 3, 12, 12)
    gm = fxviz.trace(ConvBN().eval(), x)
    steps = [SimpleNamespace(index=i, gm=gm, code=gm.code, example_inputs=(x,)) for i in (0, 1)]
    rows = compare(*steps).memory
    assert rows["peak_bytes"].tolist() == [12800, 12800] and rows.attrs["ratio"] == 1
    assert all("tensor_meta" not in node.meta for node in gm.graph.nodes)


def test_plot_memory_draws_bytes_alive_with_the_peak_at_its_node():
    x = torch.randn(2, 3, 12, 12)
    step = fxviz.Session(ConvBN().eval(), x).current
    rows = step.memory
    ax = plot_memory(step)
    activations, resident, peak = ax.lines
    assert ax.get_ylabel() == "bytes alive (kB)"  # the largest drawn, 12.8 kB + inputs and weights, is in kB
    assert list(activations.get_ydata()) == [live / 1e3 for live in rows["live_bytes"]]
    extra = rows.attrs["input_bytes"] + rows.attrs["weight_bytes"]
    assert extra == 2 * 3 * 12 * 12 * 4 + sum(t.numel() * 4 for t in ConvBN().state_dict().values()
                                              if t.is_floating_point()) + 2 * 8  # + the BatchNorms' int64 counters
    assert list(resident.get_ydata()) == [(live + extra) / 1e3 for live in rows["live_bytes"]]
    at = rows["node"].tolist().index("bn1")
    assert list(peak.get_xydata()[0]) == [at + 1, 12.8] and ax.texts[0].get_text() == "peak 12.8 kB at bn1"


def test_a_long_graph_is_charted_in_runs_that_keep_the_peak():
    live = np.arange(30_001, dtype=float) % 997
    live[12_345] = 5e6
    x, y = binned(live)
    assert len(x) == len(y) <= MAX_POINTS and y.max() == 5e6
    assert abs(x[np.argmax(y)] - 12_346) <= len(live) / MAX_POINTS  # drawn where it is (node 12,346)
    x, y = binned(live[:10])
    assert list(x) == list(range(1, 11)) and list(y) == list(live[:10])  # short: every node as it is
    rows = pd.DataFrame({"node": [f"n{i}" for i in range(len(live))], "live_bytes": live})
    rows.attrs.update(peak_bytes=5e6, peak_node="n12345", input_bytes=2e6, weight_bytes=0)
    ax = plot_memory(rows)
    activations, resident, peak = ax.lines
    assert ax.get_ylabel() == "bytes alive (MB)" and len(activations.get_xdata()) <= MAX_POINTS
    assert max(activations.get_ydata()) == 5 and max(resident.get_ydata()) == 7  # MB: the peak, + 2 MB of inputs
    assert list(peak.get_xydata()[0]) == [12_346, 5]  # the peak's own node, not its run's middle


class FunctionalInPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)

    def forward(self, x):
        return nn.functional.relu(self.bn(self.conv(x)), inplace=True)


def test_a_functional_in_place_call_makes_no_new_value():
    rows = fxviz.Session(FunctionalInPlace().eval(), torch.randn(2, 3, 12, 12)).current.memory
    assert rows.set_index("node").loc["relu", ["output_bytes", "live_bytes"]].tolist() == [0, 6400]
    assert rows.attrs["peak_bytes"] == 12800 and rows.attrs["peak_node"] == "bn"

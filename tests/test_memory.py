"""Memory per node from shapes alone (fxviz.memory): known peaks, views, in-place ops, meta models."""
import pytest
import torch
import torchvision
from torch import nn

import fxviz
from fxviz.memory import memory
from fxviz.render import render


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
    assert fxviz.colour_modes.views()[-1]["unit"] == "bytes of activations alive as the node runs"

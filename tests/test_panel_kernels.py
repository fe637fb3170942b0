"""The kernels panel on its own (no compile): which nodes it outlines in the graph as a
kernel is picked, a node is selected, or the colour mode changes. The panel inside the
compile view, on kernels inductor really made, is in test_kernels.py."""
from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch import nn

pytest.importorskip("ipywidgets")

from fxviz.widgets.panel_kernels import KernelsPanel  # noqa: E402 (after the skip)


class Net(nn.Module):
    def forward(self, x):
        return torch.relu(x * 2) + 1


def _kernel(name: str, kind: str, nodes: list[str], code: str) -> dict:
    return {"kernel": name, "kind": kind, "nodes": nodes, "modules": [], "code": code, "calls": 1,
            "time_us": 2.0, "share": 0.4, "also": [], "inferred": []}


KERNELS = pd.DataFrame([
    _kernel("cpp_fused_mul_relu_0", "cpp", ["mul", "relu"], "auto tmp1 = tmp0 * 2;\nauto tmp2 = max(tmp1, 0);\n"),
    _kernel("cpp_fused_add_1", "cpp", ["add"], "auto tmp1 = tmp0 + 1;\n"),
])


@pytest.fixture
def panel():
    """The panel with what it asked the Explorer to select and outline, in order."""
    selected: list[str] = []
    marks: list[list[str]] = []
    made = KernelsPanel(KERNELS, 5.0, torch.fx.symbolic_trace(Net()), selected.append, marks.append)
    yield made, selected, marks
    made.close()


def test_picking_a_kernel_selects_its_first_node_and_outlines_all_its_nodes(panel):
    made, selected, marks = panel
    made.table.selected = "cpp_fused_mul_relu_0"
    assert selected == ["mul"] and marks == [["mul", "relu"]]
    assert "cpp_fused_mul_relu_0" in made.about.value


def test_selecting_a_node_outlines_its_kernels_nodes_and_a_node_in_none_clears(panel):
    made, selected, marks = panel
    made.show_node("relu")
    assert marks == [["mul", "relu"]] and made.table.selected == "cpp_fused_mul_relu_0"
    assert selected == []  # following the Explorer's selection selects nothing back
    made.show_node("add")
    assert marks[-1] == ["add"]
    made.show_node("x")  # an input: no kernel
    assert marks[-1] == [] and "computed by no kernel" in made.about.value
    made.show_node("relu")
    made.show_node("")  # the selection cleared
    assert marks[-2:] == [["mul", "relu"], []]


def test_another_colour_mode_clears_the_outlines_the_kernel_mode_keeps_them(panel):
    made, _, marks = panel
    made.show_node("mul")
    made.show_mode("kernel")
    assert marks == [["mul", "relu"]]
    made.show_mode("time")
    assert marks == [["mul", "relu"], []]

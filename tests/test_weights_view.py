"""Weights in the Explorer: listed on the ops that read them (Details, table, tooltip
records), drawn as nodes only when the user asks (the toolbar's Weights button)."""
from __future__ import annotations

import html
import re

import torch
from torch import nn

from fxviz.widgets import explore


class Functional(nn.Module):
    """timm's norm layers: F.batch_norm reads its statistics as get_attr nodes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4).eval()

    def forward(self, x):
        bn = self.bn
        return nn.functional.batch_norm(self.conv(x), bn.running_mean, bn.running_var, bn.weight, bn.bias)


def drawn(explorer):
    return {e["name"] for e in explorer.graph.elements.values() if e["kind"] == "node"}


def test_weights_are_listed_on_their_op_and_the_weights_button_draws_them():
    explorer = explore(Functional().eval(), torch.randn(1, 3, 8, 8), profile="off")
    graph = explorer.session.current.graph
    weights = {n for n, a in graph.nodes(data=True) if a["weight"]}
    assert weights == {"bn_running_mean", "bn_running_var", "bn_weight", "bn_bias"}
    assert not weights & drawn(explorer) and "batch_norm" in drawn(explorer)

    explorer.select("batch_norm")
    details = html.unescape(re.sub(r"<[^>]+>", " ", explorer.details.body.value))
    assert "Weights it reads: 4 · 64 B" in details  # four float32 tensors of 4
    assert "bn.running_var" in details and "float32" in details
    row = next(r for r in explorer.table.rows if r["name"] == "batch_norm")
    assert row["weights"] == "bn.weight 4, bn.bias 4, bn.running_mean 4, bn.running_var 4"  # in graph order
    conv = next(r for r in explorer.table.rows if r["name"] == "conv")
    assert conv["weights"] == "conv.weight 4×3×3×3, conv.bias 4"  # a module call: its module's own
    assert explorer.graph.nodes.get("batch_norm")["weights"] == row["weights"]  # the tooltip's record

    # the table lists weights' rows only while the graph draws them (table_view.js hides rows by `hide`)
    assert explorer.table.hide == "weight"
    assert {r["name"] for r in explorer.table.rows if r["weight"]} == weights
    legend = lambda: {item["label"] for item in explorer.graph.legend}  # noqa: E731 - the kinds drawn
    assert "get_attr" not in legend() and "call_function" in legend()
    explorer.graph.show_weights = True  # what the button sends
    assert weights <= drawn(explorer) and explorer.table.hide == "" and "get_attr" in legend()
    explorer.graph.show_weights = False
    assert not weights & drawn(explorer) and explorer.table.hide == "weight"
    explorer.select("bn_running_var")  # selecting a weight (a table row) reveals the op reading it
    assert "batch_norm" in drawn(explorer)
    explorer.close()

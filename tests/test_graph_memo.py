"""Per-node data a drawing derives from its whole graph is kept per graph object while it
lives: two graphs drawn in turn each get their own colours and FLOPs, a graph drawn again
derives nothing again, and one changed in place and forgotten is drawn with its change."""
from __future__ import annotations

import re

import torch
from torch import nn

import fxviz
from fxviz.draw.colour_modes import OP_COLORS
from fxviz.annotation import graph_memo
from fxviz.draw.render import human_flops, render


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.act = nn.Linear(8, 8), nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())

    def forward(self, x):
        return self.blocks(x)


def _graph():
    torch.manual_seed(0)
    return fxviz.Session(Net(), (torch.randn(2, 8),)).current.graph


def _fill(rendering, name: str) -> str:
    return re.search(rf'id="fx-{name}" label=<.*?> fillcolor="(#\w+)"', rendering.dot.source).group(1)


def _collapsed_flops(rendering) -> str:
    return re.search(r"\d+ nodes · ([^·]+FLOPs) · ⊕", rendering.dot.source).group(1)


def _drawn(graph):
    """block 0 collapsed (its FLOPs summed), block 1 open (its nodes coloured by kind)."""
    return render(graph, collapse=["blocks.0"], expand=["blocks.1"])


def test_two_graphs_drawn_in_turn_each_get_their_own_colours_and_flops():
    first = _graph()
    second = first.copy()  # same names, own attribute dicts
    for _, attrs in second.nodes(data=True):
        attrs["op"] = "call_function" if attrs["op"] == "call_module" else attrs["op"]
        attrs["flops"] = None if attrs["flops"] is None else attrs["flops"] * 3
    assert first.nodes["blocks_1_fc"]["op"] == "call_module"
    block0 = [n for n, a in first.nodes(data=True) if (a["module_path"] or "").startswith("blocks.0")]
    flops = sum(first.nodes[n]["flops"] or 0 for n in block0)
    drawn = [_drawn(first), _drawn(second), _drawn(first)]
    assert [_fill(r, "blocks_1_fc") for r in drawn] == [OP_COLORS["call_module"], OP_COLORS["call_function"],
                                                        OP_COLORS["call_module"]]
    assert [_collapsed_flops(r) for r in drawn] == [human_flops(flops), human_flops(3 * flops), human_flops(flops)]
    assert "call_module" in {e["label"] for e in drawn[0].legend} - {e["label"] for e in drawn[1].legend}
    assert drawn[2].dot.source == drawn[0].dot.source


def test_a_graph_changed_in_place_and_forgotten_is_drawn_with_its_change():
    graph = _graph()
    before = _drawn(graph)
    graph.nodes["blocks_1_fc"]["op"] = "call_method"
    for node in graph:
        if graph.nodes[node]["flops"]:
            graph.nodes[node]["flops"] *= 2
    graph_memo.forget(graph)
    after = _drawn(graph)
    assert (_fill(before, "blocks_1_fc"), _fill(after, "blocks_1_fc")) == (OP_COLORS["call_module"],
                                                                            OP_COLORS["call_method"])
    assert _collapsed_flops(before) != _collapsed_flops(after)


def test_a_graph_drawn_again_derives_nothing_again_and_what_is_kept_goes_with_it():
    import gc
    import weakref

    graph, computed = _graph(), []
    ops = lambda g: computed.append(g) or {n: a["op"] for n, a in g.nodes(data=True)}  # noqa: E731
    first = graph_memo.derived(graph, "ops", ops)
    assert graph_memo.derived(graph, "ops", ops) is first and len(computed) == 1
    _drawn(graph)
    kept = dict(graph_memo._KEPT[graph])
    _drawn(graph)  # the second drawing finds every derived value kept, and adds none
    assert graph_memo._KEPT[graph] == kept and all(graph_memo._KEPT[graph][k] is v for k, v in kept.items())
    gone = weakref.ref(graph)
    del graph, computed, first, kept
    gc.collect()
    assert gone() is None  # the memo held it only weakly

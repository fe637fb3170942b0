"""The layout planner on graphs of any size: every level within the box budget, the
first view at the most detailed level that fits, identical runs and hairballs collapsed,
lowered and one-node modules drawn as plain nodes, hidden nodes revealed on request."""
import operator

import networkx as nx
import pytest
import torch
import torch.fx
from torch import nn

import fxviz
from fxviz.draw.layout_groups import MAX_ITEMS
from fxviz.draw.layout_plan import plan_layout
from fxviz.draw.layout_tree import build_tree
from fxviz.draw.render import render


def flat_graph(n_modules: int, n_loose: int) -> nx.DiGraph:
    """``n_modules`` sibling modules ``blocks.i`` of three ops each, then ``n_loose`` ops
    at the top level (like the backward half of a make_fx training step)."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["module_path"] = ""
    for i in range(n_modules):
        for _ in range(3):
            x = graph.call_function(torch.tanh, (x,))
            x.meta["module_path"] = f"blocks.{i}"
    for _ in range(n_loose):
        x = graph.call_function(torch.sigmoid, (x,))
        x.meta["module_path"] = ""
    graph.output(x).meta["module_path"] = None
    return fxviz.to_networkx(torch.fx.GraphModule(nn.Module(), graph))


def plan(graph, **options):
    return plan_layout(graph, **{"collapse": set(), "expand": set(), "auto": True, "max_nodes": 250,
                                 "long_edge": 40, **options})


def test_every_box_has_a_bounded_number_of_children_and_ranges_are_named():
    tree = build_tree(flat_graph(300, 5000))
    assert max(len(box.items) for box in tree.boxes.values()) <= MAX_ITEMS
    labels = {box.label for box in tree.boxes.values() if box.synthetic}
    assert "blocks 0–31" in labels  # a range of sibling modules
    assert any(label.startswith("nodes ") for label in labels)  # a segment of loose nodes


@pytest.mark.parametrize("max_nodes", [40, 250, 600])
def test_the_budget_is_reached_at_every_size(max_nodes):
    graph = flat_graph(300, 5000)
    drawn = plan(graph, max_nodes=max_nodes)
    assert drawn.drawn <= max_nodes
    assert drawn.drawn >= max_nodes // 3  # it opens what fits, not a handful of boxes
    members = sum(len(m) for m in drawn.members.values())
    assert members + sum(u[0] == "node" for u in drawn.unit_of.values()) == len(graph)


def test_expanding_a_range_shows_its_modules_and_a_node_name_reveals_it():
    graph = flat_graph(300, 0)
    first = plan(graph, max_nodes=20)
    (range_path,) = [p for p in first.collapsed if first.labels[p] == "blocks 0–31"]
    opened = plan(graph, max_nodes=20, expand=[range_path, *first.opened], collapse=first.collapsed - {range_path})
    assert {first.labels[range_path]} <= set(opened.labels.values())
    assert ("collapsed", "blocks.5") in [item for item in opened.children[range_path]]
    hidden = "tanh_700"  # inside blocks.233, collapsed in a closed range
    assert first.unit_of[hidden][0] == "collapsed"
    revealed = plan(graph, max_nodes=20, expand={hidden}, collapse=first.collapsed)
    assert revealed.unit_of[hidden] == ("node", hidden)


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.a, self.b = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x):
        return x + self.b(torch.relu(self.a(x))).sigmoid().tanh() * 2


def test_runs_of_identical_blocks_start_collapsed_and_different_ones_open():
    same = nn.Sequential(*[Block(8) for _ in range(4)])
    gm = fxviz.annotate(fxviz.trace(same), torch.randn(2, 8))
    assert set(render(gm).collapsed) == {"0", "1", "2", "3"}
    grow = nn.Sequential(Block(8), nn.Linear(8, 16), Block(16), nn.Linear(16, 4), Block(4))
    gm = fxviz.annotate(fxviz.trace(grow), torch.randn(2, 8))
    assert render(gm).collapsed == ()


class DenseLayer(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.linear = nn.Linear(width, 4)

    def forward(self, features):
        return torch.relu(self.linear(torch.cat(features, dim=1))).tanh()


class Dense(nn.Module):
    """Every layer reads all earlier outputs (torchvision's dense block)."""

    def __init__(self, n: int):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(4 * (i + 1)) for i in range(n))

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, dim=1)


def test_a_densely_connected_block_starts_collapsed():
    model = nn.Sequential(nn.Linear(4, 4), Dense(8), nn.Linear(36, 2))
    gm = fxviz.annotate(fxviz.trace(model), torch.randn(1, 4))
    rendering = render(gm)
    assert "1.layers" in rendering.collapsed  # its 8 layers joined by 28 edges
    assert rendering.box_count < 12


def test_lowered_and_one_node_modules_draw_no_cluster(resnet18):
    gm = fxviz.trace(resnet18, lower=[nn.ReLU])
    clusters = {e["name"] for e in render(gm).elements.values() if e["kind"] == "cluster"}
    assert {"layer1.0", "layer2.0.downsample"} <= clusters
    assert not [path for path in clusters if path.split(".")[-1] == "relu"]  # the stem's too


def test_parameters_lifted_to_inputs_leave_each_block_its_box():
    """dynamo and AOT make every parameter an input, first in the graph: far from its
    block's ops, which were all drawn in the parent."""
    class Blocks(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.LayerNorm(8)) for _ in range(4))

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    gm = fxviz.capture.capture(Blocks(), torch.randn(2, 8), tracer="dynamo").gm
    assert [n.meta["module_path"] for n in gm.graph.find_nodes(op="placeholder")][:2] == ["blocks.0.0"] * 2
    assert {f"blocks.{i}" for i in range(4)} <= set(build_tree(fxviz.to_networkx(gm)).boxes)


def test_a_flat_graph_of_100k_nodes_plans_within_budget():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    for _ in range(100_000):
        x = graph.call_function(operator.neg, (x,))
    graph.output(x)
    nxg = fxviz.to_networkx(torch.fx.GraphModule(nn.Module(), graph))
    drawn = plan(nxg)
    assert 200 <= drawn.box_count <= 250 + 8
    assert max(len(items) for items in drawn.children.values()) <= MAX_ITEMS


@pytest.mark.parametrize("n", [2066, 3100])
def test_a_long_run_whose_last_part_is_short_keeps_every_node_once(n):
    """A run of over 1,536 nodes in one box is grouped by 1,024; a last part of 2-32
    nodes once made one group with its own span, so the same path as the group around
    it: that group listed itself, its nodes vanished and planning never ended."""
    graph = flat_graph(0, n)
    tree = build_tree(graph)
    listed = [key for box in tree.boxes.values() for kind, key in box.items if kind == "node"]
    assert sorted(listed) == sorted(graph)
    for path, box in tree.boxes.items():
        assert path == "" or ("box", path) in tree.boxes[box.parent].items
        assert ("box", path) not in box.items
    drawn = plan(graph)
    members = sum(len(m) for m in drawn.members.values())
    assert members + sum(u[0] == "node" for u in drawn.unit_of.values()) == len(graph)


class _Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(*(nn.Linear(8, 8) if i % 2 == 0 else nn.ReLU() for i in range(8)))

    def forward(self, x, mask):
        return self.body(x * mask)


class _Decoder(nn.Module):
    """A mask made once and read by each of ``n`` identical layers (every one, or all but the last)."""

    def __init__(self, n: int, all_read: bool):
        super().__init__()
        self.layers = nn.ModuleList(_Layer() for _ in range(n))
        self.all_read = all_read

    def forward(self, x):
        mask = (x.sum(-1, keepdim=True) > 0).float()
        for i, layer in enumerate(self.layers):
            x = layer(x, mask if self.all_read or i < len(self.layers) - 1 else x)  # the same layer either way
        return x


def test_a_value_every_twin_reads_gets_one_edge_into_their_cluster():
    """24 edges from a mask to 24 collapsed layers crossed every other edge and cost dot
    most of the layout; one into the layers' cluster, labelled, says as much."""
    step = fxviz.Session(_Decoder(6, all_read=True), torch.randn(2, 8)).current  # shapes: twins are known
    gm, drawn = step.gm, plan(step.graph)
    [((tail, head), into)] = drawn.into.items()
    assert into == ("layers", 6) and head == ("collapsed", "layers.0")
    mask = next(n for n in gm.graph.nodes if n.target is operator.mul).args[1]
    assert drawn.unit_of[mask.name] == tail
    assert [h for t, h in drawn.edges if t == tail and h[0] == "collapsed" and h[1].startswith("layers")] == [head]
    drawing = render(step.graph)
    assert "lhead=cluster_" in drawing.dot.source and 'label="each of 6"' in drawing.dot.source
    assert ">each of 6</text>" in drawing.drawn().svg
    # one of the twins does not read it: each reader keeps its own edge
    partial = plan(fxviz.Session(_Decoder(6, all_read=False), torch.randn(2, 8)).current.graph)
    assert not partial.into and sum(1 for t, h in partial.edges if h[0] == "collapsed" and t == tail) == 5


def test_modules_between_long_stretches_of_plain_ops_stay_in_view_when_a_box_is_over_its_limit():
    """RT-DETR's top level (152 ops between 7 modules) drew as two "nodes" boxes holding
    its encoder and decoder: each stretch of ops is a segment of its own, each module a box."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["module_path"] = ""
    for i in range(7):
        for _ in range(20):
            x = graph.call_function(torch.tanh, (x,))
            x.meta["module_path"] = ""
        for _ in range(3):
            x = graph.call_function(torch.sigmoid, (x,))
            x.meta["module_path"] = f"part{i}"
    graph.output(x).meta["module_path"] = None
    tree = build_tree(fxviz.to_networkx(torch.fx.GraphModule(nn.Module(), graph)))
    top = tree.boxes[""].items
    assert len(top) <= MAX_ITEMS
    assert [key for kind, key in top if kind == "box" and not tree.boxes[key].synthetic] == [f"part{i}" for i in range(7)]
    segments = [tree.boxes[key] for kind, key in top if kind == "box" and tree.boxes[key].synthetic]
    assert [s.size for s in segments] == [20] * 7
    assert top[0] == ("node", "x") and top[-1] == ("node", "output")  # the graph's inputs and output stay in view
    assert all(s.nodes_only and s.label.startswith("nodes ") for s in segments)

"""The per-graph index of the box tree that layout plans read: each box's FX nodes and the
edges leaving it, each node's unit derived on lookup, and plans that read the edges of what
they draw, not the graph's (bench/plan_same.py checks plans against the previous planner)."""
import torch
import torchvision

import fxviz
from fxviz.draw.layout_index import BoxIndex, Units, box_index
from fxviz.draw.layout_plan import plan_layout
from fxviz.draw.layout_tree import build_tree

from test_layout_plan import flat_graph


def densenet_graph():
    model = torchvision.models.densenet121(weights=None)
    return fxviz.to_networkx(fxviz.capture.capture(model, torch.randn(1, 3, 64, 64)).gm)


def test_a_box_lists_its_nodes_and_the_first_edge_to_each_head_outside():
    graph = densenet_graph()  # dense blocks: every layer reads every earlier one
    index = BoxIndex(build_tree(graph))
    edges = index.tree.edges
    for path in index.tree.boxes:
        inside = {name for name, box in index.tree.box_of.items() if path in ("", *index.tree.chain(box))}
        assert sorted(index.members(path)) == sorted(inside)
        crossing = [i for i, (tail, head) in enumerate(edges) if tail in inside and head not in inside]
        first = {}
        for i in crossing:
            first.setdefault(edges[i][1], i)
        assert index.leaving(path) == sorted(first.values())
    assert [edges[i][0] for i in index.out("features_conv0")] == ["features_conv0"] and not index.out("output")


def test_edges_from_one_box_to_one_head_are_listed_once():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    a = graph.call_function(torch.tanh, (x,))
    b = graph.call_function(torch.sigmoid, (a,))
    for node in (x, a, b):
        node.meta["module_path"] = "m"
    c = graph.call_function(torch.add, (a, b))
    c.meta["module_path"] = ""
    graph.output(c).meta["module_path"] = None
    index = BoxIndex(build_tree(fxviz.to_networkx(torch.fx.GraphModule(torch.nn.Module(), graph))))
    assert [index.tree.edges[i] for i in index.leaving("m")] == [("tanh", "add")]  # not sigmoid -> add too


def test_a_node_is_its_own_unit_under_open_boxes_else_the_outermost_closed_box():
    graph = flat_graph(60, 100)  # blocks 0-31 and 32-59 ranges, then segments of loose nodes
    tree = build_tree(graph)
    units = Units(tree, {"blocks", "blocks.⟨1–96⟩", "blocks.3", "blocks.50"})
    assert units["tanh_10"] == ("node", "tanh_10") and units["x"] == ("node", "x")  # blocks.3, the root
    assert units["tanh_13"] == ("collapsed", "blocks.4")
    assert units["tanh_150"] == ("collapsed", "blocks.⟨97–180⟩")  # blocks.50 is open in a closed range
    assert units["sigmoid_9"] == ("collapsed", "⟨181–212⟩")  # a segment of loose nodes
    assert len(units) == len(graph) and set(units) == set(graph)


def test_a_plan_reads_the_edges_leaving_what_it_draws_not_the_graphs():
    graph = flat_graph(2000, 20000)  # 26,000 nodes
    index = box_index(graph)
    plan_layout(graph, collapse=set(), expand=[], auto=True, max_nodes=250, long_edge=40)  # lists boxes once

    class Counted(list):
        reads = 0

        def __getitem__(self, i):
            Counted.reads += 1
            return super().__getitem__(i)

        def __iter__(self):  # a walk over every edge, as plans once did
            Counted.reads += len(self)
            return super().__iter__()

    index.tree.edges = Counted(index.tree.edges)
    drawn = plan_layout(graph, collapse=set(), expand=[], auto=True, max_nodes=250, long_edge=40)
    assert len(drawn.edges) <= Counted.reads <= 2 * drawn.box_count < len(graph) / 50

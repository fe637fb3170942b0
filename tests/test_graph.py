import pytest
import torch

import fxviz
from fxviz.annotation.graph import shape_text


def test_my_module_table_matches_print_tabular(my_module):
    g = fxviz.to_networkx(fxviz.trace(my_module))
    rows = [(a["op"], n) for n, a in g.nodes(data=True)]
    assert rows == [
        ("placeholder", "x"), ("get_attr", "linear_weight"), ("call_function", "add"),
        ("call_module", "linear"), ("call_method", "relu"), ("call_function", "sum_1"),
        ("call_function", "topk"), ("output", "output"),
    ]
    assert g.nodes["sum_1"]["kwargs"] == "{'dim': -1}"
    assert g.nodes["sum_1"]["target"] == "torch.sum"
    assert g.nodes["add"]["target"] == "operator.add"
    assert g.nodes["linear"]["target"] == "linear (Linear)"
    assert g.nodes["relu"]["target"] == "relu (method)"
    assert g.nodes["add"]["args"] == "(x, linear_weight)"
    assert g.nodes["topk"]["args"] == "(sum_1, 3)"


def test_edges_follow_uses_with_positions(my_module):
    g = fxviz.to_networkx(fxviz.trace(my_module))
    assert list(g.predecessors("add")) == ["x", "linear_weight"]
    assert g.edges["linear_weight", "add"]["uses"] == ("args[1]",)
    assert g.nodes["x"]["num_users"] == 1 and g.nodes["topk"]["users"] == ("output",)


def test_repeated_use_is_one_edge_listing_every_position():
    class Square(torch.nn.Module):
        def forward(self, x):
            return x * x

    g = fxviz.to_networkx(fxviz.trace(Square()))
    assert g.edges["x", "mul"]["uses"] == ("args[0]", "args[1]")


def test_uses_inside_lists_and_keywords_are_edges_too():
    """FX keeps a list argument as its own immutable_list and kwargs apart: both are walked."""
    class Nested(torch.nn.Module):
        def forward(self, x, y):
            return torch.cat([x, y, x], dim=0).clamp(min=x.min(), max=y)

    g = fxviz.to_networkx(fxviz.trace(Nested()))
    assert g.edges["x", "cat"]["uses"] == ("args[0][0]", "args[0][2]")
    assert g.edges["y", "cat"]["uses"] == ("args[0][1]",)
    assert g.edges["min_1", "clamp"]["uses"] == ("kwargs['min']",)
    assert g.edges["y", "clamp"]["uses"] == ("kwargs['max']",)
    assert g.edges["cat", "clamp"]["uses"] == ("args[0]",)


def test_a_node_inside_a_slice_is_an_edge():
    """x[:, :n] with n computed from x: the slice holds the node, and the drawing shows
    where n goes (it used to end nowhere)."""
    class Half(torch.nn.Module):
        def forward(self, x):
            return x[:, : x.size(1) // 2]

    gm = fxviz.trace(Half())
    g = fxviz.to_networkx(gm)
    assert g.edges["floordiv", "getitem"]["uses"] == ("args[1][1].stop",)
    assert {(p.name, n.name) for n in gm.graph.nodes for p in n.all_input_nodes} == set(g.edges)


def test_shapes_and_cost_appear_once_annotated(my_module):
    gm = fxviz.annotate(fxviz.trace(my_module), torch.randn(5, 4))
    g = fxviz.to_networkx(gm)
    assert g.nodes["linear"]["shape"] == (5, 5)
    assert g.nodes["linear"]["flops"] == 2 * 5 * 4 * 5
    assert g.nodes["linear"]["macs"] == 5 * 4 * 5
    # topk returns (values, indices): one entry per output
    assert g.nodes["topk"]["shape"] == ((3,), (3,))
    assert g.nodes["topk"]["dtype"] == ("float32", "int64")
    assert shape_text(g.nodes["topk"]["shape"]) == "(3), (3)"
    assert shape_text(g.nodes["linear"]["shape"]) == "5×5"
    assert g.nodes["x"]["module_path"] == ""


def test_the_bulk_built_graph_is_the_one_networkx_builds(my_module):
    """to_networkx fills networkx's dicts directly: the result must be what
    add_nodes_from/add_edges_from give, and work with networkx's own algorithms."""
    import networkx as nx

    g = fxviz.to_networkx(fxviz.annotate(fxviz.trace(my_module), torch.randn(5, 4)))
    reference = nx.DiGraph(**g.graph)
    reference.add_nodes_from(g.nodes(data=True))
    reference.add_edges_from(g.edges(data=True))
    assert nx.utils.graphs_equal(g, reference)
    assert list(g.successors("x")) == ["add"] and list(g.predecessors("output")) == ["topk"]
    assert list(nx.topological_sort(g)) == list(g)
    assert nx.utils.graphs_equal(g.copy(), g) and set(g.subgraph(["x", "add"]).edges) == {("x", "add")}


def test_nodes_alike_get_records_of_their_own():
    """Nodes of one target and layout share how their record is made, never the record:
    each has its own position, arguments, users, module and bytes, and editing one
    record leaves the others alone."""

    class Twice(torch.nn.Module):
        def forward(self, x):
            y = torch.tanh(x)
            return torch.tanh(y) + torch.tanh(y + 1)

    _, notes = fxviz.annotation.shapes.annotated_run(gm := fxviz.trace(Twice()), (torch.randn(2, 3),))
    g = fxviz.to_networkx(gm, notes)
    first, second, third = (g.nodes[n] for n in ("tanh", "tanh_1", "tanh_2"))
    assert (first["index"], second["index"]) == (1, 2) and first["args"] == "(x,)" and second["args"] == "(tanh,)"
    assert first["users"] == ("tanh_1", "add") and second["users"] == ("add_1",) and third["args"] == "(add,)"
    assert first["shape"] == second["shape"] == (2, 3) and first["bytes"] == second["bytes"] == 2 * 2 * 3 * 4
    first["flops"] = "edited"
    assert second["flops"] is None and third["flops"] is None


@pytest.mark.parametrize("tracer", ["symbolic", "make_fx", "export"])
def test_edges_are_exactly_the_nodes_inputs(resnet18, tracer):
    """Every input FX records for a node (inside tuples, lists, dicts, slices) is an edge, and nothing else is."""
    gm = fxviz.trace(resnet18, torch.randn(1, 3, 32, 32), tracer=tracer)
    g = fxviz.to_networkx(gm)
    assert {(p.name, n.name) for n in gm.graph.nodes for p in n.all_input_nodes} == set(g.edges)

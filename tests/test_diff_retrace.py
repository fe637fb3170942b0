"""Across a pass that traces the graph again (run_decompositions), nodes are paired by what
torch's trace records each was made from, not by name: the trace names its nodes anew, and
b's view_6 is a's view_4. A node a later pass inserts next to a node stays added."""
import torch

import fxviz
from fxviz.diff.side_by_side import counterparts


def session():
    torch.manual_seed(0)
    net = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
    params = list(net.parameters())

    def step(x):
        loss = net(x).pow(2).mean()
        return loss, torch.autograd.grad(loss, params)

    s = fxviz.Session(step, (torch.randn(2, 3, 16),), tracer="make_fx")
    s.apply("run_decompositions")
    return s


def slip_after_relu(gm):
    """A real error: the first relu's value scaled by 1.01 (a node inserted after it)."""
    relu = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.relu.default)
    with gm.graph.inserting_after(relu):
        scaled = gm.graph.call_function(torch.ops.aten.mul.Tensor, (relu, 1.01))
    relu.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled)
    gm.recompile()
    return gm


def test_nodes_traced_again_are_paired_by_what_they_were_made_from():
    s = session()
    cmp = s.compare(0, 1)
    rows = cmp.structure.set_index("node")
    assert rows.at["view_6", "node_a"] == "view_4" and rows.at["view_6", "mark"] == "unchanged"
    assert "view_4 traced again" in rows.at["view_6", "why"]
    assert rows.at["permute", "node_a"] == "transpose" and rows.at["permute", "mark"] == "changed"
    assert rows.at["args_0", "node_a"] == "x"  # the input, named anew, by position
    removed = set(rows.index[rows["mark"] == "removed"])
    assert not removed & {"view_4", "transpose", "x"}
    to = counterparts(cmp.structure)
    assert to["a"]["view_4"] == "view_6" and to["b"]["view_6"] == "view_4"
    numerics = cmp.numerics.set_index("node")
    assert numerics.at["view_6", "counterpart"] == "view_4" and numerics.at["view_6", "max_rel"] == 0
    # the backward, decomposed, sums in another order: float32's rounding, no divergence
    assert numerics["rounding"].any() and not numerics["diverged"].any()
    assert cmp.first_divergence is None and cmp.first_gradient_divergence is None


def test_a_real_error_after_the_trace_is_found_where_it_enters():
    s = session()
    s.apply(slip_after_relu)
    cmp = s.compare(0, 2)
    rows = cmp.structure.set_index("node")
    gm = s.current.gm
    relu = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.relu.default)
    (scaled,) = relu.users
    assert rows.at[scaled.name, "mark"] == "added" and rows.at[scaled.name, "node_a"] == ""
    assert rows.at[relu.name, "node_a"] == "relu" and rows.at[relu.name, "mark"] == "unchanged"
    numerics = cmp.numerics.set_index("node")
    order = [n.name for n in gm.graph.nodes]
    first = cmp.first_divergence
    assert first is not None and order.index(first) > order.index(scaled.name)
    before = [name for name in order[:order.index(scaled.name)] if name in numerics.index]
    assert not numerics.loc[before, "diverged"].any()
    assert scaled in next(n for n in gm.graph.nodes if n.name == first).all_input_nodes  # reads the slip


def test_each_side_marks_its_own_nodes_across_the_trace():
    cmp = session().compare(0, 1)
    a, b = cmp.node_marks("a"), cmp.node_marks("b")
    assert a["view_4"] == b["view_6"] == "unchanged"  # one node, named anew
    assert a["transpose"] == b["permute"] == "changed"  # transpose traced as permute
    assert a["_unsafe_view"] == b["view"] == "changed"
    assert a["permute"] == b["permute_6"] == "unchanged"  # b's permute is another node
    assert set(a) <= {n.name for n in cmp.step_a.gm.graph.nodes} and set(b) <= {n.name for n in cmp.step_b.gm.graph.nodes}

"""An exported program unlifted without ep.module(): its weights module is the one torch
builds (names, tensors, persistence), made in time linear in the weights."""
from __future__ import annotations

import torch
from torch import nn

from fxviz._torch_internals.unlift import _add_weights, unlifted


class Held(nn.Module):
    """Parameters, persistent and non-persistent buffers and a tensor constant, nested."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4)) for _ in range(3))
        self.register_buffer("scale", torch.tensor(2.0))
        self.register_buffer("shift", torch.tensor(0.5), persistent=False)
        self.table = torch.arange(4.0)  # a plain tensor attribute: a lifted constant

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x * self.scale + self.shift + self.table


def test_the_weights_module_is_the_one_torch_builds():
    from torch.export._unlift import _register_attrs_to_new_gm

    ep = torch.export.export(Held().eval(), (torch.randn(2, 4),))
    signature = ep.graph_signature
    assert signature.non_persistent_buffers and signature.lifted_tensor_constants  # each kind is covered
    torchs = nn.Module()
    _register_attrs_to_new_gm(torchs, signature, ep.state_dict, ep.constants)
    ours = nn.Module()
    _add_weights(ours, ep)
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in torchs.named_modules()]
    for kind in ("named_parameters", "named_buffers"):
        theirs = dict(getattr(torchs, kind)())
        assert list(dict(getattr(ours, kind)())) == list(theirs)
        assert all(t is theirs[n] for n, t in getattr(ours, kind)())  # the program's own tensors, shared
    assert list(ours.state_dict()) == list(torchs.state_dict())  # "shift" left out of both: not persistent
    constant = signature.lifted_tensor_constants[0]
    assert getattr(ours, constant) is ep.constants[constant]


def test_an_unlifted_program_holds_its_weights_as_ep_module_does():
    model = Held().eval()
    x = torch.randn(2, 4)
    ep = torch.export.export(model, (x,))
    gm, torchs = unlifted(ep), ep.module()
    for kind in ("named_parameters", "named_buffers"):
        assert list(dict(getattr(gm, kind)())) == list(dict(getattr(torchs, kind)()))
    assert "shift" in dict(gm.named_buffers()) and "shift" not in gm.state_dict()  # not persistent
    constant = ep.graph_signature.lifted_tensor_constants[0]
    assert getattr(gm, constant) is getattr(torchs, constant) is ep.constants[constant]
    torch.testing.assert_close(gm(x), model(x))


def test_the_graph_is_copied_as_graph_copy_copies_it_and_the_program_is_left_as_it_was():
    from torch.fx.node import map_arg

    from fxviz._torch_internals.unlift import _copied

    ep = torch.export.export(Held().eval(), (torch.randn(2, 4),))
    before = str(ep.graph)
    ours, theirs = _copied(ep.graph), torch.fx.Graph()
    output, old = theirs.graph_copy(ep.graph, {}, return_output_node=True)
    theirs.output(output, type_expr=old.type).meta = dict(old.meta)

    def described(graph):
        return [(n.name, n.op, n.target, n.type, map_arg((n.args, n.kwargs), lambda a: f"<{a.name}>"),
                 [u.name for u in n.users], n.meta) for n in graph.nodes]

    assert described(ours) == described(theirs) and len(ours.nodes) == len(ep.graph.nodes)
    assert all(a.meta is not b.meta and a.meta["val"] is b.meta["val"] for a, b in zip(ours.nodes, ep.graph.nodes)
               if "val" in b.meta)  # each meta its own dict, holding the program's values
    assert str(ep.graph) == before and all(u.graph is ep.graph for n in ep.graph.nodes for u in n.users)
    ours.lint()


class Residual(nn.Module):
    """A value read by an add and, later in the graph, by a Linear with weights: moving
    the Linear's weight uses reorders the value's users, which the copy must do too."""

    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        y = self.first(x).relu()
        return y + self.second(y)


def test_weights_become_get_attrs_as_inserting_one_moving_the_uses_and_erasing_the_input_makes_them():
    from torch.export.graph_signature import InputKind

    from fxviz._torch_internals.unlift import _copied

    ep = torch.export.export(Residual().eval(), (torch.randn(2, 4),))
    theirs = _copied(ep.graph)  # torch's own steps, as unlifted took them before
    for node, spec in zip(theirs.find_nodes(op="placeholder"), ep.graph_signature.input_specs):
        if spec.kind == InputKind.PARAMETER:
            with theirs.inserting_after(node):
                weight = theirs.get_attr(spec.target)
            node.replace_all_uses_with(weight)
            weight.meta = node.meta
            theirs.erase_node(node)

    def described(graph):
        return [(n.name, n.op, n.target, n.type, str(n.args), [u.name for u in n.users],
                 [i.name for i in n.all_input_nodes], sorted(n.meta)) for n in graph.nodes]

    ours = unlifted(ep).graph
    relu = next(n for n in ours.nodes if n.name == "relu")
    assert [u.name for u in relu.users] == ["add", "linear_1"]  # the order the moved use makes (the graph's is the other)
    assert described(ours) == described(theirs)
    assert [(n.op, n.target) for n in ours.find_nodes(op="get_attr")] == \
        [(n.op, n.target) for n in theirs.find_nodes(op="get_attr")]
    assert not ours.find_nodes(op="placeholder", target="p_first_weight") and len(ours.nodes) == len(theirs.nodes)
    name = ours.create_node("call_function", torch.relu, (relu,), name="first_weight").name
    assert name == theirs.create_node("call_function", torch.relu, (relu,), name="first_weight").name  # same names taken
    ours.lint()

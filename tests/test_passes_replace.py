"""replace_op: one operator replaced in all its spellings (the one-fx tutorial's example)."""
import operator

import pytest
import torch
from torch import nn

from fxviz.errors import PassError
from fxviz.passes import NothingToDo, get
from fxviz.capture import trace

REPLACE = get("replace_op")


class ThreeAdds(nn.Module):
    def forward(self, x, y):
        return (x + y, torch.add(x, y), x.add(y))


def test_all_three_spellings_of_add_become_multiplications():
    gm = REPLACE(trace(ThreeAdds()), old="add", new="mul").graph_module
    targets = [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
    assert targets == [operator.mul, torch.mul, "mul"]
    x, y = torch.randn(3), torch.randn(3)
    for out in gm(x, y):
        assert torch.equal(out, x * y)


def test_replace_op_is_labelled_as_changing_semantics():
    assert REPLACE.preserves_semantics is False


def test_keyword_arguments_are_skipped_with_the_reason():
    class Alpha(nn.Module):
        def forward(self, x):
            return torch.add(x, x, alpha=2)

    with pytest.raises(NothingToDo, match=r"no 'add' operation found; 'add' has keyword arguments \['alpha'\]"):
        REPLACE(trace(Alpha()), old="add", new="sub")


def test_same_old_and_new_is_refused():
    with pytest.raises(PassError, match="old and new are both 'add'"):
        REPLACE(trace(ThreeAdds()), old="add", new="add")


def test_unknown_operator_names_the_choices():
    with pytest.raises(PassError, match=r"new='modulo' is not one of 'add', 'sub'"):
        REPLACE(trace(ThreeAdds()), old="add", new="modulo")


def test_aten_graphs_from_make_fx_are_rewritten_overload_by_overload():
    x, y = torch.randn(3), torch.randn(3)
    gm = REPLACE(trace(ThreeAdds(), (x, y), tracer="make_fx"), old="add", new="sub").graph_module
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets == [torch.ops.aten.sub.Tensor] * 3
    assert all(torch.equal(out, x - y) for out in gm(x, y))

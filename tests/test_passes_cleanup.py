"""eliminate_dead_code: unused results go, in-place calls stay."""
import pytest
from torch import nn

from fxviz.passes import NothingToDo, get
from fxviz.capture import trace

DCE = get("eliminate_dead_code")


class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.unused_linear = nn.Linear(3, 3)

    def forward(self, x):
        self.unused_linear(x)
        x.sin()
        return x + 1


def test_unused_results_and_their_modules_are_removed():
    gm = DCE(trace(Unused())).graph_module
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "call_function", "output"]
    assert not hasattr(gm, "unused_linear")


def test_in_place_calls_are_kept_even_when_their_result_is_unused():
    class InPlace(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.ReLU(inplace=True)

        def forward(self, x):
            y = x * 1
            y.add_(1)
            self.act(y)
            return y

    with pytest.raises(NothingToDo, match="no dead code found"):
        DCE(trace(InPlace()))

"""fxviz's errors: one hierarchy with a real ``node`` field, and builtin bases for argument errors."""
import pytest
import torch
from torch import nn

import fxviz
from fxviz.errors import FxvizError, InputError, NoSuchStep, PassError, UsageError


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def test_a_failing_pass_names_its_node_in_a_field():
    session = fxviz.Session(Model(), torch.randn(2, 4))

    def broken(gm, *, nodes=None):
        for node in gm.graph.nodes:
            if node.op == "call_function":
                raise RuntimeError("cannot rewrite this")

    with pytest.raises(PassError, match="at node 'relu'") as caught:
        session.apply(broken)
    assert caught.value.node == "relu"
    assert len(session.steps) == 1


def test_a_graph_that_cannot_run_names_the_failing_node():
    session = fxviz.Session(Model(), torch.randn(2, 4))

    def to_wrong_width(gm):
        gm.fc = nn.Linear(5, 4)  # expects 5 features, gets 4

    with pytest.raises(PassError, match="cannot run on the example inputs at node 'fc'") as caught:
        session.apply(to_wrong_width)
    assert caught.value.node == "fc"
    assert session.index == 0


def test_argument_errors_are_fxviz_errors_and_their_builtin():
    session = fxviz.Session(Model(), torch.randn(2, 4))
    with pytest.raises(NoSuchStep) as caught:
        session.undo()
    assert isinstance(caught.value, IndexError) and isinstance(caught.value, FxvizError)
    with pytest.raises(InputError, match="needs values") as caught:
        fxviz.draw.render.render(session.current.gm, color_by="time")
    assert isinstance(caught.value, ValueError)
    assert issubclass(UsageError, TypeError) and caught.value.node is None


def test_a_misspelt_trace_option_lists_the_options():
    with pytest.raises(UsageError, match=r"trace\(\) has no option 'tracr'; its options are: tracer, leaf_modules"):
        fxviz.trace(Model(), tracr="symbolic")


def test_a_built_in_pass_refusing_a_node_names_it():
    session = fxviz.Session(Model(), torch.randn(2, 4), tracer="symbolic")
    with pytest.raises(PassError, match="select the node of a module call") as caught:
        session.apply("inline_module", nodes=["relu"])
    assert caught.value.node == "relu"


def test_what_a_user_can_get_wrong_gets_an_fxviz_error_saying_what_to_do(tmp_path):
    """Each read as Python's own: IndexError, FileNotFoundError, TypeError, or a profile with no bound."""
    session = fxviz.Session(Model(), torch.randn(2, 4))
    with pytest.raises(NoSuchStep, match="There is no step 5; this session has steps 0 to 0"):
        session.compare(0, 5)
    with pytest.raises(UsageError, match="the folder .*missing.* does not exist") as caught:
        session.to_html(tmp_path / "missing" / "report.html")
    assert not (tmp_path / "missing").exists()  # said before anything is made
    with pytest.raises(UsageError, match="Cannot write the report"):
        session.to_html(tmp_path)  # a folder
    with pytest.raises(PassError, match="A pass is a function of a GraphModule"):
        fxviz.passes.register(3)
    with pytest.raises(InputError, match="budget_s >= 0"):
        session.current.profile(budget_s=-1)
    with pytest.raises(PassError, match="did you mean 'fuse_conv_bn'"):
        session.apply("fuse_conv_bm")
    assert caught.value.args and len(session.steps) == 1  # nothing was lost


@pytest.mark.parametrize("count", [-1, "2", 1.5])
def test_a_count_of_random_inputs_that_is_no_count_is_refused(count):
    with pytest.raises(UsageError, match=r"n_random_inputs=...\) is a count \(0 or more\)"):
        fxviz.Session(Model(), torch.randn(2, 4), n_random_inputs=count)


def test_drawing_takes_a_model_or_a_graph_module_and_refuses_the_rest():
    model = Model()
    assert fxviz.to_svg(model).startswith("<svg") and "fc" in fxviz.to_dot(model).source  # traced, as torchview does
    with pytest.raises(UsageError, match="needs a torch.fx.GraphModule, got NoneType"):
        fxviz.to_networkx(None)
    with pytest.raises(UsageError, match="needs a torch.fx.GraphModule, got NoneType"):
        fxviz.to_svg(None)

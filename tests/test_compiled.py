"""fxviz.compiled: every graph torch.compile's dynamo hands a backend, its guards, the
graph breaks with reason and user line, AOT's forward/backward graphs, each a Session."""
import inspect

import pytest
import torch
from torch import nn

import fxviz
from fxviz.errors import TraceError


class Branchy(nn.Module):
    """A branch on a tensor's value: dynamo splits the model there into two graphs."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        h = self.lin(x)
        if h.sum() > 0:  # BREAK
            h = h * 2
        else:
            h = h - 1
        return self.out(torch.relu(h))


BREAK_LINE = inspect.getsourcelines(Branchy.forward)[1] + next(
    i for i, line in enumerate(inspect.getsource(Branchy.forward).splitlines()) if "# BREAK" in line)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Branchy()


@pytest.fixture(scope="module")
def result(model):
    return fxviz.compiled(model, torch.randn(2, 3))


def test_two_graphs_split_at_the_branch_with_reason_and_user_line(result):
    assert len(result.graphs) == 2
    (brk,) = result.graph_breaks
    assert brk["reason"] == "Data-dependent branching"
    assert "torch.cond" in brk["detail"]  # dynamo's hint, not "generic_jump TensorVariable()"
    assert brk["user_line"] == f"{__file__}:{BREAK_LINE}"
    assert result.graphs[0].graph_break is brk and result.graphs[1].graph_break is None


def test_every_graph_has_guards_and_its_guard_tree(result):
    for graph in result.graphs:
        assert graph.guards and all(isinstance(g, str) and g for g in graph.guards)
        assert any("TENSOR_MATCH" in g for g in graph.guards)
    # dynamo's own guard text, with the size it specialised on
    assert "size=[2, 3]" in result.graphs[0].guard_tree


def test_aot_forward_and_backward_graphs_with_parameters_by_name(result):
    assert result.views() == [(0, "dynamo"), (0, "forward"), (0, "backward"),
                              (1, "dynamo"), (1, "forward"), (1, "backward")]
    forward = result.graphs[0].forward
    names = [n.meta.get("qualified_name") for n in forward.graph.find_nodes(op="placeholder")]
    assert names[:2] == ["lin.weight", "lin.bias"]
    backward_paths = {n.meta["module_path"] for n in result.graphs[1].backward.graph.nodes if n.op == "call_function"}
    assert "out · backward" in backward_paths



def test_each_part_says_what_it_shows_and_is_named_after_the_model(model, result):
    abouts = {part: result.session(0, part).capture.about for part in ("dynamo", "forward", "backward")}
    assert abouts["dynamo"].startswith("TorchDynamo") and "the torch functions" in abouts["dynamo"]
    assert abouts["forward"].startswith("AOT autograd's forward") and "ATen" in abouts["forward"]
    assert abouts["backward"].startswith("AOT autograd's backward") and "gradients" in abouts["backward"]
    assert {type(result.session(1, part).current.gm).__name__ for part in ("dynamo", "forward", "backward")} == {
        type(model).__name__}  # not torch's "GraphModule": titles and reports name the model


def test_each_graph_session_reproduces_its_part_of_the_eager_model(model, result):
    x = result.session(0).example_inputs[-1]  # the input dynamo saw (after the lifted parameters)
    h = model.lin(x)
    first = result.session(0)
    assert first.current.check.status == "match"
    gt, h_graph = first.current.gm(*first.example_inputs)
    assert bool(gt) == bool(h.sum() > 0)
    torch.testing.assert_close(h_graph, h)
    second = result.session(1)
    (out,) = second.current.gm(*second.example_inputs)
    torch.testing.assert_close(out, model(x))
    assert second.current.check.status == "match"


def test_backward_session_computes_the_eager_gradients(model, result):
    """The AOT backward graph of the last graph gives out.weight's gradient."""
    session = result.session(1, "backward")
    grads = session.current.gm(*session.example_inputs)
    x = result.session(0).example_inputs[-1]
    params = dict(model.named_parameters())
    expected = torch.autograd.grad(model(x).sum(), [params["out.weight"]])[0]
    assert any(g is not None and g.shape == expected.shape and torch.allclose(g, expected) for g in grads)
    assert session.current.check.status == "match"


def test_the_model_is_untouched_and_capturing_twice_gives_the_same_graphs(model):
    before = {k: v.clone() for k, v in model.state_dict().items()}
    first = fxviz.compiled(model, torch.randn(2, 3))
    second = fxviz.compiled(model, torch.randn(2, 3))
    assert first.table()["nodes"].tolist() == second.table()["nodes"].tolist()
    assert all(p.grad is None for p in model.parameters())  # autograd.grad: nothing accumulated
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not hasattr(model, "_orig_mod") and type(model) is Branchy


def test_users_own_torch_compile_afterwards_sees_its_own_backend(model):
    fxviz.compiled(model, torch.randn(2, 3))
    seen = []

    def backend(gm, _inputs):
        seen.append(gm)
        return gm.forward

    torch.compile(model, backend=backend)(torch.randn(2, 3))
    assert len(seen) == 2  # compiled afresh with the user's backend, not served our entries
    torch._dynamo.reset()


def test_no_grad_or_no_backward_records_no_backward_graph(model):
    with torch.no_grad():
        result = fxviz.compiled(model, torch.randn(2, 3))
    assert [part for _, part in result.views()] == ["dynamo", "forward"] * 2
    with pytest.raises(ValueError, match="no backward graph"):
        result.session(0, "backward")
    with pytest.raises(IndexError, match="graphs 0 to 1"):
        result.session(2)


def test_a_batchnorm_in_training_mode_keeps_the_users_statistics_and_every_view_checks():
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = fxviz.compiled(model, torch.randn(4, 3))
    # the dynamo graph adds to num_batches_tracked in place: each Session runs on its own copy
    assert {view: s.current.check.status for view, s in result.sessions().items()} == {
        (0, "dynamo"): "match", (0, "forward"): "match", (0, "backward"): "match"}
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_compiled_needs_example_inputs():
    with pytest.raises(TraceError, match="pass example inputs"):
        fxviz.compiled(Branchy())


def test_table_lists_each_view_with_its_break(result):
    table = result.table()
    assert list(table.columns) == ["graph", "part", "nodes", "ends_with", "user_line", "guards"]
    assert table.loc[0, "ends_with"] == "Data-dependent branching"
    assert table.loc[len(table) - 1, "ends_with"] == "end of the model"
    assert "Data-dependent branching" in result._repr_html_()


def test_a_function_closing_over_the_model_names_its_parameters(model):
    def step(x):
        return model(x).sum()

    result = fxviz.compiled(step, torch.randn(2, 3))
    names = {n.meta.get("qualified_name") for n in result.graphs[0].gm.graph.find_nodes(op="placeholder")}
    assert {"lin.weight", "lin.bias"} <= names
    assert result.graphs[0].backward is not None  # the model's parameters require grad
    assert all(p.grad is None for p in model.parameters())


def test_a_model_that_fails_on_its_inputs_says_where():
    class Broken(nn.Module):
        def forward(self, x):
            return x @ torch.ones(5, 5)  # BROKEN

    with pytest.raises(TraceError, match=r"compiled\(\.\.\.\): dynamo could not capture the model at .*test_compiled.py:\d+.*BROKEN"):
        fxviz.compiled(Broken(), torch.randn(2, 3))


def test_a_model_without_tensor_operations_has_no_graph():
    class Identity(nn.Module):
        def forward(self, x):
            return x

    with pytest.raises(TraceError, match="dynamo captured no graph"):
        fxviz.compiled(Identity(), torch.randn(2, 3))


def test_a_torch_compiled_model_shows_the_graphs_of_what_it_wraps(model):
    """Compiling the wrapper again failed ('new_mod already has a get_compiler_config attribute')."""
    again = fxviz.compiled(torch.compile(model), torch.randn(2, 3))
    assert len(again.graphs) == 2 and again.graph_breaks[0]["user_line"].endswith(f":{BREAK_LINE}")
    assert "lin" in {n.meta["module_path"] for n in again.graphs[0].gm.graph.nodes}

"""A training step as people write it: a function closing over the model."""
import torch
from torch import nn

import fxviz

model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))


def train_step(x, y):  # reads `model` from its globals; no module= given
    loss = nn.functional.cross_entropy(model(x), y)
    return torch.autograd.grad(loss, list(model.parameters()))


def test_step_closing_over_model_gets_qualified_params_and_backward_clusters():
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
    gm = fxviz.trace(train_step, (x, y), tracer="make_fx")
    params = {n.name: n.meta["module_path"] for n in gm.graph.find_nodes(op="get_attr")}
    assert params["_0_weight"] == "0" and params["_4_bias"] == "4" and params["_1_running_mean"] == "1"
    paths = {n.meta.get("module_path") for n in gm.graph.nodes}
    assert {"0", "1", "4", "0 · backward", "1 · backward", "4 · backward"} <= paths
    conv_bwd = next(n for n in gm.graph.nodes if "convolution_backward" in str(n.target))
    assert conv_bwd.meta["backward_of"] == "0" and conv_bwd.meta["module_path"] == "0 · backward"
    bn_bwd = next(n for n in gm.graph.nodes if "batch_norm_backward" in str(n.target))
    assert bn_bwd.meta["backward_of"] == "1"
    unattributed = [n.name for n in gm.graph.nodes if n.op == "call_function" and not n.meta.get("module_path")]
    assert len(unattributed) <= 6  # only the loss, at top level
    for got, want in zip(gm(x, y), train_step(x, y)):
        torch.testing.assert_close(got, want)
    graph = fxviz.to_networkx(gm)
    assert graph.graph["module_types"]["0 · backward"] == "Conv2d"


def test_a_step_function_graph_is_named_after_the_function():
    model = nn.Linear(3, 2)

    def train_step(x):
        return torch.autograd.grad(model(x).sum(), list(model.parameters()))

    gm = fxviz.trace(train_step, (torch.randn(4, 3),), tracer="make_fx")
    assert type(gm).__name__ == "train_step"  # the Explorer's title, not make_fx's "<lambda>"


def test_a_training_step_leaves_the_users_batchnorm_statistics_alone():
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def train_step(x):
        return torch.autograd.grad(model(x).sum(), list(model.parameters()))

    session = fxviz.Session(train_step, (torch.randn(4, 3) + 1,), tracer="make_fx")
    assert session.current.check.status == "match"  # capture and check both ran the step
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # running stats, num_batches_tracked

"""A training step as people write it: a function closing over the model."""
import pytest
import torch
from torch import nn

import fxviz
from fxviz.capture.info import graph_info

model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))


def train_step(x, y):  # reads `model` from its globals; no module= given
    loss = nn.functional.cross_entropy(model(x), y)
    return torch.autograd.grad(loss, list(model.parameters()))


def test_step_closing_over_model_gets_qualified_params_and_backward_clusters():
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
    gm = fxviz.trace(train_step, (x, y), tracer="make_fx")
    params = {}  # the forward's reads (backward reads them again, in the backward cluster)
    for node in gm.graph.find_nodes(op="get_attr"):
        params.setdefault(node.target, node.meta["module_path"])
    assert params["0.weight"] == "0" and params["4.bias"] == "4" and params["1.running_mean"] == "1"
    assert not any(name.startswith("_param_constant") for name, _ in gm.named_parameters())
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


def test_a_step_make_fx_cannot_trace_opens_as_dynamo_graphs_with_their_backward():
    """A branch on a tensor's value stops make_fx; dynamo runs the step with autograd on
    (it takes its own gradients), so the graphs open and the step's backward is AOT's."""
    model = nn.Linear(3, 3)

    def train_step(x):
        out = model(x)
        loss = (out * 2 if out.sum() > 0 else out - 1).pow(2).mean()
        return loss, torch.autograd.grad(loss, list(model.parameters()))

    session = fxviz.Session(train_step, (torch.randn(2, 3),))
    assert session.capture.method == "dynamo" and [m for m, _ in session.capture.attempts][-1] == "make_fx"
    first = graph_info(session.capture.graphs[0])
    assert first.graph_breaks[0]["reason"] == "Data-dependent branching"
    assert first.aot_backward is not None  # the step's gradients ran through the compiled graph
    assert session.current.check.status == "match"


class SkipsItsCheckWhenTraced(nn.Module):
    """Hugging Face's decoder masks: a check of the values, skipped when ``is_tracing(x)``
    (a proxy or a fake tensor); both paths compute the same."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        keep = x > -1e9
        if not isinstance(x, torch._subclasses.FakeTensor) and keep.all():
            keep = None
        return self.lin(x if keep is None else x * keep)


def test_a_step_over_a_model_that_skips_value_checks_when_traced_opens_as_one_make_fx_graph():
    net = SkipsItsCheckWhenTraced()

    def train_step(x):
        loss = net(x).pow(2).mean()
        return loss, torch.autograd.grad(loss, list(net.parameters()))

    session = fxviz.Session(train_step, (torch.randn(2, 3),))
    assert session.capture.method == "make_fx"  # not dynamo's graphs split at autograd.grad
    graph = session.current.graph
    assert {"lin", "lin · backward", "loss"} <= {d["module_path"] for _, d in graph.nodes(data=True)}
    assert any(d["target"] == "aten.mul.Tensor" for _, d in graph.nodes(data=True))  # the traced path
    assert session.current.check.status == "match"
    how = graph_info(session.capture.gm).how  # the Details tab says how (why not the graph that ran eagerly)
    assert how.startswith("on fake tensors") and "keep.all()" in how and "torch.export traces" not in how


class AsksIfCompiled(SkipsItsCheckWhenTraced):
    """Hugging Face's experts in small: after the value check, an op that fails on fake
    tensors (``fails_on_fakes``: as ``aten._grouped_mm``'s fake kernel refuses float32),
    and another path, kept for compiled graphs, computing the same (``clone`` marks it)."""

    def __init__(self, fails_on_fakes):
        super().__init__()
        self.fails_on_fakes = fails_on_fakes

    def forward(self, x):
        out = super().forward(x)
        if torch.compiler.is_compiling():
            return out.clone()
        if self.fails_on_fakes and isinstance(x, torch._subclasses.FakeTensor):
            raise RuntimeError("no fake kernel for this dtype")
        return out


@pytest.mark.parametrize("fails_on_fakes", [False, True])
def test_make_fx_takes_the_compiled_path_only_where_the_eager_one_cannot_be_traced(fails_on_fakes):
    net = AsksIfCompiled(fails_on_fakes)

    def train_step(x):
        loss = net(x).pow(2).mean()
        return loss, torch.autograd.grad(loss, list(net.parameters()))

    session = fxviz.Session(train_step, (torch.randn(2, 3),))
    assert session.capture.method == "make_fx"
    targets = {d["target"] for _, d in session.current.graph.nodes(data=True)}
    assert ("aten.clone.default" in targets) == fails_on_fakes  # as eager runs it, where it can
    assert session.current.check.status == "match"
    how = graph_info(session.capture.gm).how
    assert ("as torch.export traces" in how and "no fake kernel for this dtype" in how) == fails_on_fakes
    assert not torch.compiler.is_compiling()


def test_parameters_are_drawn_searched_and_listed_under_their_qualified_names():
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
    gm = fxviz.trace(train_step, (x, y), tracer="make_fx")
    graph = fxviz.to_networkx(gm)
    weight = next(n for n, d in graph.nodes(data=True) if d["op"] == "get_attr" and d["target"] == "0.weight")
    assert graph.nodes[weight]["module_path"] == "0"  # the node table's and search's target column
    svg = fxviz.to_svg(gm, auto_collapse=False, show_weights=True)  # drawn as nodes (else listed on their ops)
    assert ">0.weight<" in svg and ">_0_weight<" not in svg and "_param_constant" not in svg


def test_backward_nodes_are_attributed_by_autograd_sequence_numbers():
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
    gm = fxviz.trace(train_step, (x, y), tracer="make_fx")
    assert graph_info(gm).backward_attribution == "seq_nr"
    backward = [n for n in gm.graph.nodes if n.meta.get("autograd_backward")]
    assert len(backward) > 20
    # every op the autograd engine ran is in a backward cluster, the loss's at top level
    assert all(n.meta["module_path"].endswith(" · backward") or n.meta["module_path"] == "backward" for n in backward)
    forward_of = {}  # the first forward op with a number made the autograd node (later ones reuse it)
    for n in gm.graph.nodes:
        if n.op == "call_function" and not n.meta.get("autograd_backward"):
            forward_of.setdefault(n.meta["seq_nr"], n.meta["module_path"])
    for node in backward:  # the forward op with the same sequence number is in the module named
        if node.op == "call_function" and forward_of.get(node.meta["seq_nr"]):
            assert node.meta["backward_of"] == forward_of[node.meta["seq_nr"]]
    # the weight gradient of the Linear (a transpose of mm) is Linear's, not the Flatten's before it
    linear_grads = [n for n in backward if n.meta["backward_of"] == "4"]
    assert {"aten.mm.default", "aten.t.default"} <= {str(n.target) for n in linear_grads}
    assert not any(n.meta.get("autograd_backward") for n in gm.graph.nodes if str(n.target) == "aten.convolution.default")


def test_without_autograd_marks_the_heuristic_still_attributes_backward_nodes():
    from fxviz.capture.backward import attribute_backward

    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
    gm = fxviz.trace(train_step, (x, y), tracer="make_fx")
    for node in gm.graph.nodes:  # as a graph traced without the marks (older torch, torch.func)
        node.meta.pop("autograd_backward", None)
        node.meta.pop("backward_of", None)
        node.meta["module_path"] = (node.meta["module_path"] or "").removesuffix(" · backward") or (
            None if node.op == "output" else "")
    assert attribute_backward(gm) > 20
    assert graph_info(gm).backward_attribution == "heuristic"
    conv_bwd = next(n for n in gm.graph.nodes if "convolution_backward" in str(n.target))
    bn_bwd = next(n for n in gm.graph.nodes if "batch_norm_backward" in str(n.target))
    assert conv_bwd.meta["backward_of"] == "0" and bn_bwd.meta["module_path"] == "1 · backward"


def _backward_step():
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))

    def step(x):  # gradients land in .grad, as with an optimizer
        loss = net(x).pow(2).mean()
        loss.backward()
        return loss
    return net, step


def test_a_step_calling_backward_is_checked_on_its_gradients_and_leaves_grad_alone():
    net, step = _backward_step()
    net[0].weight.grad = torch.ones_like(net[0].weight)  # what the user had accumulated
    session = fxviz.Session(step, (torch.randn(5, 3),))
    assert session.capture.method == "make_fx"
    loss, grads = session.current.gm(torch.randn(5, 3))
    assert set(grads) == {"0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias"}
    assert session.current.check.status == "match"
    assert torch.equal(net[0].weight.grad, torch.ones_like(net[0].weight)) and net[3].weight.grad is None


def test_the_check_fails_when_one_gradient_is_wrong():
    from fxviz.capture.gradients import with_gradients
    from fxviz.checks.check import check_outputs

    net, step = _backward_step()
    reference = with_gradients(step)
    gm = fxviz.trace(step, (torch.randn(5, 3),), tracer="make_fx")
    output = gm.graph.output_node()
    grads = output.args[0][1]
    with gm.graph.inserting_before(output):
        wrong = gm.graph.call_function(torch.ops.aten.mul.Tensor, (grads["3.bias"], 1.01))
    output.args = ((output.args[0][0], {**grads, "3.bias": wrong}),)
    gm.recompile()
    inputs = [(torch.randn(5, 3),), (torch.randn(5, 3),)]
    assert check_outputs(reference, gm, [inputs[0]]).status == "mismatch"
    result = check_outputs(reference, gm, inputs)
    assert result.status == "mismatch" and "'3.bias'" in result.message and "'3.weight'" not in result.message
    assert 0.005 < result.max_rel < 0.02  # 1 % of the gradient's scale


def test_a_step_with_an_optimizer_leaves_weights_and_optimizer_state_alone():
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        loss = net(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    step(torch.randn(5, 3))  # the user has trained a step: momentum buffers exist
    weights = {k: v.clone() for k, v in net.state_dict().items()}
    momentum = {k: v["momentum_buffer"].clone() for k, v in opt.state_dict()["state"].items()}
    session = fxviz.Session(step, (torch.randn(5, 3),))
    written = {n.args[0].target for n in session.current.gm.graph.nodes
               if str(n.target).startswith("aten.add_") and n.args[0].op == "get_attr"}
    assert {"0.weight", "2.bias"} <= written  # the update is in the graph, on named weights
    assert session.current.check.status == "match"  # every input from the same weights, both sides
    assert all(torch.equal(weights[k], v) for k, v in net.state_dict().items())
    state = opt.state_dict()["state"]
    assert all(torch.equal(momentum[k], state[k]["momentum_buffer"]) for k in momentum)


def test_gradients_a_step_returns_are_judged_as_gradients_after_a_pass():
    # conv bias before a training-mode BatchNorm: zero gradient in exact maths, rounding
    # noise once run_decompositions reorders the arithmetic
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
    session = fxviz.Session(train_step, (x, y))
    assert graph_info(session.current.gm).gradient_outputs == [()]  # the whole tuple of gradients
    step = session.apply("run_decompositions")
    assert step.check.status == "match", step.check.message


class _Block(nn.Module):  # resnet-ish: conv with bias -> training-mode BN -> relu, residual
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(x + self.bn(self.conv(x)))


def test_a_comparison_of_two_steps_judges_gradients_as_the_check_does():
    from types import SimpleNamespace

    from fxviz.checks.check import compare_outputs
    from fxviz.diff.comparison import compare

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), _Block(), _Block(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(4, 3))

    def step(x, y):
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        return loss

    session = fxviz.Session(step, (torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 2, 0])))
    assert graph_info(session.current.gm).gradient_outputs == [(1,)]  # the {name: gradient} dict
    after = session.apply("run_decompositions")
    diff = session.compare(0, 1).output_diff
    assert diff.status == "match", diff.message
    plain = [step.gm(*step.example_inputs) for step in session.steps]  # unmarked: no gradient floor
    assert compare_outputs([plain[0]], [plain[1]]).status == "mismatch"  # the conv biases' rounding noise
    # the floor hides no real error: one gradient 1 % off still differs

    def off(*args):
        loss, grads = after.gm(*args)
        return loss, {**grads, "5.weight": grads["5.weight"] * 1.01}

    broken = SimpleNamespace(gm=off, code="", example_inputs=after.example_inputs, index=2)
    result = compare(session.steps[0], broken).output_diff
    assert result.status == "mismatch" and "'5.weight'" in result.message and "'0.bias'" not in result.message


def test_the_loss_a_step_computes_gets_a_loss_cluster_and_its_backward_one():
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x):
            return self.lin(x).tanh()  # the model's own op at its top level, after its last module

    net = Head()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    gm = fxviz.trace(step, (torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])), tracer="make_fx")
    path = {n.name: n.meta.get("module_path") for n in gm.graph.nodes}
    assert path["tanh"] == ""  # the model's, not the loss's
    assert path["_log_softmax"] == path["nll_loss_forward"] == "loss"
    assert path["ones_like"] == path["nll_loss_backward"] == path["_log_softmax_backward_data"] == "loss · backward"
    assert path["tanh_backward"] == "backward" and path["mm"] == "lin · backward"  # tanh's: the model's top level
    updates = [n for n in gm.graph.nodes if str(n.target).startswith("aten.add_")]
    assert updates and all(path[n.name] != "loss" for n in updates)  # the optimizer's step is not the loss
    svg = fxviz.to_svg(gm, auto_collapse=False, show_weights=True)  # drawn as nodes (else listed on their ops)
    assert ">loss<" in svg and ">loss · backward<" in svg  # the clusters' titles


def test_a_dropped_training_step_session_frees_its_graph():
    """make_fx keeps its last traced graph (nodes, with values in their meta) in a module
    global; fxviz drops it, so a closed 30k-node session does not live on in torch."""
    import gc
    import weakref

    session = fxviz.Session(train_step, (torch.randn(2, 3, 8, 8), torch.tensor([0, 1])), tracer="make_fx")
    nodes = [weakref.ref(n) for n in session.current.gm.graph.nodes]
    del session
    gc.collect()
    assert len(nodes) > 50 and [n for n in nodes if n() is not None] == []

"""Where a step's numbers move (fxviz.checks.numerics): known answers per node, propagated and introduced."""
import copy
import math
import operator
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import fxviz
from fxviz.checks import numerics as numerics_module
from fxviz.capture import trace
from fxviz.diff.comparison import compare
from fxviz.draw.render import render


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.bn2(self.conv2(x)).relu_()
        return self.fc(x.mean((2, 3)))


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    model = Net().eval()
    for bn in (model.bn1, model.bn2):  # statistics that fusing changes the weights by
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(0.5, 2)
    return model, torch.randn(2, 3, 12, 12)


def step(index, gm, x):
    return SimpleNamespace(index=index, gm=gm, code=gm.code, example_inputs=(x,), pass_name=None)


def slipped(gm):
    """A user's pass with a bug: conv1's users read conv1 * 1.001."""
    gm = copy.deepcopy(gm)
    conv = next(n for n in gm.graph.nodes if n.name == "conv1")
    with gm.graph.inserting_after(conv):
        wrong = gm.graph.call_function(operator.mul, (conv, 1.001))
    conv.replace_all_uses_with(wrong, delete_user_cb=lambda user: user is not wrong)
    gm.recompile()
    return gm


def by_node(rows):
    return rows.set_index("node")


def test_a_slipped_error_is_found_where_it_starts_and_carried_to_the_output(net):
    model, x = net
    gm = trace(model)
    cmp = compare(step(0, gm, x), step(1, slipped(gm), x))
    rows = by_node(cmp.numerics)
    order = list(rows.index)
    assert cmp.first_divergence == "bn1"  # the first node that reads the slipped value
    assert rows.loc["conv1", "max_abs"] == 0 and rows.loc["x", "max_abs"] == 0  # nothing before it
    assert not rows.loc[order[:order.index("bn1")], "diverged"].any()
    assert rows.loc["mul", "counterpart"] == "" and math.isnan(rows.loc["mul", "max_rel"])  # the pass's own node
    assert rows.loc["bn1", "introduced"] > 1e-4 and rows.loc["bn1", "introduced"] == rows.loc["bn1", "max_rel"]
    after = order[order.index("bn1") + 1:]
    assert rows.loc[after, "diverged"].all()  # carried to the output, which the check judges so
    assert (rows.loc[after, "introduced"] < 1e-6).all()  # but none of them adds to it
    assert rows.loc["output", "max_rel"] == pytest.approx(cmp.output_diff.max_rel, rel=1e-3)
    assert 0.99 < rows.loc["output", "cosine"] < 1 and 20 < rows.loc["output", "sqnr_db"] < 100


def test_a_changed_weight_diverges_at_its_own_node(net):
    model, x = net
    gm = trace(model)
    changed = copy.deepcopy(gm)
    with torch.no_grad():
        changed.conv2.weight[0, 0, 0, 0] += 0.5
    rows = by_node(compare(step(0, gm, x), step(1, changed, x)).numerics)
    assert compare(step(0, gm, x), step(1, changed, x)).first_divergence == "conv2"
    assert rows.loc["conv2", "introduced"] == rows.loc["conv2", "max_rel"] > 1e-3
    assert rows.loc["bn2", "introduced"] < 1e-6 < rows.loc["bn2", "max_rel"]


def test_fuse_conv_bn_matches_every_node_and_fused_convs_stand_for_their_batchnorms(net):
    model, x = net
    session = fxviz.Session(model, x)
    session.apply("fuse_conv_bn")
    cmp = session.compare(0, 1)
    rows = by_node(cmp.numerics)
    assert cmp.first_divergence is None and not rows["diverged"].any()
    assert rows.loc["conv1", "counterpart"] == "bn1" and rows.loc["conv2", "counterpart"] == "bn2"
    assert (rows["counterpart"] != "").all() and (rows["max_rel"] < 1e-5).all()
    assert 0 < rows.loc["conv1", "max_abs"]  # rounding differs, within tolerance


def test_fake_quantize_error_grows_with_fewer_bits(net):
    model, x = net
    found = {}
    for bits in (8, 4):
        session = fxviz.Session(model, x)
        session.apply("fake_quantize", bits=bits)
        cmp = session.compare(0, 1)
        found[bits] = by_node(cmp.numerics)
        assert cmp.first_divergence == "bn1"
        assert found[bits].loc["fake_quant", "counterpart"] == ""
    for node in ("bn1", "bn2", "output"):
        assert found[4].loc[node, "max_rel"] > 4 * found[8].loc[node, "max_rel"] > 0
    assert found[4].loc["output", "sqnr_db"] < found[8].loc["output", "sqnr_db"] - 10


class InPlace(nn.Module):
    def forward(self, x):
        y = torch.relu_(x * 2)
        z = y.add_(1)
        w = torch.sigmoid(y) + z
        return w.mul_(3), y


def test_in_place_ops_and_tuple_outputs_compare_as_produced():
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    before = x.clone()
    gm = trace(InPlace())
    rows = compare(step(0, gm, x), step(1, copy.deepcopy(gm), x)).numerics
    assert (rows["max_abs"] == 0).all() and (rows["introduced"] == 0).all() and (rows["cosine"] == 1).all()
    assert x.equal(before) and not rows["diverged"].any()  # the user's input untouched


def test_values_are_freed_as_both_runs_go(monkeypatch):
    """A chain of 300 ops: the two runs never hold more than a few values at once."""
    class Chain(nn.Module):
        def forward(self, x):
            for i in range(300):
                x = torch.sin(x) if i % 2 else x * 1.5
            return x

    runs, held = [], []
    original = numerics_module._Lockstep.__init__

    def keep(self, *args):
        original(self, *args)
        runs.append(self)

    class Counting(TorchFunctionMode):  # at every op, the values both runs hold
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if runs:
                lockstep = runs[-1]
                held.append(sum(v is not None for v in (*lockstep.a.values, *lockstep.b.values)) + len(lockstep.kept))
            return func(*args, **(kwargs or {}))

    monkeypatch.setattr(numerics_module._Lockstep, "__init__", keep)
    gm = trace(Chain())
    x = torch.randn(3, 3)
    with Counting():
        rows = compare(step(0, gm, x), step(1, copy.deepcopy(gm), x)).numerics
    assert len(rows) == 302 and len(held) >= 600 and max(held) <= 4


def test_error_colour_mode_draws_the_relative_error(net):
    model, x = net
    gm = trace(model)
    cmp = compare(step(0, gm, x), step(1, slipped(gm), x))
    values = fxviz.draw.colour_modes.MODES["error"].data(cmp)
    assert "mul" not in values and values["output"] == cmp.numerics.set_index("node").loc["output", "max_rel"]
    drawn = render(fxviz.annotate(slipped(gm), (x,)), color_by="error", values=values)
    assert drawn.legend[-1]["label"] == f"error {max(values.values()):.3g}"


class Decomposed(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln, self.fc = nn.LayerNorm(8), nn.Linear(8, 4)

    def forward(self, x):
        return nn.functional.gelu(self.fc(self.ln(x))).softmax(-1)


def test_run_decompositions_is_matched_by_provenance():
    """Export's layer_norm becomes native_layer_norm + getitem, linear permute + addmm, the
    input is renamed: each of a's values is found where b gives it, the pieces in between have none."""
    torch.manual_seed(0)
    session = fxviz.Session(Decomposed().eval(), torch.randn(3, 8), tracer="export")
    session.apply("run_decompositions")
    cmp = session.compare(0, 1)
    rows = by_node(cmp.numerics)
    stands = rows.loc[rows["counterpart"] != "", "counterpart"].to_dict()
    assert {b: a for b, a in stands.items() if a != b} == {
        "args_0": "x", "getitem": "layer_norm", "addmm": "linear", "_softmax": "softmax"}
    assert rows.loc[["native_layer_norm", "permute"], "counterpart"].tolist() == ["", ""]
    assert cmp.first_divergence is None
    compared = rows[rows["counterpart"] != ""]
    assert compared["max_rel"].notna().all() and (compared["max_rel"] < 1e-6).all()


class TwoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def test_a_training_steps_gradients_are_compared_per_parameter():
    """fc2's weight changed: the gradients of fc2 (which do not read it) match, fc1's carry
    the change; b computes fc2's gradients first, then fc1's bias, then fc1's weight."""
    torch.manual_seed(0)
    model = TwoLayers()

    def train_step(x):
        return torch.autograd.grad(model(x).sum(), list(model.parameters()))

    session = fxviz.Session(train_step, (torch.randn(3, 4),), tracer="make_fx")
    gm = session.current.gm
    changed = copy.deepcopy(gm)
    with torch.no_grad():
        changed.fc2.weight[0, 0] += 0.5
    x = session.current.example_inputs[0]
    cmp = compare(step(0, gm, x), step(1, changed, x))
    gradients = cmp.numerics.attrs["gradients"]
    assert gradients["parameter"].tolist() == ["fc2.bias", "fc2.weight", "fc1.bias", "fc1.weight"]
    rows = gradients.set_index("parameter")
    assert (rows.loc[["fc2.bias", "fc2.weight"], "max_abs"] == 0).all()
    fc1 = rows.loc[["fc1.bias", "fc1.weight"]]
    assert fc1["diverged"].all() and (fc1["max_rel"] > 1e-3).all()
    assert cmp.first_gradient_divergence == "fc1.bias"
    assert compare(step(0, gm, torch.ones(3, 4)), step(1, copy.deepcopy(gm), torch.ones(3, 4))).first_gradient_divergence is None
    forward = trace(model)  # a forward returns no gradients: no rows
    assert compare(step(0, forward, torch.ones(1, 4)), step(1, forward, torch.ones(1, 4))).gradients.empty


def test_an_unchanged_node_on_unchanged_inputs_is_not_run_again(monkeypatch):
    """b inserts a scale after `counted`: counted itself is a's own op on a's own input, so it
    runs once per step and introduces nothing; sin reads the scaled value and is shadow-run.
    (The lockstep's runs: the float64 judgement of the diverged nodes, run after it, left out.)"""
    monkeypatch.setattr(numerics_module, "judge_rounding", lambda *_: None)
    calls = []

    def counted(x):
        calls.append(1)
        return x * 2

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.sin, (graph.call_function(counted, (x,)),)))
    gm_a = torch.fx.GraphModule(nn.Module(), graph)
    gm_b = copy.deepcopy(gm_a)
    node = next(n for n in gm_b.graph.nodes if n.name == "counted")
    with gm_b.graph.inserting_after(node):
        scaled = gm_b.graph.call_function(operator.mul, (node, 1.001))
    node.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled)
    gm_b.recompile()
    x = torch.randn(5)
    rows = by_node(compare(step(0, gm_a, x), step(1, gm_b, x)).numerics)
    assert len(calls) == 2 and rows.loc["counted", "introduced"] == 0 == rows.loc["counted", "max_abs"]
    assert rows.loc["sin", "introduced"] == rows.loc["sin", "max_rel"] > 0  # its error starts at its input


def test_small_values_wait_within_the_budget(monkeypatch):
    """A chain of 2,000 small ops: values wait to be compared in batches, never more than the budget."""
    from fxviz.checks import _numerics_stats as stats_module

    class Chain(nn.Module):
        def forward(self, x):
            for _ in range(1000):
                x = torch.tanh(x * 1.01)
            return x

    waited = []
    original = stats_module.Stats.flush

    def flush(self):
        waited.append((len(self.pending), sum(item[1].numel() for item in self.pending)))
        original(self)

    monkeypatch.setattr(stats_module.Stats, "flush", flush)
    gm = trace(Chain())
    x = torch.randn(8, 100)  # 800 elements a value: the budget of elements, not the count, ends a batch
    rows = compare(step(0, gm, x), step(1, copy.deepcopy(gm), x)).numerics
    assert len(rows) == 2002 and (rows["max_abs"] == 0).all()
    assert max(count for count, _ in waited) == stats_module.PENDING // 800 + 1
    assert all(count <= stats_module.BATCH and size <= stats_module.PENDING + 800 for count, size in waited)


def test_gradients_left_in_grad_are_named_by_their_parameters():
    """A step that calls backward() returns {parameter: gradient}: the rows take those names."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def train_step(x):
        model(x).sum().backward()

    x = torch.randn(3, 4)
    gm = fxviz.Session(train_step, (x,), tracer="make_fx").current.gm
    changed = copy.deepcopy(gm)
    with torch.no_grad():
        dict(changed.named_parameters())["2.weight"][0, 0] += 0.5
    cmp = compare(step(0, gm, x), step(1, changed, x))
    rows = cmp.gradients.set_index("parameter")
    assert sorted(rows.index) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert not rows.loc[["2.bias", "2.weight"], "diverged"].any() and rows.loc[["0.bias", "0.weight"], "diverged"].all()
    assert cmp.first_gradient_divergence in ("0.bias", "0.weight")


class FunctionalInPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)

    def forward(self, x):
        return nn.functional.relu(self.bn1(self.conv1(x)), inplace=True)  # writes bn1's output


def test_a_value_is_compared_before_a_functional_in_place_op_writes_it():
    torch.manual_seed(0)
    model = FunctionalInPlace().eval()
    x = torch.randn(2, 3, 12, 12)
    gm = trace(model)
    rows = by_node(compare(step(0, gm, x), step(1, slipped(gm), x)).numerics)
    with torch.no_grad():
        a = model.bn1(model.conv1(x))
        b = model.bn1(model.conv1(x) * 1.001)
    sqnr = 10 * torch.log10(a.square().sum() / (b - a).square().sum())
    assert rows.loc["bn1", "max_abs"] == pytest.approx((b - a).abs().max().item(), rel=1e-4)
    assert rows.loc["bn1", "sqnr_db"] == pytest.approx(sqnr.item(), rel=1e-4)
    assert rows.loc["relu", "introduced"] == 0 < rows.loc["relu", "max_rel"]

"""Heavy models open sooner (bench/heavy_open.py): make_fx's fake copies in one mode, its code made
once on first use, a training step drawn from its shapes, and the check's one-pass leaf error
giving what the exact path gives."""
import math
import operator
import threading

import pytest
import torch
from torch import nn
from torch.fx.experimental import proxy_tensor

import fxviz
from fxviz.annotation.known_shapes import NOT_RUN, known_notes
from fxviz.capture import capture
from fxviz.checks.check import _leaf_error, compare_outputs, run_outputs
from fxviz.checks._peaks import finite_error, peak


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.bn(self.conv(x)).relu().mean((2, 3)))


def _step(model):
    def train_step(x):
        loss = model(x).pow(2).mean()
        return loss, torch.autograd.grad(loss, list(model.parameters()))
    return train_step


def test_make_fx_values_share_one_fake_mode_and_torch_is_left_as_it_was():
    torch_mode = proxy_tensor.FakeTensorMode
    gm = capture(_Net().eval(), (torch.randn(2, 3, 8, 8),), tracer="make_fx").gm
    modes = {id(n.meta["val"].fake_mode) for n in gm.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)}
    assert len(modes) == 1
    assert proxy_tensor.FakeTensorMode is torch_mode
    with pytest.raises(fxviz.errors.TraceError):  # a failed trace restores it too
        capture(lambda x: x[: int(x.sum() > 0) + 1].nonzero().sum().item() * x, (torch.randn(3),), tracer="make_fx")
    assert proxy_tensor.FakeTensorMode is torch_mode


def test_make_fx_code_made_on_first_use_names_parameters_and_inputs_and_runs():
    model, x = _Net().eval(), torch.randn(2, 3, 8, 8)
    gm = capture(model, (x,), tracer="make_fx").gm
    assert "conv_weight = self.conv.weight" in gm.code and "def forward(self, x)" in gm.code
    torch.testing.assert_close(gm(x), model(x))


def test_a_training_steps_graph_is_drawn_from_its_shapes_and_the_check_runs_it():
    model, x = _Net().train(), torch.randn(2, 3, 8, 8)
    gm = capture(_step(model), (x,), tracer="make_fx").gm
    unreturned = [n for n in gm.graph.nodes if n.target is operator.getitem and n.meta["val"] is None]
    assert unreturned  # convolution_backward's bias gradient (the conv has none)
    assert known_notes(gm, (x,)) is not None
    assert capture(_step(model), (x,)).first_run[0] is NOT_RUN  # auto opens it with make_fx, without a run
    assert fxviz.Session(_step(model), x).current.check.status == "match"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_the_one_pass_leaf_error_is_the_exact_paths(dtype):
    torch.manual_seed(0)
    e = torch.randn(1000, dtype=torch.float64).mul(100).to(dtype)
    a = (e.to(torch.float64) + torch.randn(1000, dtype=torch.float64) * 1e-3).to(dtype)
    exact = float((e.to(torch.float64) - a.to(torch.float64)).abs().max())
    assert finite_error(e, a) == pytest.approx(exact, rel=1e-7)
    assert peak(e) == float(e.to(torch.float64).abs().max())
    assert _leaf_error(e, a)[:2] == (finite_error(e, a), peak(e))


def test_nan_inf_and_overflow_take_the_exact_path():
    e = torch.tensor([1.0, float("nan"), float("inf"), 2.0])
    assert finite_error(e, e.clone()) is None
    assert _leaf_error(e, e.clone())[0] == 0.0  # same places, same values
    assert _leaf_error(e, torch.tensor([1.0, 0.0, float("inf"), 2.0]))[0] == math.inf
    big = torch.tensor([3e38, -3e38])
    assert finite_error(big, -big) is None  # 6e38 is past float32's range: the float64 path measures it
    assert _leaf_error(big, -big)[0] == pytest.approx(6e38, rel=1e-6)
    assert compare_outputs([big], [-big]).status == "mismatch"


def test_gradients_floor_reads_the_largest_gradient_without_copies():
    grads = (torch.tensor([1.0, -50.0]), torch.tensor([1e-3, 2e-3]))
    off = (grads[0], grads[1] + 4e-4)  # 4e-4 is under 1e-4 of the floor (0.1 x 50 = 5): a match
    result = compare_outputs([(torch.tensor(1.0), grads)], [(torch.tensor(1.0), off)])
    assert result.status == "mismatch"  # a plain tuple is no gradient list: judged on its own scale
    from fxviz.checks.check import GradientTuple

    marked = compare_outputs([(torch.tensor(1.0), GradientTuple(grads))], [(torch.tensor(1.0), off)])
    assert marked.status == "match" and marked.max_abs == pytest.approx(4e-4, rel=1e-5)
    assert peak(torch.tensor([1.0, -50.0])) == 50.0


def test_runs_share_one_copy_of_the_weights_and_each_starts_from_them():
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)).train()
    opt = torch.optim.Adam(net.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = net(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss, net[0].weight.detach().clone(), net[1].running_mean.clone()

    x = torch.randn(5, 3)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    runs = run_outputs(step, [(x,), (x,), (x,)])
    for later in runs[1:]:  # weights, statistics and Adam's moments as before each run: the same outputs
        assert all(torch.equal(a, b) for a, b in zip(runs[0], later))
    assert not torch.equal(runs[0][1], before["0.weight"])  # the step did update them
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items()) and not opt.state_dict()["state"]


def test_the_shared_fake_mode_is_the_tracing_threads_alone():
    from fxviz._torch_internals.real_trace import one_fake_mode

    with one_fake_mode():
        ours = proxy_tensor.FakeTensorMode(allow_fallback_kernels=True)
        assert proxy_tensor.FakeTensorMode(allow_fallback_kernels=True) is ours
        assert proxy_tensor.FakeTensorMode(allow_fallback_kernels=False) is not ours  # make_fx's own modes
        other: list = []
        thread = threading.Thread(target=lambda: other.append(proxy_tensor.FakeTensorMode(allow_fallback_kernels=True)))
        thread.start()
        thread.join()
        assert other[0] is not ours  # a background job's trace makes its own
        with one_fake_mode():  # nested: a mode of its own, then the outer one again
            assert proxy_tensor.FakeTensorMode(allow_fallback_kernels=True) is not ours
        assert proxy_tensor.FakeTensorMode(allow_fallback_kernels=True) is ours

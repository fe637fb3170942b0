"""A step that fails the float32 check is judged again against a float64 run of the model:
float32's own rounding is not a mismatch, a real error still is."""
import torch
from torch import nn

import fxviz
from fxviz.checks import scope
from fxviz.checks.check import compare_outputs, run_outputs
from fxviz.checks.truth import against_float64, float64_outputs


class TwoScales(nn.Module):
    """A training step's parameters: ``a``'s gradient is a sum of 1000 terms each rounded to
    float32's grid at 1024 (3e-4 to 1e-3 off in float32, 0 in float64), a few % of ``w``'s."""

    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.tensor(1.0))
        self.w = nn.Parameter(torch.ones(1000))


def training_step(model: TwoScales, check_dtype: bool = False):
    def step(x):
        rounded = (x + 1024.0) - 1024.0
        if check_dtype and rounded.dtype != torch.float32:  # a float32-only kernel
            raise TypeError("float32 only")
        loss = model.a * (rounded.sum() - x.sum()) + 1e-2 * (model.w * x).sum()
        return loss, torch.autograd.grad(loss, [model.a, model.w])
    return step


def flip_sums(gm):
    """Sums in the other order: the same in real numbers, other float32 rounding."""
    for node in list(gm.graph.find_nodes(op="call_function", target=torch.ops.aten.sum.default)):
        with gm.graph.inserting_before(node):
            flipped = gm.graph.call_function(torch.ops.aten.flip.default, (node.args[0], [0]))
        node.replace_input_with(node.args[0], flipped)
    gm.recompile()
    return gm


def scaling_gradient(which: int, scale: float = 1.0, shift: float = 0.0):
    """A pass that changes the returned gradient ``which`` (after flipping the sums)."""
    def wrong_gradient(gm):
        flip_sums(gm)
        output = gm.graph.find_nodes(op="output")[0]
        loss, grads = output.args[0]
        with gm.graph.inserting_before(output):
            changed = gm.graph.call_function(torch.ops.aten.add.Tensor, (
                gm.graph.call_function(torch.ops.aten.mul.Tensor, (grads[which], scale)), shift))
        output.args = ((loss, tuple(changed if i == which else g for i, g in enumerate(grads))),)
        gm.recompile()
        return gm
    return wrong_gradient


def session(step=None):
    torch.manual_seed(0)
    return fxviz.Session(step or training_step(TwoScales()), (torch.randn(1000),), tracer="make_fx")


def test_a_gradient_float32_cannot_resolve_matches_within_float32s_own_error_against_float64():
    s = session()
    s.apply(flip_sums)
    outputs = run_outputs(s.current.gm, s.current.check_inputs)
    float32 = compare_outputs(s._reference(), outputs)
    assert float32.status == "mismatch" and "output[1][0]" in float32.message  # beyond the gradient floor
    check = s.current.check
    assert check.status == "match", check.message
    assert check.message.startswith("outputs match within float32's own error against float64 (inputs tried: 3)")
    assert "output[1][0]" in check.message and "float32 eager's own error is up to" in check.message


def test_a_one_percent_error_in_a_large_gradient_is_still_a_mismatch_that_float64_confirms():
    s = session()
    s.apply(scaling_gradient(1, scale=1.01))
    check = s.current.check
    assert check.status == "mismatch"
    assert "Not float32's rounding: input 0: output[1][1]" in check.message


def test_an_error_in_the_gradient_float32_cannot_resolve_is_still_caught():
    """0.005 added to ``a``'s gradient: 10x float32's own error there, a sixth of the largest gradient."""
    s = session()
    s.apply(scaling_gradient(0, shift=5e-3))
    check = s.current.check
    assert check.status == "mismatch" and "Not float32's rounding" in check.message
    assert "output[1][0]" in check.message


def test_the_float64_run_happens_only_after_a_mismatch(monkeypatch):
    calls = []
    monkeypatch.setattr(scope, "float64_outputs", lambda *a: calls.append(1) or float64_outputs(*a))
    s = session()
    assert s.current.check.status == "match" and not calls
    s.apply(flip_sums)
    assert s.current.check.status == "match" and len(calls) == 1


def test_a_model_that_cannot_run_in_float64_keeps_the_float32_verdict():
    s = session(training_step(TwoScales(), check_dtype=True))
    s.apply(flip_sums)
    float32 = compare_outputs(s._reference(), run_outputs(s.current.gm, s.current.check_inputs))
    check = s.current.check
    assert (check.status, check.message) == ("mismatch", float32.message)


class Noisy(nn.Module):
    """Draws random numbers (dropout, randn_like) and updates BatchNorm statistics in training."""

    def __init__(self):
        super().__init__()
        self.lin, self.norm, self.drop = nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Dropout(0.5)

    def forward(self, x):
        h = self.drop(self.norm(self.lin(x)))
        return h + 0.1 * torch.randn_like(h)


def test_the_float64_run_draws_the_same_numbers_and_leaves_model_and_inputs_as_they_were():
    torch.manual_seed(0)
    model, inputs = Noisy().train(), [(torch.randn(16, 8),)]
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    given = inputs[0][0].clone()
    again, wide = float64_outputs(model, inputs)
    assert wide[0].dtype == torch.float64
    assert torch.equal(again[0], run_outputs(model, inputs)[0])
    assert (wide[0] - again[0].double()).abs().max() < 1e-5  # the same dropout mask and noise
    assert all(torch.equal(v, saved[k]) and v.dtype == saved[k].dtype for k, v in model.state_dict().items())
    assert torch.equal(inputs[0][0], given)


class Decides(nn.Module):
    """Which elements survive depends on rounding: x / 3 * 3 == x holds for other elements in float64."""

    def forward(self, x):
        return torch.where(x / 3 * 3 == x, x, -x)


def test_a_float64_run_that_decides_otherwise_is_no_reference():
    torch.manual_seed(0)
    assert float64_outputs(Decides(), [(torch.randn(1000),)]) is None
    assert float64_outputs(Decides(), [(torch.tensor([1.0, 2.0]),)]) is not None


class Drifts(nn.Module):
    """Each call computes a little otherwise (a Python counter): a float64 run of it is another computation."""

    calls = 0

    def forward(self, x):
        self.calls += 1
        return x * (1 + 1e-3 * self.calls)


def test_a_model_that_computes_otherwise_on_each_call_keeps_the_float32_verdict():
    check = fxviz.Session(Drifts(), torch.randn(3, 4)).current.check
    assert check.status == "mismatch" and "float64" not in check.message


def test_outputs_already_in_float64_are_not_run_again():
    expected = [torch.linspace(-1, 1, 8, dtype=torch.float64)]
    actual = [expected[0] * 1.01]
    result = compare_outputs(expected, actual)
    calls = []
    assert against_float64(result, expected, actual, lambda: calls.append(1)) is result and not calls


def test_a_convolutional_model_runs_in_float64_though_conv2d_checks_its_dtypes():
    """conv2d refuses a float64 input beside a float32 weight above the dispatch mode: the call is made again widened."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 2, 1)).train()
    inputs = [(torch.randn(2, 3, 8, 8),)]
    again, wide = float64_outputs(model, inputs)
    assert wide[0].dtype == torch.float64 and (wide[0] - again[0].double()).abs().max() < 1e-5
    assert all(p.dtype == torch.float32 for p in model.parameters())

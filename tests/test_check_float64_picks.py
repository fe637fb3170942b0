"""The check's float64 run takes float32's picks and widens the model's own casts to float32.

0.1 + 0.2 ties 0.3 in float32 and falls short of it in float64 (as float32 holds the three):
an op that picks among them picks the first in float32 and the other in float64. That is a
tie float32 rounded into, not another computation: the float64 run reads its values at
float32's picks, and has a judgement where it used to decline (an MoE's top-k routing, an
argmax over logits)."""
import pytest
import torch
from fxviz.checks.truth import float64_outputs

TIED = torch.tensor([0.1, 0.2, 0.3])


def _tie(v: torch.Tensor) -> torch.Tensor:
    return torch.stack([v[0] + v[1], v[2]])


PICKERS = {
    "argmax": lambda v: (torch.argmax(_tie(v)), _tie(v)[torch.argmax(_tie(v))]),
    "topk": lambda v: tuple(torch.topk(_tie(v), 1)),
    "sort": lambda v: tuple(torch.sort(_tie(v), descending=True, stable=True)),
    "max over a dim": lambda v: tuple(torch.max(_tie(v).reshape(1, 2), dim=1)),
    "kthvalue, keepdim": lambda v: tuple(torch.kthvalue(-_tie(v).reshape(1, 2), 1, dim=1, keepdim=True)),
}


@pytest.mark.parametrize("name", PICKERS)
def test_float64_picks_as_float32_did_on_a_tie_float32_rounded_into(name):
    assert TIED.dtype == torch.float32 and float(TIED[0] + TIED[1]) == float(TIED[2])  # the tie, in float32
    assert float(TIED[0].double() + TIED[1].double()) < float(TIED[2].double())  # broken in float64
    runs = float64_outputs(PICKERS[name], [(TIED,)])
    assert runs is not None, "the float64 run declined: it picked otherwise than float32"
    (narrow,), (wide,) = runs
    indices = [t for t in narrow if not t.is_floating_point()]
    assert indices and all(torch.equal(a, b) for a, b in zip(indices, [t for t in wide if not t.is_floating_point()]))
    values = [t for t in wide if t.is_floating_point()]
    assert values and all(t.dtype == torch.float64 for t in values)
    # the pick's value is float64's of element 0 (0.1 + 0.2), below 0.3 as float32 holds it
    assert float(values[0].reshape(-1)[0].abs()) == pytest.approx(float(TIED[0].double() + TIED[1].double()), abs=0)


def test_a_cast_to_float32_the_model_makes_widens_in_the_float64_run():
    """``x.float()`` (an RMSNorm's upcast) rounded the float64 run to float32 there: its
    reference was no better than float32 at every such layer."""
    runs = float64_outputs(lambda v: (v / 3).float() * 3, [(TIED,)])
    (wide,) = runs[1]
    assert wide.dtype == torch.float64 and torch.equal(wide, TIED.double() / 3 * 3)


def test_a_cast_to_half_the_model_makes_still_rounds_as_in_float32():
    runs = float64_outputs(lambda v: (v / 3).half() * 3, [(TIED,)])
    (narrow,), (wide,) = runs
    assert torch.equal(wide.double(), (TIED.double() / 3).half().double() * 3)


def test_autograd_still_casts_a_gradient_to_its_weights_dtype_in_the_float64_run():
    w = torch.ones(3, requires_grad=True)

    def step(v):
        y = ((v * w) / 3).float().mul(3).sum()
        return y, torch.autograd.grad(y, [w])

    runs = float64_outputs(step, [(TIED,)])
    (loss, (grad,)), = runs[1]
    assert loss.dtype == torch.float64 and float(loss) == float((TIED.double() / 3 * 3).sum())
    assert grad.dtype == torch.float32 and w.grad is None

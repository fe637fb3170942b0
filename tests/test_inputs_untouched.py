"""A model that writes into its inputs: the user's example is never changed, and every run
that is compared starts from the inputs as given (it read "mismatch: max abs error 2", each
run one more add_ along, and the user's tensor ended 9 higher)."""
import pytest
import torch
from torch import nn

import fxviz


class AddsToInput(nn.Module):
    def forward(self, x):
        x.add_(1)
        return x * 2


class ReturnsInput(nn.Module):
    """Its output is the input it wrote: a copy put back afterwards would change the output."""

    def forward(self, x):
        return torch.relu_(x)


@pytest.mark.parametrize("tracer", ["symbolic", "make_fx", "export"])
@pytest.mark.parametrize("model", [AddsToInput, ReturnsInput])
def test_a_model_writing_into_its_input_matches_and_leaves_the_users_tensor(model, tracer):
    x = torch.randn(3, 4)
    given = x.clone()
    session = fxviz.Session(model(), x, tracer=tracer)
    check = session.current.check
    assert check.status == "match", check.message
    session.current.profile(budget_s=0.1)
    assert torch.equal(x, given)
    numerics = session.compare(0, 0).numerics
    assert not numerics["diverged"].any()  # each side on its own copy of the inputs
    assert torch.equal(x, given)


def test_a_training_step_on_inputs_that_require_grad_still_gets_their_gradient():
    w = torch.randn(4, requires_grad=True)

    def step(x):
        loss = (x * w).sum()
        return loss, torch.autograd.grad(loss, [x, w])

    x = torch.randn(4, requires_grad=True)
    session = fxviz.Session(step, x)
    assert session.current.check.status == "match", session.current.check.message
    assert x.grad is None and w.grad is None

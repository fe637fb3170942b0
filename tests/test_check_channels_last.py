"""A training step converted to channels_last is judged against float64 as the model ran:
the model's float32 rerun on its own (contiguous) inputs, and float32 eager's own error the
larger of its contiguous and channels-last runs (BatchNorm at 1x1 maps in training rounds
otherwise in channels-last: a conv bias whose exact gradient is zero gets 35x the noise)."""
import pytest
import torch
from torch import nn

import fxviz


def _session(seed: int) -> fxviz.Session:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          *[m for _ in range(6) for m in (nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8), nn.ReLU())],
                          nn.Flatten(), nn.Linear(8, 3)).train()
    names = [n for n, _ in model.named_parameters()]

    def step(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        return loss, dict(zip(names, torch.autograd.grad(loss, list(model.parameters()))))

    return fxviz.Session(step, (torch.randn(2, 3, 4, 4), torch.tensor([0, 1])))


@pytest.mark.parametrize("seed", [1, 9])
def test_a_channels_last_training_step_matches_within_float32s_own_error(seed):
    """Both read "mismatch" while the float64 run took the converted inputs (its float32 rerun was
    not the reference, so float64 was not asked); seed 9 still did with eager's own error the
    contiguous run's alone."""
    session = _session(seed)
    assert session.current.check.status == "match"
    check = session.apply("channels_last").check
    assert check.status == "match", check.message
    assert "within float32's own error against float64" in check.message  # beyond tolerance against float32 eager


def test_float64_pools_where_float32_picked_on_a_tie_float32_rounded_into():
    """0.1 + 0.2 ties 0.3 in float32 and falls short of it in float64: the float64 run picked the
    other element, a decision float32 did not take, and had no judgement (resnet34's stem at 224x224)."""
    from fxviz.checks.truth import float64_outputs

    w = torch.ones(3, requires_grad=True)

    def step(v):
        pooled = nn.functional.max_pool2d(torch.stack([v[0] * w[0] + v[1] * w[1], v[2] * w[2]]).reshape(1, 1, 1, 2), (1, 2))
        return pooled, torch.autograd.grad(pooled.sum(), [w])

    runs = float64_outputs(step, [(torch.tensor([0.1, 0.2, 0.3]),)])
    assert runs is not None
    (_, (narrow,)), (pooled, (wide,)) = runs[0][0], runs[1][0]
    assert wide.dtype == torch.float64 and torch.equal(wide, narrow.double()) and float(wide[2]) == 0.0  # as float32 routed it
    assert float(pooled) < float(torch.tensor(0.3).double())  # float64 of the pick (0.1 + 0.2), below 0.3 as float32 holds it

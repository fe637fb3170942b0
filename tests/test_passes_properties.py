"""Property: on any stack of conv/BN/ReLU/linear layers, fusion and lowering keep outputs."""
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from fxviz.checks.check import check_outputs
from fxviz.passes import NothingToDo, get
from fxviz.capture import trace

IMAGE_LAYERS = st.lists(st.sampled_from(["conv", "bn", "relu"]), max_size=6)
VECTOR_LAYERS = st.lists(st.sampled_from(["linear", "bn", "relu"]), max_size=5)


def build(image_layers: list[str], vector_layers: list[str], width: int, seed: int) -> nn.Module:
    """A Sequential of the given layers (eval mode, random BN statistics)."""
    torch.manual_seed(seed)
    image = {"conv": lambda: nn.Conv2d(width, width, 3, padding=1, bias=bool(seed % 2)),
             "bn": lambda: nn.BatchNorm2d(width), "relu": nn.ReLU}
    vector = {"linear": lambda: nn.Linear(width * 16, width * 16),
              "bn": lambda: nn.BatchNorm1d(width * 16), "relu": nn.ReLU}
    model = nn.Sequential(*(image[k]() for k in image_layers), nn.Flatten(), *(vector[k]() for k in vector_layers))
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.25, 4)
            m.weight.data.uniform_(-2, 2)
            m.bias.data.uniform_(-1, 1)
    return model.eval()


def has_pair(layers: list[str], first: str) -> bool:
    return any(a == first and b == "bn" for a, b in zip(layers, layers[1:]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(IMAGE_LAYERS, VECTOR_LAYERS, st.integers(1, 3), st.integers(0, 1000))
def test_fusion_then_lowering_preserves_outputs(image_layers, vector_layers, width, seed):
    model = build(image_layers, vector_layers, width, seed)
    x = torch.randn(3, width, 4, 4, generator=torch.Generator().manual_seed(seed))
    gm = trace(model)
    try:
        gm = get("fuse_conv_bn")(gm).graph_module
        fused = True
    except NothingToDo:
        fused = False
    assert fused == (has_pair(image_layers, "conv") or has_pair(vector_layers, "linear"))
    gm = get("lower_modules")(gm, types=("ReLU", "Flatten")).graph_module
    assert all(isinstance(m, (nn.Conv2d, nn.BatchNorm2d, nn.BatchNorm1d, nn.Linear)) for m in gm.children())
    # A ReLU can zero the whole output: then there is no scale to compare against.
    expected = "match" if model(x).any() else "nothing compared"
    assert check_outputs(model, gm, [(x,)]).status == expected

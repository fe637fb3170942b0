"""fuse_conv_bn: the tutorial's facts and the edge cases of folding BatchNorm."""
import pytest
import torch
from torch import nn

from fxviz.checks.check import check_outputs
from fxviz.errors import PassError
from fxviz.passes import NothingToDo, fuse_conv_bn, get
from fxviz.capture import trace

FUSE = get("fuse_conv_bn")


def randomize_bn(model: nn.Module) -> nn.Module:
    """Non-trivial running statistics and affine parameters, so that a wrong fold shows."""
    torch.manual_seed(0)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            if m.affine:
                m.weight.data.uniform_(0.5, 2)
                m.bias.data.uniform_(-1, 1)
    return model.eval()


class WrappedBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(1)

    def forward(self, x):
        return self.bn(x)


class TutorialToy(nn.Module):
    """conv1 -> bn1 -> conv2 -> Sequential(BN, Conv) -> a module wrapping a BN."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 1, 1)
        self.bn1 = nn.BatchNorm2d(1)
        self.conv2 = nn.Conv2d(1, 1, 1)
        self.nested = nn.Sequential(nn.BatchNorm2d(1), nn.Conv2d(1, 1, 1))
        self.wrapped = WrappedBN()

    def forward(self, x):
        return self.wrapped(self.nested(self.conv2(self.bn1(self.conv1(x)))))


def fused(model: nn.Module, **kwargs) -> torch.fx.GraphModule:
    return FUSE(trace(model), **kwargs).graph_module


def bn_nodes(gm: torch.fx.GraphModule) -> list[str]:
    return [n.name for n in gm.graph.find_nodes(op="call_module")
            if isinstance(gm.get_submodule(n.target), nn.modules.batchnorm._BatchNorm)]


def test_tutorial_toy_model_loses_all_three_batchnorms_and_still_matches():
    model, x = randomize_bn(TutorialToy()), torch.randn(2, 1, 8, 8)
    gm = fused(model)
    assert len(bn_nodes(trace(model))) == 3
    assert bn_nodes(gm) == []
    assert "bn" not in gm.code
    assert check_outputs(model, gm, [(x,)]).status == "match"


def test_conv_nodes_keep_their_names():
    model = randomize_bn(TutorialToy())
    names = [n.name for n in fused(model).graph.nodes]
    assert names == ["x", "conv1", "conv2", "nested_1", "output"]


def test_resnet18_has_no_batchnorm_left(resnet18, small_image):
    gm = fused(resnet18)
    assert bn_nodes(gm) == []
    assert not any(isinstance(m, nn.BatchNorm2d) for m in gm.modules())
    assert check_outputs(resnet18, gm, [(small_image,)]).status == "match"


@pytest.mark.parametrize(
    "layer, bn, shape",
    [
        (nn.Conv1d(3, 4, 3), nn.BatchNorm1d(4), (2, 3, 9)),
        (nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), (2, 3, 9, 9)),
        (nn.Conv3d(3, 4, 3), nn.BatchNorm3d(4), (2, 3, 5, 5, 5)),
        (nn.Linear(3, 4), nn.BatchNorm1d(4), (5, 3)),
        (nn.Linear(3, 4, bias=False), nn.BatchNorm1d(4, affine=False), (5, 3)),
    ],
    ids=["conv1d", "conv2d-no-bias", "conv3d", "linear", "linear-no-bias-bn-no-affine"],
)
def test_each_supported_pair_folds_and_matches(layer, bn, shape):
    model = randomize_bn(nn.Sequential(layer, bn))
    x = torch.randn(shape)
    gm = fused(model)
    assert bn_nodes(gm) == []
    assert gm.get_submodule("0").bias is not None
    assert check_outputs(model, gm, [(x,)]).status == "match"


def test_the_models_own_layers_are_left_alone():
    model = randomize_bn(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)))
    weight = model[0].weight.detach().clone()
    gm = fused(model)
    assert gm.get_submodule("0") is not model[0]
    assert torch.equal(model[0].weight, weight)
    assert isinstance(model[1], nn.BatchNorm2d)


class TwoUsers(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)
        self.bn = nn.BatchNorm2d(3)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


def test_a_conv_whose_output_has_two_users_is_skipped_with_the_reason():
    with pytest.raises(NothingToDo, match=r"no BatchNorm can be folded: the layer's output has 2 users \(bn\)"):
        fused(randomize_bn(TwoUsers()))


def test_a_conv_whose_weight_is_read_elsewhere_is_skipped():
    class ReadsWeight(TwoUsers):
        def forward(self, x):
            return self.bn(self.conv(x)) + self.conv.weight.sum()

    with pytest.raises(NothingToDo, match="the weights of 'conv' are also read directly"):
        fused(randomize_bn(ReadsWeight()))


def test_batchnorm_without_a_conv_before_it_is_nothing_to_do():
    model = nn.Sequential(nn.ReLU(), nn.BatchNorm2d(3)).eval()
    with pytest.raises(NothingToDo, match="no BatchNorm can be folded: after ReLU, not a layer it folds into"):
        fused(model)


def test_an_aten_graph_in_training_mode_says_why_it_cannot_fold():
    # (eval-mode ATen graphs fold: tests/test_passes_fusion_functional.py)
    model = randomize_bn(nn.Sequential(nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3))).train()
    with pytest.raises(NothingToDo, match=r"training mode \(batch statistics\): call model.eval\(\) first"):
        FUSE(trace(model, (torch.randn(1, 3, 4, 4),), tracer="make_fx"))


def test_batchnorm_without_running_statistics_is_skipped():
    model = nn.Sequential(nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3, track_running_stats=False)).eval()
    with pytest.raises(NothingToDo, match="no running statistics: track_running_stats=False"):
        fused(model)


def test_training_mode_is_refused_naming_the_module():
    model = nn.Sequential(nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3)).train()
    message = r"needs eval mode, but module '0' \(node '_0', Conv2d\) is in training mode; call model.eval\(\)"
    with pytest.raises(PassError, match=message):
        fused(model)


def test_a_selection_folds_only_the_selected_pair():
    model = randomize_bn(TutorialToy())
    gm = fused(model, nodes=["conv1"])
    assert bn_nodes(gm) == ["nested_0", "wrapped_bn"]


def test_the_pass_function_is_the_registered_one():
    assert FUSE.fn is fuse_conv_bn
    assert (FUSE.preserves_semantics, FUSE.needs_eval, FUSE.targets_nodes) == (True, True, True)

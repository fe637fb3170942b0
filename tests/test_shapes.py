import torch

import fxviz


def test_channels_last_strides_and_memory_format(resnet18):
    x = torch.randn(10, 3, 16, 16).to(memory_format=torch.channels_last)
    g = fxviz.to_networkx(fxviz.annotate(fxviz.trace(resnet18), x))
    assert g.nodes["x"]["stride"] == (768, 1, 48, 3)
    assert g.nodes["x"]["memory_format"] == "channels_last"
    assert g.nodes["conv1"]["memory_format"] == "channels_last"
    assert g.nodes["flatten"]["memory_format"] == "contiguous"


def test_conv_flops_match_the_formula(resnet18, small_image):
    g = fxviz.to_networkx(fxviz.annotate(fxviz.trace(resnet18), small_image))
    # conv1: 64 out channels, 3x7x7 kernel, 32x32 output positions, 2 FLOPs per MAC
    assert g.nodes["conv1"]["macs"] == 64 * 3 * 7 * 7 * 32 * 32
    assert g.nodes["conv1"]["flops"] == 2 * g.nodes["conv1"]["macs"]
    assert g.nodes["relu"]["flops"] == 0


def test_annotate_restores_training_mode_batchnorm_statistics():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fxviz.annotate(fxviz.trace(model), torch.randn(2, 3, 8, 8))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_a_failing_node_is_named(my_module):
    import pytest

    with pytest.raises(fxviz.FxvizError, match="node 'add'.*shapes"):
        fxviz.annotate(fxviz.trace(my_module), torch.randn(3, 7))

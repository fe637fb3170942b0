"""Models on the meta device: graph, shapes and FLOPs without weights; check and timing say why not."""
import math

import pytest
import torch
from torch import nn

import fxviz
from fxviz.errors import FxvizError


def test_meta_model_opens_with_shapes_and_flops_and_says_it_needs_real_tensors():
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4096, 8192), nn.GELU(), nn.Linear(8192, 4096))
        x = torch.randn(8, 4096)
    session = fxviz.Session(model, x)
    graph = session.current.graph
    first = graph.nodes["_0"]
    assert first["shape"] == (8, 8192)
    assert first["flops"] == 2 * 8 * 4096 * 8192
    assert session.real_tensors is False
    check = session.current.check
    assert check.status == "not checked" and "needs real tensors" in check.message and math.isnan(check.max_abs)
    with pytest.raises(FxvizError, match="Cannot time this step: needs real tensors"):
        session.current.profile()


def _fake_convnet():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():  # no memory behind any tensor: shapes and dtypes only
        model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
        x = torch.randn(2, 3, 16, 16, dtype=torch.float32)
    return model, x


@pytest.mark.parametrize("tracer", ["auto", "export", "make_fx"])
def test_a_fake_tensor_model_opens_with_shapes_dtypes_and_flops(tracer):
    model, x = _fake_convnet()
    session = fxviz.Session(model, x, tracer=tracer)
    assert session.real_tensors is False
    conv = next(d for _, d in session.current.graph.nodes(data=True) if d["flops"])
    assert conv["shape"] == (2, 8, 14, 14) and conv["dtype"] == "float32"
    assert conv["flops"] == 2 * 2 * 8 * 14 * 14 * 3 * 3 * 3
    check = session.current.check
    assert check.status == "not checked" and "needs real tensors" in check.message
    with pytest.raises(FxvizError, match="needs real tensors"):
        session.current.profile()


def test_the_explorers_panels_work_on_a_fake_tensor_session():
    from fxviz.widgets import Explorer

    model, x = _fake_convnet()
    explorer = Explorer(fxviz.Session(model, x), profile="sync")
    try:
        assert "<svg" in explorer.graph.svg and not explorer.error.value
        assert ">not checked<" in explorer.badge.value and "needs real tensors" in explorer.badge.value
        rows = {r["name"]: r for r in explorer.table.rows}
        assert rows["_0"]["shape"] == "2×8×14×14" and rows["_0"]["flops"] > 0 and rows["_0"]["time_us"] is None
        explorer.select("_0")
        assert "2×8×14×14" in explorer.details.body.value and "float32" in explorer.details.body.value
        timing = explorer.timing.summary.value
        assert "needs real tensors" in timing and "failed" not in timing and "Traceback" not in timing
        explorer.tabs.selected_index = 2  # Passes
        explorer.passes.select.value = "fuse_conv_bn"
        explorer.passes.apply.click()
        assert explorer.session.index == 1 and not explorer.error.value
        assert {r["name"] for r in explorer.table.rows} == {"input_1", "_0", "_2", "output"}
        assert ">not checked<" in explorer.badge.value
    finally:
        explorer.close()


def test_a_step_closing_over_a_meta_model_with_real_inputs_says_it_needs_real_tensors():
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    device = next(model.parameters()).device

    def step(x, y):  # real inputs, moved onto the model's device inside the step
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        return loss

    session = fxviz.Session(step, (torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])))
    assert session.capture.method == "make_fx" and session.real_tensors is False
    assert session.current.graph.nodes["_0_weight"]["shape"] == (8, 4)  # the graph and shapes are there
    check = session.current.check
    assert check.status == "not checked" and "needs real tensors" in check.message
    with pytest.raises(FxvizError, match="needs real tensors"):
        session.current.profile()


def test_real_inputs_fed_straight_into_a_meta_model_get_advice_that_names_both_devices():
    model = nn.Linear(4, 3, device="meta")

    def step(x):
        return model(x).sum()

    with pytest.raises(FxvizError) as caught:
        fxviz.Session(step, torch.randn(2, 4))
    message = str(caught.value)
    assert "the model's tensors are on meta but the example inputs on cpu" in message
    assert "device='meta'" in message

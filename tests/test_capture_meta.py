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

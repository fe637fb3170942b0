"""Names from the user's code: graph inputs named after the forward's (or the step
function's) parameters on every front-end, and the output node saying what it returns
(``node.meta["outputs_about"]``)."""
import pytest
import torch
from torch import nn

import fxviz
from fxviz.capture.info import graph_info


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.out = nn.Linear(6, 3)

    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return self.out(hidden)


IDS = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 0]])
MASK = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]])


def _inputs(gm):
    return [n.name for n in gm.graph.find_nodes(op="placeholder") if "qualified_name" not in n.meta]


@pytest.mark.parametrize("tracer", ["symbolic", "export", "export (strict)", "make_fx", "dynamo"])
def test_graph_inputs_are_named_after_forwards_parameters(tracer):
    session = fxviz.Session(Encoder(), (IDS, MASK), tracer=tracer)
    gm = session.current.gm
    assert _inputs(gm) == ["input_ids", "attention_mask"]
    signature = next(line for line in gm.code.splitlines() if line.startswith("def forward(self, "))
    assert "input_ids" in signature and "attention_mask" in signature  # the code says so too
    assert session.current.check.status == "match"  # the renamed code runs and matches the model


def test_dynamo_names_its_aot_graphs_inputs_too():
    session = fxviz.Session(Encoder(), (IDS, MASK), tracer="dynamo")
    forward = graph_info(session.capture.gm).aot_forward
    names = [n.name for n in forward.graph.find_nodes(op="placeholder")]
    assert "input_ids" in names and "attention_mask" in names
    assert any(n.meta.get("qualified_name") == "embed.weight" for n in forward.graph.find_nodes(op="placeholder"))


def test_a_training_step_is_named_after_the_step_function():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))

    def step(x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss

    session = fxviz.Session(step, (torch.randn(5, 3), torch.tensor([0, 1, 1, 0, 1])), tracer="make_fx")
    gm = session.current.gm
    assert _inputs(gm) == ["x", "y"]
    assert {n.target for n in gm.graph.find_nodes(op="get_attr")} >= {"0.weight", "2.bias"}  # as before
    assert gm.graph.output_node().meta["outputs_about"] == "loss, gradients ×4"
    assert session.current.check.status == "match"


def test_a_step_returning_autograd_grads_says_gradients():
    model = nn.Linear(3, 2)

    def step(batch):
        return torch.autograd.grad(model(batch).sum(), list(model.parameters()))

    gm = fxviz.trace(step, (torch.randn(4, 3),), tracer="make_fx")
    assert _inputs(gm) == ["batch"]
    assert gm.graph.output_node().meta["outputs_about"] == "gradients ×2"


class Structured(nn.Module):
    def __init__(self, returns):
        super().__init__()
        self.lin, self.returns = nn.Linear(3, 3), returns

    def forward(self, x):
        h = self.lin(x)
        if self.returns == "dict":
            return {"logits": h, "past_key_values": ((h, h + 1), (h - 1, h * 2))}
        if self.returns == "tuple":
            return h, h + 1, h * 2
        return h


@pytest.mark.parametrize("tracer", ["symbolic", "export", "make_fx"])
@pytest.mark.parametrize("returns, about", [("dict", "logits, past_key_values ×2"), ("tuple", "3 outputs"),
                                            ("tensor", "")])
def test_outputs_say_what_they_are(tracer, returns, about):
    gm = fxviz.trace(Structured(returns), (torch.randn(2, 3),), tracer=tracer)
    assert gm.graph.output_node().meta["outputs_about"] == about


def test_a_hugging_face_decoder_opened_by_export_takes_input_ids():
    transformers = pytest.importorskip("transformers")
    config = transformers.Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    ids = torch.randint(0, 64, (1, 6))
    session = fxviz.Session(model, (ids,), tracer="export")
    gm = session.current.gm
    assert _inputs(gm) == ["input_ids"]
    about = gm.graph.output_node().meta["outputs_about"]
    assert about in ("logits, past_key_values ×2", "logits, cache ×2")  # one (keys, values) per layer
    assert session.current.check.status == "match"


def test_an_exported_programs_inputs_and_outputs():
    program = torch.export.export(Structured("tuple"), (torch.randn(2, 3),))
    gm = fxviz.trace(program)
    assert _inputs(gm) == ["x"] and gm.graph.output_node().meta["outputs_about"] == "3 outputs"


def test_a_training_step_under_dynamo_is_named_after_the_step_function():
    model = nn.Linear(3, 2)

    def step(features, labels):
        loss = nn.functional.cross_entropy(model(features), labels)
        return loss, torch.autograd.grad(loss, list(model.parameters()))

    session = fxviz.Session(step, (torch.randn(4, 3), torch.tensor([0, 1, 1, 0])), tracer="dynamo")
    assert _inputs(session.current.gm) == ["features", "labels"]
    assert session.current.check.status == "match"


class WithLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, features, labels):
        return nn.functional.cross_entropy(self.lin(features), labels)


def test_export_joint_graph_is_named_after_forward_and_says_loss_and_gradients():
    session = fxviz.Session(WithLoss(), (torch.randn(4, 3), torch.tensor([0, 1, 1, 0])), tracer="export (joint)")
    gm = session.current.gm
    assert _inputs(gm) == ["features", "labels"]
    assert gm.graph.output_node().meta["outputs_about"] == "loss, gradients ×2"
    assert session.current.check.status == "match"

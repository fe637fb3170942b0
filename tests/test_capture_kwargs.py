"""Keyword inputs: ``explore(model, ids, attention_mask=mask)``, ``Session(model, args,
kwargs={...})`` and ``trace(model, args, kwargs=...)`` on every front-end; the graph takes
them after the positional inputs, and the check runs the model with them as keywords."""
import pytest
import torch
from torch import nn

import fxviz
from fxviz.errors import UsageError


class Tagger(nn.Module):
    """A forward called as Hugging Face models are: ids, then an optional mask by keyword."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.out = nn.Linear(6, 3)

    def forward(self, input_ids, attention_mask=None, scale=2.0):
        hidden = self.embed(input_ids)
        if attention_mask is not None:
            hidden = hidden * attention_mask.unsqueeze(-1)
        return self.out(hidden) * scale


IDS = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 0]])
MASK = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]])


@pytest.mark.parametrize("tracer", ["export", "export (strict)", "make_fx", "dynamo"])
def test_a_keyword_input_reaches_the_model_on_every_front_end(tracer):
    model = Tagger()
    session = fxviz.Session(model, (IDS,), kwargs={"attention_mask": MASK}, tracer=tracer)
    assert session.capture.method == tracer
    gm = session.current.gm
    assert "attention_mask" in [n.name for n in gm.graph.find_nodes(op="placeholder")]
    if tracer != "dynamo":  # dynamo's graph runs on what dynamo passed it (parameters too)
        assert session.example_inputs == (IDS, MASK)  # keyword inputs after the positional ones
    with torch.no_grad():  # the mask changed the output: it was not dropped or taken for another input
        got = gm(*session.example_inputs)
        torch.testing.assert_close(got[0] if isinstance(got, tuple) else got, model(IDS, attention_mask=MASK))
        assert not torch.allclose(model(IDS), model(IDS, attention_mask=MASK))
    assert session.current.check.status == "match"  # random masks too, against model(ids, attention_mask=...)
    assert session.current.check.n_inputs == 3


def test_symbolic_tracing_takes_keyword_inputs_after_the_positional_ones():
    class Scaled(nn.Module):  # no branch on the mask: symbolic tracing can take it
        def forward(self, x, bias=None, mask=None):
            return x * mask

    x, mask = torch.randn(2, 3), torch.randn(2, 3)
    session = fxviz.Session(Scaled(), (x,), kwargs={"mask": mask}, tracer="symbolic")
    gm = session.current.gm
    assert [n.target for n in gm.graph.find_nodes(op="placeholder")] == ["x", "mask", "bias"]
    torch.testing.assert_close(gm(x, mask), x * mask)
    assert session.current.check.status == "match"


def test_auto_with_a_keyword_input_checks_against_the_model_called_with_it():
    model = Tagger()
    session = fxviz.Session(model, IDS, kwargs={"scale": torch.tensor(3.0)})
    assert session.current.check.status == "match"
    with torch.no_grad():
        torch.testing.assert_close(session.current.gm(*session.example_inputs), model(IDS, scale=torch.tensor(3.0)))


def test_trace_takes_kwargs():
    gm = fxviz.trace(Tagger(), (IDS,), kwargs={"attention_mask": MASK}, tracer="export")
    assert [n.name for n in gm.graph.find_nodes(op="placeholder")] == ["input_ids", "attention_mask"]


def test_an_unknown_keyword_names_the_forwards_parameters():
    with pytest.raises(UsageError) as info:
        fxviz.Session(Tagger(), (IDS,), kwargs={"decoder_input_ids": IDS})
    message = str(info.value)
    assert "Session(...)" in message and "'decoder_input_ids'" in message
    assert "Tagger.forward (input_ids, attention_mask, scale)" in message


def test_a_keyword_given_positionally_too_is_refused():
    with pytest.raises(UsageError, match="'input_ids' given both positionally and as a keyword"):
        fxviz.trace(Tagger(), (IDS,), kwargs={"input_ids": IDS})


def test_an_unknown_session_option_says_where_model_keywords_go():
    with pytest.raises(UsageError, match=r"no option 'attention_mask'.*kwargs=\{\.\.\.\}"):
        fxviz.Session(Tagger(), (IDS,), attention_mask=MASK)


def test_explore_options_split_between_fxviz_and_the_model():
    ours, model_kwargs = fxviz.session.split_options(
        Tagger(), (IDS,), {"tracer": "export", "attention_mask": MASK, "profile": "off"}, own=("profile",))
    assert ours == {"tracer": "export", "profile": "off"} and list(model_kwargs) == ["attention_mask"]
    with pytest.raises(UsageError) as info:
        fxviz.session.split_options(Tagger(), (IDS,), {"decoder_input_ids": IDS}, own=("profile",))
    message = str(info.value)  # both lists: what fxviz takes and what the model takes
    assert "neither an option of" in message and "profile, n_random_inputs, tracer" in message
    assert "(input_ids, attention_mask, scale)" in message


def test_a_forward_with_var_keywords_takes_any_keyword():
    class Loose(nn.Module):
        def forward(self, x, **extra):
            return x + extra["shift"]

    x, shift = torch.randn(2, 3), torch.randn(2, 3)
    session = fxviz.Session(Loose(), (x,), kwargs={"shift": shift}, tracer="make_fx")
    assert session.current.check.status == "match"
    assert [n.name for n in session.current.gm.graph.find_nodes(op="placeholder")] == ["x", "shift"]


def test_a_training_step_with_a_keyword_input():
    model = nn.Linear(3, 2)

    def step(x, target=None):
        loss = nn.functional.mse_loss(model(x), target)
        loss.backward()
        return loss

    x, y = torch.randn(4, 3), torch.randn(4, 2)
    session = fxviz.Session(step, (x,), kwargs={"target": y}, tracer="make_fx")
    assert [n.name for n in session.current.gm.graph.find_nodes(op="placeholder")] == ["x", "target"]
    assert session.current.check.status == "match"  # loss and gradients as the eager step(x, target=y)
    assert model.weight.grad is None


def test_positional_inputs_alone_work_as_before():
    model = Tagger()
    session = fxviz.Session(model, (IDS, MASK), tracer="export")
    assert session.example_inputs == (IDS, MASK) and session.current.check.status == "match"
    replayed = session.replay(Tagger())
    assert replayed.example_inputs == (IDS, MASK)


def test_replay_passes_the_keyword_inputs_again():
    session = fxviz.Session(Tagger(), (IDS,), kwargs={"attention_mask": MASK}, tracer="export")
    replayed = session.replay(Tagger())
    assert replayed.example_inputs == (IDS, MASK) and replayed.current.check.status == "match"


def test_an_exported_program_takes_its_keyword_inputs_by_name():
    program = torch.export.export(Tagger(), (IDS,), {"attention_mask": MASK})
    session = fxviz.Session(program, (IDS,), kwargs={"attention_mask": MASK})
    assert session.example_inputs == (IDS, MASK) and session.current.check.status == "match"
    with pytest.raises(fxviz.InputError, match="keyword inputs \\(attention_mask\\), not \\(mask\\)"):
        fxviz.Session(program, (IDS,), kwargs={"mask": MASK})


def test_explore_passes_keywords_that_are_not_its_options_to_the_model():
    from fxviz.widgets import explore

    explorer = explore(Tagger(), IDS, attention_mask=MASK, tracer="export", profile="off")
    assert explorer.session.example_inputs == (IDS, MASK)
    assert explorer.session.current.check.status == "match"
    with pytest.raises(UsageError, match="'decoder_input_ids' is neither an option of explore"):
        explore(Tagger(), IDS, decoder_input_ids=IDS, profile="off")


def test_explore_with_dynamo_passes_keywords_to_the_model():
    from fxviz.widgets import explore

    widget = explore(Tagger(), IDS, attention_mask=MASK, tracer="dynamo", profile="off")
    gm = widget.compiled.graphs[0].gm
    assert "attention_mask" in [n.name for n in gm.graph.find_nodes(op="placeholder")]


def test_an_encoder_decoder_called_with_decoder_input_ids():
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
                                   num_heads=2)
    ids, dec = torch.randint(0, 64, (1, 5)), torch.randint(0, 64, (1, 3))
    session = fxviz.Session(transformers.T5Model(config).eval(), (ids,), kwargs={"decoder_input_ids": dec})
    gm = session.current.gm
    assert [n.name for n in gm.graph.find_nodes(op="placeholder")] == ["input_ids", "decoder_input_ids"]
    assert session.current.check.status == "match"


def test_export_joint_takes_a_keyword_input():
    class WithLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, features, labels=None):
            return nn.functional.cross_entropy(self.lin(features), labels)

    x, y = torch.randn(4, 3), torch.tensor([0, 1, 1, 0])
    session = fxviz.Session(WithLoss(), (x,), kwargs={"labels": y}, tracer="export (joint)")
    assert [n.name for n in session.current.gm.graph.find_nodes(op="placeholder")] == ["features", "labels"]
    assert session.current.check.status == "match"

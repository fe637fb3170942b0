"""Stand-ins for what bench/frontends.py's sweeps found on models nobody here wrote."""
import torch
from torch import nn

import fxviz


class Positions(nn.Module):
    """Hugging Face's way with positions (Canine, BERT and kin): a buffer of position ids
    longer than the embedding table it indexes, sliced to the input's length."""

    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(16, 4)
        self.positions = nn.Embedding(8, 4)
        self.register_buffer("position_ids", torch.arange(64).unsqueeze(0), persistent=False)

    def forward(self, ids):
        return self.tokens(ids) + self.positions(self.position_ids[:, : ids.shape[1]])


def test_a_dynamo_graph_is_checked_on_new_data_with_the_models_own_buffers():
    # Dynamo lifts the buffer to a graph input; varied like data, its ids reach past the
    # table (Canine under tracer="dynamo": "IndexError" where nothing was wrong).
    model = Positions().eval()
    ids = torch.tensor([[1, 5, 9, 3]])
    session = fxviz.Session(model, ids, tracer="dynamo")
    check = session.current.check
    assert check.status == "match", check.message
    example, *varied = session.current.check_inputs
    names = [n.meta.get("qualified_name") for n in session.current.gm.graph.find_nodes(op="placeholder")]
    buffer_at, ids_at = names.index("position_ids"), names.index(None)
    assert torch.equal(example[buffer_at], model.position_ids) and torch.equal(example[ids_at], ids) and varied
    assert all(inputs[buffer_at] is example[buffer_at] for inputs in varied)  # the model's state, as it is
    assert all(not torch.equal(inputs[ids_at], ids) for inputs in varied)  # the data, varied
    assert torch.equal(model.position_ids, torch.arange(64).unsqueeze(0))

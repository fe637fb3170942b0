"""Stand-ins for what bench/frontends.py's sweeps found on models nobody here wrote."""
import operator

import pytest
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


@torch.library.custom_op("fxviz_sweep::strided", mutates_args=())
def _strided(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(1, 2).contiguous().transpose(1, 2)  # really: not contiguous


@_strided.register_fake
def _(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)  # as torch's fake kernels may say: contiguous


class _FakeStrides(nn.Module):
    """PatchTST's case: AOT decomposes the Linear into a view on strides the fake tensor
    promised, and its forward fails when run where dynamo's graph (and eager) runs."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(_strided(x))


def test_a_dynamo_graph_whose_aot_forward_fails_when_run_opens_without_its_aot_parts():
    model, x = _FakeStrides().eval(), torch.randn(2, 5, 4)
    session = fxviz.Session(model, (x,), tracer="dynamo")
    info = fxviz.capture.graph_info(session.current.gm)
    assert info.tracer == "dynamo" and "AOT's forward failed when run" in info.aot_error
    assert "view size is not compatible" in info.aot_error
    assert session.current.check.status == "match"


class _LayerDrop(nn.Module):
    """wav2vec2-conformer's layer drop in training: a random draw steers a Python branch
    (never taken here: p = 0), so no one joint graph holds the model."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        if self.training and torch.rand([]) < 0.0:
            return x.sum()
        return self.lin(x).pow(2).mean()


def test_a_joint_graph_stopped_by_a_branch_on_a_value_says_so_and_the_step_it_suggests_opens():
    model, x = _LayerDrop().train(), torch.randn(2, 4)
    with pytest.raises(fxviz.errors.TraceError) as raised:
        fxviz.Session(model, (x,), tracer="export (joint)")
    message = str(raised.value)
    assert "test_sweep_regressions.py" in message and "branches on a tensor's value" in message
    assert "unused parameters" not in message  # not the advice for a loss that misses parameters

    def train_step(x):  # what the message suggests
        loss = model(x)
        return loss, torch.autograd.grad(loss, list(model.parameters()))
    session = fxviz.Session(train_step, (x,))
    assert session.capture.method == "dynamo" and session.current.check.status == "match"


class _FedEmbeddings(nn.Module):
    """Decision Transformer's case: a GPT-2 fed embeddings, its token table never read."""

    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(16, 4)
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).pow(2).mean()


def test_a_joint_graph_refused_for_a_parameter_without_gradient_names_it():
    # torch says "Found a parameter that did not receive a gradient" from generated code:
    # the message pointed at "<string>:1" and named no parameter.
    model, x = _FedEmbeddings().train(), torch.randn(2, 4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(fxviz.errors.TraceError) as raised:
        fxviz.Session(model, (x,), tracer="export (joint)")
    message = str(raised.value)
    assert "does not depend on 1 parameter: tokens.weight" in message and "lin.weight" not in message
    assert "<string>" not in message and "requires_grad=False" in message
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    model.tokens.weight.requires_grad_(False)  # what the message says to do
    session = fxviz.Session(model, (x,), tracer="export (joint)")
    assert session.capture.method == "export (joint)" and session.current.check.status == "match"


class _RandomMasking(nn.Module):
    """ViT-MAE's case: a random mask drawn in every forward (noise, argsort, keep half)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        keep = torch.rand_like(x[:, :, 0]).argsort(dim=1)[:, : x.shape[1] // 2]
        return self.lin(torch.gather(x, 1, keep.unsqueeze(-1).expand(-1, -1, x.shape[2])))


@pytest.mark.parametrize("tracer", ["symbolic", "export"])
def test_a_match_says_on_how_many_inputs_and_that_random_draws_shared_a_seed(tracer):
    # ViT-MAE read "outputs match": true only because model and graph drew from one seed.
    model, x = _RandomMasking().eval(), torch.randn(2, 6, 4)
    check = fxviz.Session(model, (x,), tracer=tracer).current.check
    assert check.status == "match" and check.n_inputs == 3
    assert check.message.startswith("outputs match (inputs tried: 3,") and "draws random numbers (rand_like)" in check.message
    assert "same seed" in check.message
    plain = fxviz.Session(nn.Linear(4, 4).eval(), (x,), tracer=tracer).current.check
    assert plain.message.startswith("outputs match (inputs tried: 3,") and "random" not in plain.message


def test_dropout_in_training_is_named_as_a_random_draw():
    model, x = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).train(), torch.randn(2, 4)
    check = fxviz.Session(model, (x,), tracer="symbolic").current.check
    assert check.status == "match" and "draws random numbers (Dropout)" in check.message
    model.eval()
    assert "random" not in fxviz.Session(model, (x,), tracer="symbolic").current.check.message


class _Pairs(nn.Module):
    """A reshape by a size computed from the input's: exported with a dynamic batch, the
    program computes ``x.shape[0] * 2`` with Python's operator.mul on a symbolic size."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 3)

    def forward(self, x):
        return self.lin(x.reshape(x.shape[0] * 2, -1))


def test_a_program_with_size_arithmetic_is_aten_and_decomposes():
    # VITS's program (lengths from its predicted durations) and any program with a dynamic
    # dimension read as "torch-level": run_decompositions was refused, blaming the graph's level.
    from fxviz.passes.levels import ir_level

    x = torch.randn(4, 4)
    ep = torch.export.export(_Pairs().eval(), (x,), dynamic_shapes=({0: torch.export.Dim.AUTO},), strict=False)
    session = fxviz.Session(ep, (x,))
    sizes = [n for n in session.current.gm.graph.nodes if n.op == "call_function" and n.target is operator.mul]
    assert sizes and ir_level(session.current.gm) == "aten"
    assert session.apply("run_decompositions").check.status == "match"
    with pytest.raises(fxviz.errors.PassError, match="works on torch-IR graphs"):
        session.apply("inline_module")  # not "dynamo's graphs call functions"
    assert ir_level(torch.fx.symbolic_trace(_Pairs())) == "torch"


class _Pick(nn.Module):
    """Columns picked by a buffer of indices: an ATen index the exported graph records shapes for."""

    def __init__(self):
        super().__init__()
        self.register_buffer("columns", torch.tensor([0, 2]))

    def forward(self, x):
        return x[:, self.columns] * 2


def test_a_graph_drawn_from_its_shapes_that_fails_on_the_example_says_so_not_on_a_random_input():
    # A dict-input model under tracer="export (joint)" (torchvision's FeaturePyramidNetwork): its
    # graph, drawn without running, first ran in the check and failed on the example itself, and
    # the check said "mismatch: fails on a random input of the example's shapes".
    from fxviz.capture import Capture

    model, x = _Pick().eval(), torch.randn(2, 3)
    gm = fxviz.trace(model, (x,), tracer="export")
    index = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.index.Tensor)
    setattr(gm, index.args[1][1].target, torch.tensor([0, 7]))  # the graph's own copy, out of range: the model runs
    session = fxviz.Session(Capture([gm], "export", reference=model), (x,))
    check = session.current.check
    assert check.status == "error", check.message
    assert check.message.startswith("running the graph on the example inputs failed: IndexError")
    assert "random input" not in check.message and "without running it" in check.message
    assert torch.equal(model.columns, torch.tensor([0, 2]))


class _Functional(nn.Module):
    """torchvision's MultiScaleRoIAlign's case: a module whose forward calls functions only."""

    def forward(self, x):
        return torch.nn.functional.relu(x).sum(dim=1)


def test_inline_module_not_offered_on_a_symbolic_graph_without_module_calls_does_not_blame_dynamo():
    # Its reason read "(no call_module node to open: dynamo's graphs call functions)" on a symbolic trace.
    from fxviz.passes import registry

    session = fxviz.Session(_Functional(), (torch.randn(2, 3),), tracer="symbolic")
    why = registry.get("inline_module").why_not(session.current.gm)
    assert why.startswith("this graph calls no modules") and "dynamo" not in why
    assert "every operation is a function call already" in why
    dynamo = fxviz.Session(nn.Sequential(nn.Linear(3, 3)), (torch.randn(2, 3),), tracer="dynamo")
    assert "dynamo's graphs call functions" in registry.get("inline_module").why_not(dynamo.current.gm)


def _drop_rows(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """torchvision's stochastic_depth, in short: opaque to symbolic tracing (wrapped), random in training only."""
    if not training:
        return x
    return x * torch.empty(x.shape[0], 1).bernoulli_(1 - p) / (1 - p)


torch.fx.wrap("_drop_rows")


class _FunctionalDrops(nn.Module):
    """``F.dropout`` and a wrapped function that draws (torchvision's DropBlock2d and StochasticDepth, timm's
    DropPath): no Dropout module, no random op by name in the graph."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return _drop_rows(torch.nn.functional.dropout(self.lin(x), 0.5, training=self.training), 0.5, self.training)


@pytest.mark.parametrize("tracer", ["symbolic", "export", "dynamo"])
def test_a_match_of_a_graph_drawing_through_functions_says_they_shared_a_seed(tracer):
    # torchvision's DropBlock2d/StochasticDepth in training, F.dropout (symbolic, dynamo) and
    # export's aten.dropout read a plain "outputs match": the random draws went unnamed.
    x = torch.randn(6, 4)
    check = fxviz.Session(_FunctionalDrops().train(), (x,), tracer=tracer).current.check
    assert check.status == "match" and check.n_inputs == 3
    assert "the graph draws random numbers (" in check.message and "same seed" in check.message
    assert "dropout" in check.message
    if tracer == "symbolic":
        assert "(_drop_rows, dropout)" in check.message
    quiet = fxviz.Session(_FunctionalDrops().eval(), (x,), tracer=tracer).current.check
    assert quiet.status == "match" and "random" not in quiet.message  # no draw in eval: nothing said


def test_seeded_says_whether_a_run_drew():
    from fxviz.checks.seeds import seeded

    drew: list = []
    with seeded((torch.ones(2),), drew):
        torch.ones(3).exp()
    assert drew == []
    with seeded((torch.ones(2),), drew):
        first = torch.rand(3)
    with seeded((torch.ones(2),), drew):
        assert torch.equal(torch.rand(3), first)  # the same stream each time
    assert drew == [True, True]


class _DropPath(nn.Module):
    """timm's convnext in training: DropPath traced through (``Tensor.bernoulli_``, a method) and a head's
    Dropout(p=0), which draws nothing."""

    def __init__(self):
        super().__init__()
        self.lin, self.head_drop = nn.Linear(4, 4), nn.Dropout(0.0)

    def forward(self, x):
        keep = x.new_empty(x.shape[0], 1).bernoulli_(0.8) if self.training else 1.0
        return self.head_drop(self.lin(x) * keep)


def test_a_random_method_is_named_and_a_dropout_that_draws_nothing_is_not():
    check = fxviz.Session(_DropPath().train(), (torch.randn(6, 4),), tracer="symbolic").current.check
    assert check.status == "match" and "the graph draws random numbers (bernoulli_): " in check.message

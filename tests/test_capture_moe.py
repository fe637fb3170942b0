"""Training steps of Hugging Face mixture-of-experts models: routing is data, so the
step opens as one make_fx graph that routes each input itself, and the check on random
inputs (routed otherwise than the example) says so."""
import pytest
import torch

import fxviz

transformers = pytest.importorskip("transformers")

TINY = {"vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 1, "intermediate_size": 32, "num_experts_per_tok": 2, "use_cache": False}
CONFIGS = {
    "mixtral": lambda: transformers.MixtralConfig(num_local_experts=4, **TINY),
    "qwen2-moe": lambda: transformers.Qwen2MoeConfig(num_experts=4, moe_intermediate_size=16,
                                                     shared_expert_intermediate_size=16, **TINY),
}


def _step(config, **kw):
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config, **kw).train()

    def train_step(ids):
        loss = model(ids).last_hidden_state.pow(2).mean()
        return loss, torch.autograd.grad(loss, list(model.parameters()), allow_unused=True, materialize_grads=True)
    return model, train_step


def _routes(model, step, inputs):
    """The experts each token goes to in the first layer, when ``step`` runs on ``inputs``."""
    seen = []
    hook = model.layers[0].mlp.gate.register_forward_hook(lambda _m, _i, out: seen.append(out[-1].sort(-1).values))
    try:
        step(*inputs)
    finally:
        hook.remove()
    return seen[0]


@pytest.mark.parametrize("name", CONFIGS)
def test_a_moe_training_step_opens_as_one_make_fx_graph_that_routes_every_input(name):
    model, train_step = _step(CONFIGS[name]())
    ids = torch.randint(0, 64, (1, 6))
    session = fxviz.Session(train_step, (ids,))
    assert session.capture.method == "make_fx" and len(session.capture.graphs) == 1
    graph = session.current.graph
    paths = {d["module_path"] for _, d in graph.nodes(data=True)}
    assert {"layers.0.mlp.gate", "layers.0.mlp.experts", "layers.0.mlp.experts · backward"} <= paths
    assert {"aten.topk.default", "aten.sort.default"} <= {d["target"] for _, d in graph.nodes(data=True)}
    assert not torch.compiler.is_compiling() and not torch.compiler.is_exporting()  # set only while tracing
    assert model.config._experts_implementation == "grouped_mm"  # the user's choice, untouched
    # The check's random inputs route otherwise than the example: a graph that baked in the
    # example's routing would fail there. The loss and every gradient match.
    step = session.current
    routes = [_routes(model, train_step, inputs) for inputs in step.check_inputs]
    assert len(routes) == 3 and any(not torch.equal(routes[0], r) for r in routes[1:])
    assert step.check.status == "match", step.check.message


def test_a_moe_step_that_loops_over_the_experts_it_routes_to_says_why_it_opens_as_several_graphs():
    """experts_implementation="eager" runs a Python loop over the experts hit: no single
    graph holds every routing, so dynamo's graphs open, with one note on why and what to do."""
    model, train_step = _step(CONFIGS["mixtral"](), experts_implementation="eager")
    session = fxviz.Session(train_step, (torch.randint(0, 64, (1, 6)),), n_random_inputs=0)
    capture = session.capture
    assert capture.method == "dynamo" and len(capture.graphs) > 1
    note = capture.note
    assert note.startswith(f"train_step opened as {len(capture.graphs)} graphs, cut where dynamo broke")
    make_fx = next(line for line in note.splitlines() if line.startswith("  - make_fx:"))
    # where make_fx really stopped (the loop over the experts hit), not the mask check that
    # traced code skips and the real trace stopped at first
    assert "transformers/models/mixtral/modeling_mixtral.py:" in make_fx and "for expert_idx in expert_hit" in make_fx
    assert "site-packages" not in note  # a library's files by their package path, as the graph list names them
    assert "masking_utils" not in make_fx
    assert "checked on its own" in note and "What to do:" in note
    assert f"train_step opened as {len(capture.graphs)} graphs" in session._repr_html_()
    assert model.config._experts_implementation == "eager"


def test_the_check_catches_a_graph_that_bakes_in_the_examples_routing():
    """What a capture that read the router's values would make: the same graph with the
    example's experts as a constant. Right on the example, wrong on the random inputs."""
    from fxviz.checks.check import check_outputs

    model, train_step = _step(CONFIGS["mixtral"]())
    ids = torch.randint(0, 64, (1, 6))
    step = fxviz.Session(train_step, (ids,)).current
    gm = step.gm
    seen = []
    hook = model.layers[0].mlp.gate.register_forward_hook(lambda _m, _i, out: seen.append(out[-1]))
    train_step(ids)
    hook.remove()
    (topk,) = gm.graph.find_nodes(op="call_function", target=torch.ops.aten.topk.default)
    (indices,) = [user for user in topk.users if user.args[1] == 1]
    gm.register_buffer("baked_routing", seen[0])
    with gm.graph.inserting_after(indices):
        baked = gm.graph.get_attr("baked_routing")
    indices.replace_all_uses_with(baked)
    gm.recompile()
    assert check_outputs(train_step, gm, step.check_inputs[:1]).status == "match"
    assert check_outputs(train_step, gm, step.check_inputs).status == "mismatch"

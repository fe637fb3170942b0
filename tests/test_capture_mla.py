"""Multi-head latent attention (transformers' DeepSeek-V3): queries and keys wider than the
values, keys and values made for every head from one latent. A tiny model opens for
inference and as a training step; a config that gives it fewer key/value heads than
attention heads cannot run even without fxviz, and the error names the setting to change."""
import pytest
import torch

import fxviz
from fxviz.capture.model_config import config_advice
from fxviz.errors import TraceError

transformers = pytest.importorskip("transformers")

#: q/k heads 16 wide (8 without rotary + 8 with), values 8; layer 0 dense, layer 1 mixture of experts.
TINY = {"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "moe_intermediate_size": 16, "n_routed_experts": 4, "num_experts_per_tok": 2,
        "n_group": 1, "topk_group": 1, "first_k_dense_replace": 1, "q_lora_rank": 16, "kv_lora_rank": 16,
        "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8, "use_cache": False}


def _model(kv_heads):
    torch.manual_seed(0)
    config = transformers.DeepseekV3Config(num_key_value_heads=kv_heads, **TINY)
    return transformers.AutoModel.from_config(config).eval()


def _train_step(model):
    model.train()

    def train_step(ids):
        loss = model(ids).last_hidden_state.pow(2).mean()
        return loss, torch.autograd.grad(loss, list(model.parameters()), allow_unused=True, materialize_grads=True)
    return train_step


def test_a_latent_attention_model_opens_for_inference_and_as_a_training_step_and_matches():
    model = _model(kv_heads=2)
    ids = torch.randint(0, 64, (1, 6))
    session = fxviz.Session(model, (ids,))
    assert session.current.check.status == "match", session.current.check.message
    assert "layers.1.self_attn.kv_b_proj" in {d["module_path"] for _, d in session.current.graph.nodes(data=True)}
    step = fxviz.Session(_train_step(model), (ids,))
    assert step.capture.method == "make_fx"
    assert "layers.1.self_attn · backward" in {d["module_path"] for _, d in step.current.graph.nodes(data=True)}
    assert step.current.check.status == "match", step.current.check.message  # the loss and every gradient


@pytest.mark.parametrize("how", ["auto", "make_fx", "train step"])
def test_fewer_key_value_heads_than_heads_says_the_model_itself_fails_and_which_setting_to_change(how):
    model = _model(kv_heads=1)
    ids = torch.randint(0, 64, (1, 6))
    target = _train_step(model) if how == "train step" else model
    with pytest.raises(TraceError) as info:
        fxviz.Session(target, (ids,), tracer="make_fx" if how == "make_fx" else "auto")
    lines = str(info.value).splitlines()
    name = "train_step" if how == "train step" else "DeepseekV3Model"
    # not "make_fx could not trace": the model fails as is, and a named tracer says so too
    assert lines[0].startswith(f"Session(...): {name} itself fails on the example inputs")
    assert "sdpa_attention.py" in lines[0] and "must match" in lines[1]
    assert lines[2].startswith("  What to do: DeepseekV3Config sets num_key_value_heads=1 with num_attention_heads=2")
    assert "Build the config with num_key_value_heads=2" in lines[2]
    assert model.config.num_key_value_heads == 1  # the user's config, untouched
    # the advice works: the same weights under the config it asks for run and open
    fixed = _model(kv_heads=2)
    fixed.load_state_dict(model.state_dict())
    assert fxviz.Session(fixed, (ids,)).current.check.status == "match"


def test_the_rule_leaves_grouped_query_attention_alone():
    """Llama's fewer key/value heads are real (grouped-query attention): no advice."""
    llama = transformers.AutoModel.from_config(transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=64))
    assert llama.layers[0].self_attn.num_key_value_groups == 2
    assert config_advice([llama]) is None
    assert config_advice([_model(kv_heads=2)]) is None
    assert "num_key_value_heads=1" in config_advice([torch.nn.Sequential(_model(kv_heads=1))])  # found when nested

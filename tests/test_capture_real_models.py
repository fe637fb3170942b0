"""A small sweep over models nobody here wrote (random weights, tiny configs); the wide
sweep is bench/frontends.py."""
import pytest
import torch

import fxviz
from fxviz.capture.info import graph_info

transformers = pytest.importorskip("transformers")
timm = pytest.importorskip("timm")


def _tiny(config_cls, **kw):
    return transformers.AutoModel.from_config(config_cls(vocab_size=64, **kw)).eval()


@pytest.mark.parametrize("use_cache", [True, False])
def test_hf_decoder_opens_with_clusters_and_matches(use_cache):
    model = _tiny(transformers.GPT2Config, n_embd=16, n_layer=2, n_head=2, use_cache=use_cache)
    session = fxviz.Session(model, torch.randint(0, 64, (1, 6)))
    assert session.capture.method == "export"
    assert session.capture.attempts[0][0] == "symbolic"
    paths = {d["module_path"] for _, d in session.current.graph.nodes(data=True)}
    assert {"h.0.attn", "h.1.mlp", "wte"} <= {p.split(".c_")[0] for p in paths if p}
    assert session.current.check.status == "match"


def test_hf_encoder_and_timm_model_open_with_clusters():
    bert = _tiny(transformers.BertConfig, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=32)
    session = fxviz.Session(bert, torch.randint(0, 64, (1, 5)))
    assert "encoder.layer.0.attention.self.query" in {d["module_path"] for _, d in session.current.graph.nodes(data=True)}
    assert session.current.check.status == "match"
    net = timm.create_model("resnet10t", pretrained=False, num_classes=4).eval()
    session = fxviz.Session(net, torch.randn(1, 3, 32, 32))
    assert session.capture.method == "symbolic" and session.current.check.status == "match"


def test_timm_training_step_gets_backward_clusters_and_a_gradient_check():
    net = timm.create_model("resnet10t", pretrained=False, num_classes=4).train()

    def train_step(x, y):  # closes over the model, as people write it
        loss = torch.nn.functional.cross_entropy(net(x), y)
        return loss, torch.autograd.grad(loss, list(net.parameters()))

    session = fxviz.Session(train_step, (torch.randn(2, 3, 16, 16), torch.tensor([0, 3])), n_random_inputs=0)
    gm = session.current.gm
    assert session.capture.method == "make_fx" and graph_info(gm).backward_attribution == "seq_nr"
    graph = session.current.graph
    paths = {d["module_path"] for _, d in graph.nodes(data=True)}
    assert {"layer2.0.downsample.0 · backward", "layer3.0.conv2 · backward", "fc · backward"} <= paths
    assert {"loss", "loss · backward"} <= paths and "backward" not in paths  # the step's cross_entropy
    targets = {d["target"] for _, d in graph.nodes(data=True) if d["op"] == "get_attr"}
    assert {"layer1.0.conv1.weight", "fc.bias"} <= targets
    assert session.current.check.status == "match"  # the loss and every parameter's gradient


def test_gemma2_sliding_window_and_both_softcaps_are_in_the_graph_and_match():
    config = transformers.Gemma2Config(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                       num_key_value_heads=1, head_dim=8, intermediate_size=32, sliding_window=4,
                                       attn_logit_softcapping=50.0, final_logit_softcapping=30.0, use_cache=False)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    session = fxviz.Session(model, torch.randint(0, 64, (1, 8)))  # 8 tokens: past the window of 4
    assert session.capture.method == "export"
    softcaps = [n.meta["module_path"] for n in session.current.gm.graph.nodes if n.target == torch.ops.aten.tanh.default]
    assert softcaps == ["model.layers.0.self_attn", "model.layers.1.self_attn", ""]  # each layer's, then the logits'
    assert session.current.check.status == "match"


def test_longformer_branch_on_a_value_opens_as_dynamos_graphs_cut_there():
    config = transformers.LongformerConfig(vocab_size=64, attention_window=4, hidden_size=16, num_hidden_layers=1,
                                           num_attention_heads=2, intermediate_size=32)
    session = fxviz.Session(transformers.AutoModel.from_config(config).eval(), torch.randint(0, 64, (1, 8)))
    assert [method for method, _ in session.capture.attempts] == ["symbolic", "export", "export (strict)", "make_fx"]
    assert session.capture.method == "dynamo" and len(session.capture.graphs) > 1
    assert "Tensor.item()" in session.capture.note and "modeling_longformer.py" in session.capture.note
    assert session.current.check.status == "match"


def test_torchvision_video_swin_whose_helper_fills_in_its_window_list_opens_and_matches():
    torchvision = pytest.importorskip("torchvision")
    model = torchvision.models.video.swin3d_t(weights=None, num_classes=3).eval()
    session = fxviz.Session(model, torch.randn(1, 3, 4, 64, 64))
    assert session.capture.method == "symbolic"
    paths = {d["module_path"] for _, d in session.current.graph.nodes(data=True)}
    assert {"features.0.0.attn", "features.1.reduction", "head"} <= paths
    assert session.current.check.status == "match"

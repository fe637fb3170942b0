"""Which models open, per family, next to what torch's own front-ends and torchview do on them.

For each model nobody here wrote (random weights, small inputs): does ``fxviz.Session``
open it (and with which capture), is it drawn with module clusters, what the check says,
the time from the call to the first drawing (Session + SVG), and what the first view and
"Collapse all" draw (boxes; of them parameters, "nodes N–M" segments and setup ops drawn
one by one: what a user should not meet first). Beside it, on the same
model: does ``torch.fx.symbolic_trace``, ``torch.export.export`` (non-strict) and
torchview's ``draw_graph`` succeed, and export's time. Each family also has a training
step (a function closing over the model: loss, then ``torch.autograd.grad``), which
fxviz opens as a joint forward+backward graph and checks gradients against eager.

Each model runs in its own subprocess under a time limit, so a model that hangs or
crashes the interpreter costs one row, not the sweep. The machine is shared: read times
as ratios (fxviz / export) from the same run; the load is printed with the table.

Run: ``PYTHONPATH=. .venv/bin/python bench/frontends.py [--wide] [--family timm] [--model NAME ...]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

# bench/profile.py would shadow the standard library's profile module (imported by dynamo).
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402

LIMIT_S = 240
SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}


def _hf(config: str, inputs: str = "ids", *, head: str = "AutoModel", length: int = 8,
        **kw: Any) -> Callable[[], tuple]:
    """``head``: the Auto class (a causal LM head holds Gemma2's final logit softcapping);
    ``length``: the token count (BigBird's block-sparse attention needs more than 8)."""
    def build():
        import transformers

        model = getattr(transformers, head).from_config(getattr(transformers, config)(**kw)).eval()
        ids = torch.randint(0, 128, (1, length))
        if inputs == "pixels":
            return model, (torch.randn(1, 3, 32, 32),)
        if inputs == "audio":
            return model, (torch.randn(1, 1600),)
        if inputs == "waveform":  # codecs: (batch, channels, samples)
            return model, (torch.randn(1, 1, 1600),)
        if inputs == "audio+ids":  # Moonshine: samples, no attention mask, decoder ids
            return model, (torch.randn(1, 1600), None, ids[:, :4])
        if inputs == "spectrogram":  # AST: (batch, frames, mel bins)
            return model, (torch.randn(1, kw["max_length"], kw["num_mel_bins"]),)
        if inputs == "frames":  # Wav2Vec2-BERT: (batch, frames, features)
            return model, (torch.randn(1, 16, kw["feature_projection_input_dim"]),)
        if inputs == "embeddings":  # Perceiver without a preprocessor: (batch, length, d_model)
            return model, (torch.randn(1, 8, kw["d_model"]),)
        if inputs == "series":  # (batch, time, channels)
            return model, (torch.randn(1, kw["context_length"], kw["num_input_channels"]),)
        if inputs == "features":  # whisper: log-mel frames, no attention mask, decoder ids
            return model, (torch.randn(1, kw["num_mel_bins"], 2 * kw["max_source_positions"]), None, ids[:, :4])
        if inputs == "video":  # (batch, frames, channels, height, width)
            return model, (torch.randn(1, kw["num_frames"], 3, kw["image_size"], kw["image_size"]),)
        if inputs == "text+mel":  # CLAP: token ids, then a (batch, 1, frames, mel bins) spectrogram
            return model, (ids, torch.randn(1, 1, 64, 64))
        if inputs == "text+pixels":  # CLIP: both towers
            return model, (ids, torch.randn(1, 3, 32, 32))
        return model, ((ids, torch.ones_like(ids), ids) if inputs == "seq2seq" else (ids,))
    return build


def _decoder(config: str, **kw: Any) -> dict[str, Callable[[], tuple]]:
    name = config.removesuffix("Config").lower()
    return {f"{name} (cache)": _hf(config, use_cache=True, **kw),
            f"{name} (no cache)": _hf(config, use_cache=False, **kw)}


def _timm(name: str, size: int = 64, *, batch: int = 1, **kw: Any) -> Callable[[], tuple]:
    """``batch``: images (a batch norm on a 1×1 map needs two in training)."""
    def build():
        import timm

        model = timm.create_model(name, pretrained=False, **{"num_classes": 8, **kw}).eval()
        return model, (torch.randn(batch, 3, size, size),)
    return build


def _custom_vit() -> tuple:
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
                              num_classes=3)
    torch.nn.init.normal_(model.heads.head.weight)  # zero until trained: nothing to check
    return model.eval(), (torch.randn(1, 3, 32, 32),)


def _speecht5() -> tuple:
    """SpeechT5 text to speech: token ids, no attention mask (None), decoder mel frames."""
    import transformers

    config = transformers.SpeechT5Config(vocab_size=128, hidden_size=32, encoder_layers=1, decoder_layers=1,
                                         encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                         decoder_ffn_dim=64, num_mel_bins=16, speech_decoder_prenet_units=32,
                                         speech_decoder_postnet_units=32, speech_decoder_postnet_layers=2,
                                         speaker_embedding_dim=16, max_text_positions=64, max_speech_positions=64)
    model = transformers.SpeechT5ForTextToSpeech(config).eval()
    return model, (torch.randint(0, 128, (1, 8)), None, torch.randn(1, 4, 16))


def _encodec() -> tuple:
    """EnCodec: a raw waveform through convolutions, an LSTM and residual vector quantisation."""
    import transformers

    config = transformers.EncodecConfig(num_filters=4, hidden_size=16, num_lstm_layers=1, upsampling_ratios=[4, 2],
                                        codebook_size=16, codebook_dim=16, sampling_rate=1600,
                                        target_bandwidths=[1.6])  # 2 codebooks at 200 frames/s
    return transformers.EncodecModel(config).eval(), (torch.randn(1, 1, 400),)


def _speech2text() -> tuple:
    """Speech2Text: filter-bank frames (two strided convolutions), then an encoder-decoder."""
    import transformers

    config = transformers.Speech2TextConfig(vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                                            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                            decoder_ffn_dim=64, input_feat_per_channel=16, conv_channels=32,
                                            max_source_positions=64, max_target_positions=64, input_channels=1)
    model = transformers.Speech2TextModel(config).eval()
    return model, (torch.randn(1, 32, 16), None, torch.randint(0, 128, (1, 4)))


def _patchtst() -> tuple:
    """PatchTST: a multivariate series cut into patches, each channel through the encoder."""
    import transformers

    config = transformers.PatchTSTConfig(num_input_channels=3, context_length=32, patch_length=8, patch_stride=8,
                                         d_model=32, num_hidden_layers=2, num_attention_heads=2, ffn_dim=64)
    return transformers.PatchTSTModel(config).eval(), (torch.randn(1, 32, 3),)


def _decision_transformer() -> tuple:
    """Decision Transformer: states, actions, rewards, returns to go and time steps of a trajectory, no tokens."""
    import transformers

    config = transformers.DecisionTransformerConfig(state_dim=4, act_dim=2, hidden_size=32, n_layer=2, n_head=2,
                                                    max_ep_len=16)
    steps = 6
    model = transformers.DecisionTransformerModel(config).eval()
    model.encoder.wte.requires_grad_(False)  # fed embeddings, its GPT-2 never reads this table: frozen, as trained
    return model, (
        torch.randn(1, steps, 4), torch.randn(1, steps, 2), torch.randn(1, steps, 1), torch.randn(1, steps, 1),
        torch.arange(steps).unsqueeze(0), torch.ones(1, steps, dtype=torch.long))


def _timesfm() -> tuple:
    """TimesFM: a batch of series, their padding flags and a frequency class."""
    import transformers

    config = transformers.TimesFmConfig(patch_length=8, context_length=32, horizon_length=8, hidden_size=32,
                                        intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, head_dim=16)
    series = torch.randn(2, 32)
    return transformers.TimesFmModel(config).eval(), (series, torch.zeros_like(series), torch.zeros(2, 1, dtype=torch.long))


def _vits() -> tuple:
    """VITS text to speech: durations predicted from noise set how many frames (and samples) come out."""
    import transformers

    config = transformers.VitsConfig(vocab_size=32, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     ffn_dim=64, flow_size=16, spectrogram_bins=33, upsample_initial_channel=32,
                                     upsample_rates=[4, 4], upsample_kernel_sizes=[8, 8], resblock_kernel_sizes=[3],
                                     resblock_dilation_sizes=[[1, 3]], prior_encoder_num_flows=1,
                                     prior_encoder_num_wavenet_layers=1, duration_predictor_num_flows=1,
                                     duration_predictor_filter_channels=32, depth_separable_num_layers=1, window_size=2)
    return transformers.VitsModel(config).eval(), (torch.randint(0, 32, (1, 8)),)


def _detector_training(factory: str = "fasterrcnn_mobilenet_v3_large_320_fpn", batch: int = 1,
                       **kw: Any) -> Callable[[], tuple]:
    """A torchvision detector as it is trained: images and their boxes and labels in (and, for
    Mask/Keypoint R-CNN, masks or keypoints: the target keys its roi heads ask for), the losses out.
    ``batch``: images (SSDlite's batch norms on 1×1 maps need two in training)."""
    def build():
        import torchvision

        model = getattr(torchvision.models.detection, factory)(weights=None, weights_backbone=None, **kw).train()
        target = {"boxes": torch.tensor([[4.0, 4.0, 40.0, 40.0]]), "labels": torch.tensor([1])}
        if "mask" in factory:
            target["masks"] = torch.zeros(1, 64, 64, dtype=torch.uint8)
            target["masks"][0, 4:40, 4:40] = 1
        if "keypoint" in factory:
            target["keypoints"] = torch.tensor([[[10.0, 10.0, 1.0], [20.0, 20.0, 1.0], [30.0, 30.0, 1.0]]])
        return model, ([torch.rand(3, 64, 64) for _ in range(batch)], [target] * batch)
    return build


def _exported(build: Callable[[], tuple], dynamic_dim: int | None = None) -> Callable[[], tuple]:
    """``torch.export.export``'s program of ``build()``'s model, handed to fxviz as is;
    ``dynamic_dim``: that dimension of the first input exported as dynamic."""
    def make():
        model, inputs = build()
        shapes = ({dynamic_dim: torch.export.Dim.AUTO},) + (None,) * (len(inputs) - 1) if dynamic_dim else None
        return torch.export.export(model, inputs, dynamic_shapes=shapes, strict=False), inputs
    return make


def _decomposed(build: Callable[[], tuple]) -> tuple:
    """``build()``'s program lowered to core ATen (``run_decompositions``), as a user hands
    on a program made for a backend."""
    ep, inputs = _exported(build)()
    return ep.run_decompositions(), inputs


def _compiled(build: Callable[[], tuple]) -> Callable[[], tuple]:
    """``build()``'s model after ``torch.compile``; a tracer is named ("auto") so the other
    front-ends are not run on it: on the wrapper they would time inductor's compile."""
    def make():
        model, inputs = build()
        return torch.compile(model), inputs, "auto"
    return make


def _traced_by(build: Callable[[], tuple], tracer: str) -> Callable[[], tuple]:
    """``build()``'s model opened with ``tracer`` named, as a user would after "auto" picked another."""
    def make():
        return (*build(), tracer)
    return make


def _on_meta(build: Callable[[], tuple]) -> Callable[[], tuple]:
    """``build()``'s model and inputs made on the meta device: shapes, no weights."""
    def make():
        with torch.device("meta"):
            return build()
    return make


def _tv(factory: str, shape: tuple, n: int = 1, **kw: Any) -> Callable[[], tuple]:
    def build():
        import torchvision

        module = torchvision.models
        for part in factory.split(".")[:-1]:
            module = getattr(module, part)
        model = getattr(module, factory.split(".")[-1])(weights=None, **kw).eval()
        inputs = tuple(torch.randn(*shape) for _ in range(n))
        return model, ((list(inputs),) if "detection" in factory else inputs)
    return build


def _step(build: Callable[[], tuple], target: Callable[[Any], torch.Tensor]) -> Callable[[], tuple]:
    """A training step over ``build()``'s model, as people write it: it closes over the model."""
    def make():
        model, inputs = build()
        model.train()

        def train_step(*args):
            loss = target(model(*args)).float().pow(2).mean()
            params = [p for p in model.parameters() if p.requires_grad]
            return loss, torch.autograd.grad(loss, params, allow_unused=True, materialize_grads=True)
        return train_step, inputs
    return make


def _joint(build: Callable[[], tuple], target: Callable[[Any], torch.Tensor]) -> Callable[[], tuple]:
    """The model and its loss as one module, opened as torch.export's joint graph."""
    def make():
        model, inputs = build()

        class WithLoss(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model.train()

            def forward(self, *args):
                return target(self.model(*args)).float().pow(2).mean()
        return WithLoss(), inputs, "export (joint)"
    return make


def _hidden(out: Any) -> torch.Tensor:
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else out["out"] if isinstance(out, dict) else out


TINY_LM = {"vocab_size": 128, "num_key_value_heads": 1, **SMALL}
#: Multi-head latent attention (q/k 16 wide, v 8) and a mixture of experts in layer 1. Its keys and values are
#: made per head, so num_key_value_heads must equal num_attention_heads (fxviz's error says so otherwise).
TINY_MLA = {**TINY_LM, "num_key_value_heads": SMALL["num_attention_heads"], "q_lora_rank": 16, "kv_lora_rank": 16,
            "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8, "moe_intermediate_size": 16,
            "n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1, "first_k_dense_replace": 1}
#: issue 32's fourth sweep: models that also appear as a training step, program or on the meta device.
FNET = _hf("FNetConfig", vocab_size=128, **SMALL)
QWEN3_NEXT = _hf("Qwen3NextConfig", head_dim=16, linear_num_value_heads=2, linear_num_key_heads=1,
                 linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4, num_experts=4,
                 num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32,
                 layer_types=["linear_attention", "full_attention"], use_cache=False, **TINY_LM)
CANINE = _hf("CanineConfig", downsampling_rate=2, num_hash_buckets=64, num_hash_functions=2,
             local_transformer_stride=4, **SMALL)
WAVLM = _hf("WavLMConfig", "audio", conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, num_buckets=32, max_bucket_distance=64,
            **SMALL)
#: a wav2vec2-like feature encoder: two convolutions, 1600 samples to 159 frames
AUDIO_CONV = {"conv_dim": (32, 32), "conv_stride": (5, 2), "conv_kernel": (10, 3), "num_conv_pos_embedding_groups": 2}
TIMESFORMER = _hf("TimesformerConfig", "video", image_size=32, patch_size=8, num_frames=2, **SMALL)

FAMILIES: dict[str, dict[str, Callable[[], tuple]]] = {
    "timm": {n: _timm(n) for n in (
        "resnet18", "convnext_atto", "efficientnet_b0", "mobilenetv3_small_100", "regnetx_002", "ghostnet_100",
        "rexnet_100", "dla34", "cspresnet50", "densenet121", "hrnet_w18_small", "poolformer_s12",
        "mobilevit_xxs", "repvgg_a0")}
    | {n: _timm(n, 224) for n in ("vit_tiny_patch16_224", "deit_tiny_patch16_224", "mixer_s16_224",
                                  "swin_tiny_patch4_window7_224", "levit_128s", "coatnet_0_rw_224", "efficientformer_l1")}
    | {"resnet18 (train step)": _step(_timm("resnet18"), lambda out: out),
       "resnet18 (export joint)": _joint(_timm("resnet18"), lambda out: out),
       "resnet18 (exported program)": _exported(_timm("resnet18")),
       "resnet18 (torch.compile'd)": _compiled(_timm("resnet18"))}
    | {"eva02_tiny": _timm("eva02_tiny_patch14_224", 56, img_size=56),
       "beit (2 blocks)": _timm("beit_base_patch16_224", img_size=64, depth=2),
       "xcit_nano": _timm("xcit_nano_12_p16_224", img_size=64),
       "crossvit_tiny": _timm("crossvit_tiny_240", 240),
       "dm_nfnet_f0": _timm("dm_nfnet_f0"),
       "fastvit_t8": _timm("fastvit_t8"),
       "edgenext_xx_small": _timm("edgenext_xx_small"),
       "gcvit_xxtiny": _timm("gcvit_xxtiny", img_size=64),
       "hiera_tiny": _timm("hiera_tiny_224", img_size=(64, 64), num_classes=0),  # its head starts at zero
       "tnt_s": _timm("tnt_s_patch16_224", img_size=64),
       "convit_tiny": _timm("convit_tiny", img_size=64)}
    | {n: _timm(n) for n in (
        "mobilenetv4_conv_small", "efficientvit_b0", "efficientvit_m0", "repghostnet_050", "hgnetv2_b0",
        "mobileone_s0", "resnest14d", "skresnet18", "res2net50_14w_8s", "selecsls42b", "ese_vovnet19b_dw",
        "cs3darknet_s", "darknet17", "xception41", "inception_next_tiny", "mambaout_femto", "starnet_s1",
        "convmixer_768_32", "resnetv2_50x1_bit", "nf_resnet26", "tresnet_m", "lambda_resnet26t", "rdnet_tiny",
        "pvt_v2_b0", "fasternet_t0", "rexnetr_100", "vgg11")}
    | {n: _timm(n, 224) for n in ("twins_svt_small", "coat_lite_tiny", "pit_ti_224", "cait_xxs24_224",
                                  "volo_d1_224", "tiny_vit_5m_224", "davit_tiny", "focalnet_tiny_srf",
                                  "nest_tiny", "efficientformerv2_s0", "maxvit_tiny_rw_224", "nextvit_small",
                                  "visformer_tiny")}
    | {n: _timm(n, 224, num_classes=0) for n in ("sequencer2d_s", "resmlp_12_224", "gmlp_ti16_224")}  # zero heads
    | {"inception_v3": _timm("inception_v3", 96),  # at 64 px its last convolutions get 2×2 maps: it fails on its own
       # attention over fixed blocks and positions: 256 px (halonet also runs at multiples of 64 px, botnet only there)
       **{n: _timm(n, 256) for n in ("halonet26t", "botnet26t_256")},
       "vit (rope, registers)": _timm("vit_medium_patch16_rope_reg1_gap_256", 64, img_size=64, depth=2),
       "vit (dynamic img size)": _timm("vit_tiny_patch16_224", 64, img_size=64, dynamic_img_size=True),
       "swin (train step)": _step(_timm("swin_tiny_patch4_window7_224", 224), lambda out: out),
       "mobilenetv4 (exported program)": _exported(_timm("mobilenetv4_conv_small")),
       "efficientvit_b0 (tracer=symbolic)": _traced_by(_timm("efficientvit_b0"), "symbolic"),
       "convnext_atto (meta device)": _on_meta(_timm("convnext_atto"))}
    | {n: _timm(n) for n in (  # issue 32's second sweep: families not tried before
        "regnety_008", "mobileone_s1", "nf_resnet50", "efficientnet_lite0", "ghostnetv2_100", "convnextv2_atto",
        "mobilevitv2_050", "lcnet_050", "gernet_s", "resnet50d", "regnetz_b16")}
    | {n: _timm(n, 256) for n in ("sehalonet33ts", "sebotnet33ts_256")}
    | {"vit_pe_core_small": _timm("vit_pe_core_small_patch16_384", 64, img_size=64)}
    | {n: _timm(n) for n in ("repvit_m0_9", "tinynet_a", "fbnetc_100", "hgnetv2_b0")}  # drawn from their shapes:
    | {f"{n} (exported program)": _exported(_timm(n)) for n in ("convnext_atto", "repvit_m0_9", "efficientnet_lite0")}
    | {"fbnetc_100 (tracer=make_fx)": _traced_by(_timm("fbnetc_100"), "make_fx"),
       "resnet18 (exported, decomposed)": lambda: _decomposed(_timm("resnet18"))}
    | {n: _timm(n) for n in (  # issue 32's fourth sweep: families not tried before
        "dpn68", "mixnet_s", "legacy_seresnet18", "ghostnetv3_050", "lcnetv2_small", "shvit_s1", "fastvit_mci0")}
    | {n: _timm(n, 224) for n in ("mvitv2_tiny", "swinv2_cr_tiny_ns_224", "vit_small_r26_s32_224", "csatv2")}
    | {"inception_v4": _timm("inception_v4", 96),
       "samvit (2 blocks)": _timm("samvit_base_patch16", 64, img_size=64, depth=2, num_classes=8),
       "vitamin_small": _timm("vitamin_small_224", 64, img_size=64)}
    | {n: _timm(n) for n in (  # issue 32's fifth sweep: families not tried before
        "cspdarknet53", "cspresnext50", "caformer_s18", "convformer_s18", "hardcorenas_a", "fbnetv3_b",
        "gcresnet33ts", "efficientnetv2_rw_t", "resnetaa50d", "hgnet_tiny", "resnet50_gn")}
    | {"inception_resnet_v2": _timm("inception_resnet_v2", 96),
       "bat_resnext26ts": _timm("bat_resnext26ts", 256),  # its attention is over a fixed 256 px grid
       "twins_pcpvt_small": _timm("twins_pcpvt_small", 64, img_size=64),
       "maxxvitv2_nano": _timm("maxxvitv2_nano_rw_256", 128, img_size=128),
       **{name: _timm(model, 64, img_size=64, depth=2) for name, model in (
           ("deit3 (2 blocks)", "deit3_small_patch16_224"), ("flexivit (2 blocks)", "flexivit_small"),
           ("vit_relpos (2 blocks)", "vit_relpos_small_patch16_224"),
           ("vit dinov3 (2 blocks)", "vit_small_patch16_dinov3"),
           ("naflexvit (2 blocks)", "naflexvit_base_patch16_gap"))}}
    # TF "same" padding; ReLU linear attention; EvoNorm; scaled weight standardisation
    | {n: _timm(n) for n in ("tf_efficientnet_b0", "tf_mixnet_s", "efficientvit_l1",
                             "test_efficientnet_evos", "test_nfnet")}
    | {"levit_conv_128s": _timm("levit_conv_128s", 224), "test_vit": _timm("test_vit", 64, img_size=64)}
    | {"vovnet39a": _timm("vovnet39a"), "haloregnetz_b": _timm("haloregnetz_b", 224),
       "lamhalobotnet50ts": _timm("lamhalobotnet50ts_256", 256),
       "swinv2 (timm, window 4)": _timm("swinv2_tiny_window8_256", 64, img_size=64, window_size=4),
       "mobilenetv5_300m": _timm("mobilenetv5_300m", 64)},
    "hf": {
        "bert": _hf("BertConfig", vocab_size=128, **SMALL),
        **_decoder("GPT2Config", vocab_size=128, n_embd=32, n_layer=2, n_head=2),
        **_decoder("LlamaConfig", **TINY_LM),
        **_decoder("MistralConfig", **TINY_LM),
        **_decoder("Qwen2Config", **TINY_LM),
        **_decoder("GemmaConfig", head_dim=16, **TINY_LM),
        **_decoder("PhiConfig", **SMALL, vocab_size=128),
        "t5": _hf("T5Config", "seq2seq", vocab_size=128, d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16),
        "bart": _hf("BartConfig", vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                    encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                    max_position_embeddings=64),
        "vit": _hf("ViTConfig", "pixels", image_size=32, patch_size=8, **SMALL),
        "wav2vec2": _hf("Wav2Vec2Config", "audio", conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
                        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, **SMALL),
        "whisper": _hf("WhisperConfig", "features", vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                       encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                       num_mel_bins=16, max_source_positions=16, max_target_positions=16, pad_token_id=0,
                       bos_token_id=1, eos_token_id=2, decoder_start_token_id=1),
        "bert (train step)": _step(_hf("BertConfig", vocab_size=128, **SMALL), _hidden),
        "bert (export joint)": _joint(_hf("BertConfig", vocab_size=128, **SMALL),  # every parameter in the loss
                                      lambda out: out.last_hidden_state.mean() + out.pooler_output.mean()),
        "distilbert": _hf("DistilBertConfig", vocab_size=128, dim=32, n_layers=2, n_heads=2, hidden_dim=64),
        "roberta": _hf("RobertaConfig", vocab_size=128, **SMALL),
        "deberta-v2": _hf("DebertaV2Config", vocab_size=128, relative_attention=True, pos_att_type=["p2c", "c2p"],
                          **SMALL),
        "albert": _hf("AlbertConfig", vocab_size=128, embedding_size=16, **SMALL),
        "clip": _hf("CLIPConfig", "text+pixels", text_config={"vocab_size": 128, **SMALL},
                    vision_config={"image_size": 32, "patch_size": 8, **SMALL}, projection_dim=16),
        "swin": _hf("SwinConfig", "pixels", image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                    num_heads=[1, 2], window_size=4),
        "convnext": _hf("ConvNextConfig", "pixels", hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
        "segformer": _hf("SegformerConfig", "pixels", num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                         hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
                         mlp_ratios=[2, 2], decoder_hidden_size=32),
        "detr": _hf("DetrConfig", "pixels", use_timm_backbone=False, use_pretrained_backbone=False,
                    backbone_config={"model_type": "resnet", "embedding_size": 16, "hidden_sizes": [16, 32],
                                     "depths": [1, 1], "layer_type": "basic", "out_features": ["stage2"]},
                    d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                    decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=8),
        "opt": _hf("OPTConfig", vocab_size=128, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
                   num_attention_heads=2, word_embed_proj_dim=32, max_position_embeddings=64, use_cache=False),
        "gpt-neox": _hf("GPTNeoXConfig", vocab_size=128, use_cache=False, **SMALL),
        "falcon": _hf("FalconConfig", vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      use_cache=False),
        "bloom (alibi)": _hf("BloomConfig", vocab_size=128, hidden_size=32, n_layer=2, n_head=2, use_cache=False),
        "mixtral (moe)": _hf("MixtralConfig", num_local_experts=4, num_experts_per_tok=2, use_cache=False, **TINY_LM),
        "qwen2-moe": _hf("Qwen2MoeConfig", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                         shared_expert_intermediate_size=32, use_cache=False, **TINY_LM),
        "mamba": _hf("MambaConfig", vocab_size=128, hidden_size=32, num_hidden_layers=2, state_size=4,
                     use_cache=False),
        "gpt2 (exported, dynamic length)": _exported(_hf("GPT2Config", vocab_size=128, n_embd=32, n_layer=2,
                                                         n_head=2, use_cache=False), dynamic_dim=1),
        "llama (train step)": _step(_hf("LlamaConfig", use_cache=False, **TINY_LM), _hidden),
        "llama (export joint)": _joint(_hf("LlamaConfig", use_cache=False, **TINY_LM), _hidden),
        "llama (meta device)": _on_meta(_hf("LlamaConfig", use_cache=False, **TINY_LM)),
        "mixtral (train step)": _step(_hf("MixtralConfig", num_local_experts=4, num_experts_per_tok=2,
                                          use_cache=False, **TINY_LM), _hidden),
        # a Python loop over the experts hit: no one graph holds every routing (dynamo's graphs, with a note why)
        "mixtral (train step, eager experts)": _step(_hf("MixtralConfig", num_local_experts=4, num_experts_per_tok=2,
                                                         experts_implementation="eager", use_cache=False, **TINY_LM),
                                                     _hidden),
        **_decoder("DeepseekV3Config", **TINY_MLA),
        "deepseekv3 (train step)": _step(_hf("DeepseekV3Config", use_cache=False, **TINY_MLA), _hidden),
        "deepseekv2 (no cache)": _hf("DeepseekV2Config", use_cache=False, **TINY_MLA),
        **_decoder("Gemma2Config", head_dim=16, sliding_window=4, attn_logit_softcapping=50.0, **TINY_LM),
        "gemma2 (lm head, softcap)": _hf("Gemma2Config", head="AutoModelForCausalLM", head_dim=16, sliding_window=4,
                                         final_logit_softcapping=30.0, use_cache=False, **TINY_LM),
        **_decoder("Gemma3TextConfig", head_dim=16, sliding_window=4, **TINY_LM),
        **_decoder("Qwen3Config", head_dim=16, **TINY_LM),
        "phi3": _hf("Phi3Config", pad_token_id=0, **TINY_LM),
        "granite": _hf("GraniteConfig", **TINY_LM),
        "cohere": _hf("CohereConfig", **TINY_LM),
        "olmo": _hf("OlmoConfig", **TINY_LM),
        "olmo2": _hf("Olmo2Config", **TINY_LM),
        "stablelm": _hf("StableLmConfig", **TINY_LM),
        "starcoder2": _hf("Starcoder2Config", **TINY_LM),
        "gpt-j": _hf("GPTJConfig", vocab_size=128, n_embd=32, n_layer=2, n_head=2, rotary_dim=8),
        "codegen": _hf("CodeGenConfig", vocab_size=128, n_embd=32, n_layer=2, n_head=4, rotary_dim=4),  # 4 | n_head,
        "electra": _hf("ElectraConfig", vocab_size=128, embedding_size=16, **SMALL),
        "xlnet": _hf("XLNetConfig", vocab_size=128, d_model=32, n_layer=2, n_head=2, d_inner=64),
        "longformer": _hf("LongformerConfig", vocab_size=128, attention_window=4, **SMALL),
        "bigbird (block sparse)": _hf("BigBirdConfig", vocab_size=128, attention_type="block_sparse", block_size=2,
                                      num_random_blocks=1, length=16, **SMALL),
        "led": _hf("LEDConfig", "seq2seq", vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                   encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                   attention_window=4, max_encoder_position_embeddings=64, max_decoder_position_embeddings=64),
        **{name: _hf(config, "seq2seq", vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                     max_position_embeddings=64, pad_token_id=0, decoder_start_token_id=1)
           for name, config in (("pegasus", "PegasusConfig"), ("mbart", "MBartConfig"), ("marian", "MarianConfig"))},
        "deit": _hf("DeiTConfig", "pixels", image_size=32, patch_size=8, **SMALL),
        "beit": _hf("BeitConfig", "pixels", image_size=32, patch_size=8, use_relative_position_bias=True, **SMALL),
        "dinov2": _hf("Dinov2Config", "pixels", image_size=32, patch_size=8, **SMALL),
        # initializer_range: at 0.02, its activations are all zero by layer 4 (eager too): nothing to compare
        "mobilevit": _hf("MobileViTConfig", "pixels", image_size=32, hidden_sizes=[16, 24, 32],
                         neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 48], initializer_range=0.5),
        "regnet": _hf("RegNetConfig", "pixels", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                      groups_width=8),
        "resnet": _hf("ResNetConfig", "pixels", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                      layer_type="basic"),
        "levit": _hf("LevitConfig", "pixels", image_size=32, hidden_sizes=[32, 48, 64], num_attention_heads=[1, 2, 2],
                     depths=[1, 1, 1], key_dim=[8, 8, 8]),
        "siglip": _hf("SiglipConfig", "text+pixels", text_config={"vocab_size": 128, **SMALL},
                      vision_config={"image_size": 32, "patch_size": 8, **SMALL}),
        "hubert": _hf("HubertConfig", "audio", conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
                      num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, **SMALL),
        "videomae": _hf("VideoMAEConfig", "video", image_size=32, patch_size=16, num_frames=4, tubelet_size=2,
                        **SMALL),
        "jamba (hybrid)": _hf("JambaConfig", num_experts=2, num_experts_per_tok=1, attn_layer_period=2,
                              attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1, mamba_d_state=4,
                              mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4, use_mamba_kernels=False,
                              use_cache=False, **TINY_LM),
        "zamba2 (hybrid)": _hf("Zamba2Config", mamba_d_state=4, mamba_headdim=8, n_mamba_heads=8,
                               layers_block_type=["mamba", "hybrid"], num_mem_blocks=1, use_mem_rope=False,
                               use_cache=False, **TINY_LM),
        "mamba2": _hf("Mamba2Config", vocab_size=128, hidden_size=32, num_hidden_layers=2, state_size=4, head_dim=8,
                      num_heads=8, n_groups=1, expand=2, chunk_size=4, use_cache=False),
        "falcon-mamba": _hf("FalconMambaConfig", vocab_size=128, hidden_size=32, num_hidden_layers=2, state_size=4,
                            use_cache=False),
        "recurrentgemma": _hf("RecurrentGemmaConfig", vocab_size=128, hidden_size=32, intermediate_size=64,
                              num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1, lru_width=32,
                              attention_window_size=4, block_types=["recurrent", "attention"], use_cache=False),
        "olmoe": _hf("OlmoeConfig", num_experts=4, num_experts_per_tok=2, use_cache=False, **TINY_LM),
        "granitemoe": _hf("GraniteMoeConfig", num_local_experts=4, num_experts_per_tok=2, use_cache=False, **TINY_LM),
        "qwen3-moe": _hf("Qwen3MoeConfig", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                         head_dim=16, use_cache=False, **TINY_LM),
        "gpt-oss (moe, sinks)": _hf("GptOssConfig", num_local_experts=4, num_experts_per_tok=2, head_dim=16,
                                    sliding_window=4, use_cache=False, **TINY_LM),
        "modernbert (local+global)": _hf("ModernBertConfig", vocab_size=128, pad_token_id=0, bos_token_id=1,
                                         eos_token_id=2, cls_token_id=1, sep_token_id=2, global_attn_every_n_layers=2,
                                         local_attention=4, **SMALL),
        "rwkv": _hf("RwkvConfig", vocab_size=128, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32,
                    intermediate_size=64, context_length=16, use_cache=False),
        **{f"reformer (lsh, {'cache' if cache else 'no cache'})": _hf(
            "ReformerConfig", vocab_size=128, hidden_size=32, num_attention_heads=2, attention_head_size=16,
            attn_layers=["local", "lsh"], axial_pos_embds=False, feed_forward_size=64, local_attn_chunk_length=4,
            lsh_attn_chunk_length=4, num_buckets=2, max_position_embeddings=64, use_cache=cache)
           for cache in (True, False)},
        # torch's flex attention: its exported graph cannot run on the CPU (torch.export's ep.module() fails alike)
        "llama (flex attention)": _hf("LlamaConfig", use_cache=False, attn_implementation="flex_attention", **TINY_LM),
        "gemma2 (train step)": _step(_hf("Gemma2Config", head_dim=16, sliding_window=4, attn_logit_softcapping=50.0,
                                         use_cache=False, **TINY_LM), _hidden),
        "qwen3 (export joint)": _joint(_hf("Qwen3Config", head_dim=16, use_cache=False, **TINY_LM), _hidden),
        "t5 (train step)": _step(_hf("T5Config", "seq2seq", vocab_size=128, d_model=32, d_ff=64, num_layers=1,
                                     num_heads=2, d_kv=16), _hidden),
        "jamba (train step)": _step(_hf("JambaConfig", num_experts=2, num_experts_per_tok=1, attn_layer_period=2,
                                        attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1,
                                        mamba_d_state=4, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4,
                                        use_mamba_kernels=False, use_cache=False, **TINY_LM), _hidden),
        "gemma3 (exported program)": _exported(_hf("Gemma3TextConfig", head_dim=16, sliding_window=4,
                                                   use_cache=False, **TINY_LM)),
        "longformer (tracer=export)": _traced_by(_hf("LongformerConfig", vocab_size=128, attention_window=4,
                                                     **SMALL), "export"),
        "electra (tracer=make_fx)": _traced_by(_hf("ElectraConfig", vocab_size=128, embedding_size=16, **SMALL),
                                               "make_fx"),
        "qwen3 (meta device)": _on_meta(_hf("Qwen3Config", head_dim=16, use_cache=False, **TINY_LM)),
        "speecht5 (text to speech)": _speecht5,
        **{name: _hf(config, "seq2seq", vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                     max_position_embeddings=64, pad_token_id=0, decoder_start_token_id=1)
           for name, config in (("blenderbot-small", "BlenderbotSmallConfig"), ("m2m100", "M2M100Config"))},
        "mpt": _hf("MptConfig", vocab_size=128, d_model=32, n_layers=2, n_heads=2, use_cache=False),
        "gpt-bigcode (mqa)": _hf("GPTBigCodeConfig", vocab_size=128, n_embd=32, n_layer=2, n_head=2, use_cache=False),
        "biogpt": _hf("BioGptConfig", vocab_size=128, use_cache=False, **SMALL),
        "smollm3 (nope layers)": _hf("SmolLM3Config", pad_token_id=0, use_cache=False, **TINY_LM),
        "mobilebert": _hf("MobileBertConfig", vocab_size=128, embedding_size=16, intra_bottleneck_size=16,
                          true_hidden_size=16, num_feedforward_networks=2, **SMALL),
        "funnel": _hf("FunnelConfig", vocab_size=128, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16,
                      d_inner=64, architectures=["FunnelModel"]),  # AutoModel has two classes for it
        "helium": _hf("HeliumConfig", head_dim=16, use_cache=False, **TINY_LM),
        # issue 32's third sweep: families not tried before, and programs drawn from their shapes
        "squeezebert": _hf("SqueezeBertConfig", vocab_size=128, embedding_size=32, q_groups=1, k_groups=1, v_groups=1,
                           post_attention_groups=1, intermediate_groups=1, output_groups=1, **SMALL),
        "roformer": _hf("RoFormerConfig", vocab_size=128, embedding_size=32, **SMALL),
        "nystromformer": _hf("NystromformerConfig", vocab_size=128, num_landmarks=4, segment_means_seq_len=8,
                             **SMALL),
        "rembert": _hf("RemBertConfig", vocab_size=128, input_embedding_size=16, output_embedding_size=16, **SMALL),
        "xglm": _hf("XGLMConfig", vocab_size=128, d_model=32, num_layers=2, attention_heads=2, ffn_dim=64,
                    use_cache=False),
        "persimmon": _hf("PersimmonConfig", use_cache=False, **{**TINY_LM, "num_key_value_heads": 2}),
        "nemotron": _hf("NemotronConfig", head_dim=16, use_cache=False, **TINY_LM),
        **{f"{name} (exported program)": _exported(build) for name, build in (
            ("roformer", _hf("RoFormerConfig", vocab_size=128, embedding_size=32, **SMALL)),
            ("persimmon", _hf("PersimmonConfig", use_cache=False, **{**TINY_LM, "num_key_value_heads": 2})),
            ("bert", _hf("BertConfig", vocab_size=128, **SMALL)))},
        "llama (exported, dynamic length)": _exported(_hf("LlamaConfig", use_cache=False, **TINY_LM), dynamic_dim=1),
        "qwen2-moe (train step)": _step(_hf("Qwen2MoeConfig", num_experts=4, num_experts_per_tok=2,
                                            moe_intermediate_size=32, shared_expert_intermediate_size=32,
                                            use_cache=False, **TINY_LM), _hidden),
        # issue 32's fourth sweep: families not tried before
        "ctrl": _hf("CTRLConfig", vocab_size=128, n_embd=32, n_layer=2, n_head=2, dff=64, use_cache=False),
        "fnet (fourier)": FNET,
        "layoutlm": _hf("LayoutLMConfig", vocab_size=128, **SMALL),
        "prophetnet (ngram)": _hf("ProphetNetConfig", "seq2seq", vocab_size=128, hidden_size=32, num_encoder_layers=1,
                                  num_decoder_layers=1, num_encoder_attention_heads=2, num_decoder_attention_heads=2,
                                  encoder_ffn_dim=64, decoder_ffn_dim=64, ngram=2, num_buckets=8,
                                  relative_max_distance=16, max_position_embeddings=64),
        "mpnet": _hf("MPNetConfig", vocab_size=128, **SMALL),
        "convbert (span conv)": _hf("ConvBertConfig", vocab_size=128, embedding_size=32, conv_kernel_size=3,
                                    **SMALL),
        "canine (chars)": CANINE,
        "gpt-neo (local attention)": _hf("GPTNeoConfig", vocab_size=128, hidden_size=32, num_layers=2, num_heads=2,
                                         attention_types=[[["global", "local"], 1]], window_size=4, use_cache=False),
        "esm": _hf("EsmConfig", vocab_size=128, pad_token_id=1, position_embedding_type="rotary", **SMALL),
        "switch-transformers (moe)": _hf("SwitchTransformersConfig", "seq2seq", vocab_size=128, d_model=32, d_ff=64,
                                         d_kv=16, num_layers=2, num_decoder_layers=2, num_heads=2, num_experts=4,
                                         encoder_sparse_step=1, decoder_sparse_step=1),
        "dbrx (moe)": _hf("DbrxConfig", d_model=32, n_heads=2, n_layers=2, max_seq_len=64, vocab_size=128,
                          attn_config={"kv_n_heads": 1, "rope_theta": 1e4, "clip_qkv": 8.0},
                          ffn_config={"ffn_hidden_size": 64, "moe_num_experts": 4, "moe_top_k": 2}, use_cache=False),
        "qwen3-next (linear attention)": QWEN3_NEXT,
        "lfm2 (short conv)": _hf("Lfm2Config", layer_types=["conv", "full_attention"], block_auto_adjust_ff_dim=False,
                                 use_cache=False, **TINY_LM),
        "wavlm": WAVLM,
        "sew-d": _hf("SEWDConfig", "audio", conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
                     num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, squeeze_factor=2,
                     max_position_embeddings=64, position_buckets=32, **SMALL),
        "encodec (conv+lstm)": _encodec,
        "speech2text": _speech2text,
        "patchtst (time series)": _patchtst,
        # stage i needs i+1 blocks: it indexes its drop-path rates by the stage
        "cvt": _hf("CvtConfig", "pixels", embed_dim=[16, 32, 48], num_heads=[1, 2, 2], depth=[1, 2, 3]),
        "swinv2": _hf("Swinv2Config", "pixels", image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                      num_heads=[1, 2], window_size=4),
        "yolos": _hf("YolosConfig", "pixels", image_size=[32, 32], patch_size=8, num_detection_tokens=4, **SMALL),
        "timesformer (video)": TIMESFORMER,
        "fnet (train step, complex grads)": _step(FNET, _hidden),
        "qwen3-next (train step)": _step(QWEN3_NEXT, _hidden),
        "canine (exported program)": _exported(CANINE),
        "wavlm (meta device)": _on_meta(WAVLM),
        "timesformer (export joint)": _joint(TIMESFORMER, _hidden),
        "encodec (tracer=make_fx)": _traced_by(_encodec, "make_fx"),
        # dynamo lifts Canine's position-id buffer to an input: the check keeps it as it is (varied, it indexed
        # past its table); PatchTST's batch norm on a transposed input: torch's fake strides are not the real ones
        "canine (tracer=dynamo)": _traced_by(CANINE, "dynamo"),
        "patchtst (tracer=dynamo)": _traced_by(_patchtst, "dynamo"),
        # issue 32's fifth sweep: families not tried before
        **{name: _hf(config, vocab_size=128, **SMALL) for name, config in (
            ("splinter", "SplinterConfig"), ("xlm-roberta-xl", "XLMRobertaXLConfig"),
            ("data2vec-text", "Data2VecTextConfig"), ("ibert", "IBertConfig"))},
        "ernie (task ids)": _hf("ErnieConfig", vocab_size=128, use_task_id=True, **SMALL),
        "xmod (language adapters)": _hf("XmodConfig", vocab_size=128, languages=["en_XX", "de_DE"],
                                        default_language="en_XX", **SMALL),
        "data2vec-audio": _hf("Data2VecAudioConfig", "audio", **AUDIO_CONV, num_conv_pos_embeddings=2,
                              conv_pos_kernel_size=3, **SMALL),
        "unispeech-sat": _hf("UniSpeechSatConfig", "audio", **AUDIO_CONV, num_conv_pos_embeddings=16, **SMALL),
        "wav2vec2-conformer": _hf("Wav2Vec2ConformerConfig", "audio", **AUDIO_CONV, num_conv_pos_embeddings=16,
                                  conformer_conv_depthwise_kernel_size=3, **SMALL),
        "dinov2 (registers)": _hf("Dinov2WithRegistersConfig", "pixels", image_size=32, patch_size=8,
                                  num_register_tokens=2, **SMALL),
        "convnextv2": _hf("ConvNextV2Config", "pixels", hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
        # hidden_dim: its head, 1280 × 0.25; initializer_range: at 0.02 its activations are all zero by block 4
        "efficientnet": _hf("EfficientNetConfig", "pixels", image_size=32, width_coefficient=0.25,
                            depth_coefficient=0.25, hidden_dim=320, initializer_range=0.5),
        "mobilenet_v2": _hf("MobileNetV2Config", "pixels", image_size=32, depth_multiplier=0.35),
        "pvt_v2": _hf("PvtV2Config", "pixels", image_size=32, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                      hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
                      mlp_ratios=[2, 2]),
        "hiera": _hf("HieraConfig", "pixels", image_size=[32, 32], embed_dim=16, depths=[1, 1], num_heads=[1, 2],
                     num_query_pool=1, masked_unit_size=[4, 4]),
        "dpt (depth)": _hf("DPTConfig", "pixels", head="AutoModelForDepthEstimation", image_size=32, patch_size=8,
                           hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=64,
                           backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[8, 16, 32, 32], fusion_hidden_size=16),
        "granitemoeshared": _hf("GraniteMoeSharedConfig", num_local_experts=4, num_experts_per_tok=2,
                                shared_intermediate_size=32, use_cache=False, **TINY_LM),
        "arcee": _hf("ArceeConfig", use_cache=False, **TINY_LM),
        "glm4": _hf("Glm4Config", head_dim=16, pad_token_id=0, use_cache=False, **TINY_LM),
        "bitnet": _hf("BitNetConfig", use_cache=False, **TINY_LM),
        **{name: _hf(config, sliding_window=4, layer_types=["sliding_attention", "full_attention"], use_cache=False,
                     **TINY_LM) for name, config in (("exaone4 (sliding)", "Exaone4Config"),
                                                     ("cohere2 (sliding)", "Cohere2Config"))},
        "nemotron-h (hybrid)": _hf("NemotronHConfig", layers_block_type=["linear_attention", "full_attention"],
                                   head_dim=16, ssm_state_size=4, mamba_num_heads=4, mamba_head_dim=8, n_groups=1,
                                   chunk_size=4, use_mamba_kernels=False, use_cache=False, **TINY_LM),
        "falcon-h1 (hybrid)": _hf("FalconH1Config", mamba_d_ssm=64, mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=1,
                                  mamba_d_state=4, mamba_chunk_size=4, use_cache=False, **TINY_LM),
        "bamba (hybrid)": _hf("BambaConfig", attn_layer_indices=[1], mamba_n_heads=4, mamba_d_head=16,
                              mamba_n_groups=1, mamba_d_state=4, mamba_chunk_size=4, use_cache=False, **TINY_LM),
        "longt5 (transient global)": _hf("LongT5Config", "seq2seq", vocab_size=128, d_model=32, d_ff=64, num_layers=1,
                                         num_heads=2, d_kv=16, encoder_attention_type="transient-global",
                                         local_radius=2, global_block_size=4),
        "mt5": _hf("MT5Config", "seq2seq", vocab_size=128, d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16),
        "fsmt": _hf("FSMTConfig", "seq2seq", langs=["en", "de"], src_vocab_size=128, tgt_vocab_size=128, d_model=32,
                    encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                    encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=0),
        "flaubert": _hf("FlaubertConfig", vocab_size=128, emb_dim=32, n_layers=2, n_heads=2),
        **{name: _hf(config, vocab_size=128, **SMALL) for name, config in (
            ("markuplm", "MarkupLMConfig"), ("yoso (lsh expectation)", "YosoConfig"))},
        # its layout stream is hidden_size / 4 wide, in 6 equal parts
        "lilt (layout)": _hf("LiltConfig", vocab_size=128, **{**SMALL, "hidden_size": 48}),
        "groupvit (grouping)": _hf("GroupViTConfig", "text+pixels", text_config={"vocab_size": 128, **SMALL},
                                   vision_config={"image_size": 32, "patch_size": 8, "hidden_size": 32,
                                                  "intermediate_size": 64, "depths": [1, 1],
                                                  "num_group_tokens": [4, 0], "num_output_groups": [4, 4],
                                                  "num_attention_heads": 2}, projection_dim=16,
                                   projection_intermediate_dim=32),
        "vitdet (windows)": _hf("VitDetConfig", "pixels", image_size=32, pretrain_image_size=32, patch_size=8,
                                window_block_indices=[0], window_size=2, use_relative_position_embeddings=True,
                                **SMALL),
        "ijepa": _hf("IJepaConfig", "pixels", image_size=32, patch_size=8, **SMALL),
        "textnet": _hf("TextNetConfig", "pixels", stem_out_channels=16, hidden_sizes=[16, 16, 32, 32, 32]),
        "deformable-detr": _hf("DeformableDetrConfig", "pixels", use_timm_backbone=False, use_pretrained_backbone=False,
                               backbone_config={"model_type": "resnet", "embedding_size": 16,
                                                "hidden_sizes": [16, 32], "depths": [1, 1], "layer_type": "basic",
                                                "out_features": ["stage1", "stage2"]},
                               num_feature_levels=2, d_model=32, encoder_layers=1, decoder_layers=1,
                               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                               decoder_ffn_dim=64, num_queries=8, encoder_n_points=2, decoder_n_points=2),
        "patchtsmixer (time series)": _hf("PatchTSMixerConfig", "series", context_length=32, num_input_channels=3,
                                          patch_length=8, patch_stride=8, d_model=16, num_layers=2),
        "mimi (codec)": _hf("MimiConfig", "waveform", hidden_size=32, num_filters=4, upsampling_ratios=[4, 2],
                            codebook_size=16, codebook_dim=16, num_quantizers=2, num_semantic_quantizers=1,
                            vector_quantization_hidden_dimension=16, upsample_groups=32, num_hidden_layers=1,
                            intermediate_size=64, num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                            sliding_window=8, use_cache=False),
        "dac (codec)": _hf("DacConfig", "waveform", encoder_hidden_size=4, downsampling_ratios=[2, 4],
                           decoder_hidden_size=16, n_codebooks=2, codebook_size=16, codebook_dim=4),
        "moonshine (speech)": _hf("MoonshineConfig", "audio+ids", vocab_size=128, hidden_size=32, intermediate_size=64,
                                  encoder_num_hidden_layers=1, decoder_num_hidden_layers=1,
                                  encoder_num_attention_heads=2, decoder_num_attention_heads=2, use_cache=False),
        "ast (spectrogram)": _hf("ASTConfig", "spectrogram", max_length=32, num_mel_bins=32, patch_size=8,
                                 frequency_stride=8, time_stride=8, **SMALL),
        "wav2vec2-bert": _hf("Wav2Vec2BertConfig", "frames", feature_projection_input_dim=16,
                             conv_depthwise_kernel_size=3, left_max_position_embeddings=8,
                             right_max_position_embeddings=8, **SMALL),
        "perceiver (latents)": _hf("PerceiverConfig", "embeddings", num_latents=8, d_latents=32, d_model=16,
                                   num_blocks=1, num_self_attends_per_block=2, num_self_attention_heads=2,
                                   num_cross_attention_heads=1),
        "upernet (convnext)": _hf("UperNetConfig", "pixels", head="AutoModelForSemanticSegmentation",
                                  backbone_config={"model_type": "convnext", "hidden_sizes": [16, 32, 48, 64],
                                                   "depths": [1, 1, 1, 1],
                                                   "out_features": ["stage1", "stage2", "stage3", "stage4"]},
                                  hidden_size=16, auxiliary_in_channels=48, auxiliary_channels=16,
                                  num_labels=3),
        "rt-detr": _hf("RTDetrConfig", "pixels", backbone_config={
            "model_type": "rt_detr_resnet", "embedding_size": 16, "hidden_sizes": [16, 32, 64, 64],
            "depths": [1, 1, 1, 1], "layer_type": "basic", "out_features": ["stage2", "stage3", "stage4"]},
            encoder_in_channels=[32, 64, 64], encoder_hidden_dim=32, encoder_ffn_dim=64, encoder_attention_heads=2,
            d_model=32, decoder_in_channels=[32, 32, 32], decoder_ffn_dim=64, decoder_layers=1,
            decoder_attention_heads=2, decoder_n_points=2, num_queries=8, num_denoising=0),
        "umt5": _hf("UMT5Config", "seq2seq", vocab_size=128, d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16),
    },
    "torchvision": {
        "lraspp (segmentation)": _tv("segmentation.lraspp_mobilenet_v3_large", (1, 3, 64, 64), num_classes=3,
                                     weights_backbone=None),
        "deeplabv3_mobilenet (segmentation)": _tv("segmentation.deeplabv3_mobilenet_v3_large", (1, 3, 64, 64),
                                                  num_classes=3, weights_backbone=None),
        "r3d_18 (video)": _tv("video.r3d_18", (1, 3, 4, 32, 32), num_classes=3),
        "s3d (video)": _tv("video.s3d", (1, 3, 16, 224, 224), num_classes=3),  # its last pool needs 7×7 maps
        "raft_small (flow)": _tv("optical_flow.raft_small", (1, 3, 128, 128), n=2),
        "fasterrcnn_mobilenet (detection)": _tv("detection.fasterrcnn_mobilenet_v3_large_320_fpn",
                                                (3, 64, 64), num_classes=3, weights_backbone=None),
        "ssdlite320 (detection)": _tv("detection.ssdlite320_mobilenet_v3_large", (3, 64, 64), num_classes=3,
                                      weights_backbone=None),
        "retinanet_resnet50 (detection)": _tv("detection.retinanet_resnet50_fpn", (3, 64, 64), num_classes=3,
                                              weights_backbone=None),
        # min_size/max_size: the transform would resize every image to 800 px first
        "maskrcnn (detection)": _tv("detection.maskrcnn_resnet50_fpn", (3, 64, 64), num_classes=3,
                                    weights_backbone=None, min_size=64, max_size=64),
        "keypointrcnn (detection)": _tv("detection.keypointrcnn_resnet50_fpn", (3, 64, 64), num_classes=2,
                                        num_keypoints=3, weights_backbone=None, min_size=64, max_size=64),
        "fcos (detection)": _tv("detection.fcos_resnet50_fpn", (3, 64, 64), num_classes=3, weights_backbone=None,
                                min_size=64, max_size=64),
        "vit (custom, tiny)": _custom_vit,
        "swin_v2_t": _tv("swin_v2_t", (1, 3, 64, 64), num_classes=3),
        "maxvit_t": _tv("maxvit_t", (1, 3, 224, 224), num_classes=3),  # its partitions need 224
        "mvit_v2_s (video)": _tv("video.mvit_v2_s", (1, 3, 16, 224, 224), num_classes=3),
        "efficientnet_v2_s": _tv("efficientnet_v2_s", (1, 3, 64, 64), num_classes=3),
        "regnet_y_400mf": _tv("regnet_y_400mf", (1, 3, 64, 64), num_classes=3),
        **{f"{name} (video)": _tv(f"video.{name}", (1, 3, 4, 32, 32), num_classes=3)
           for name in ("mc3_18", "r2plus1d_18")},
        "swin3d_t (video)": _tv("video.swin3d_t", (1, 3, 4, 64, 64), num_classes=3),
        "mvit_v1_b (video)": _tv("video.mvit_v1_b", (1, 3, 16, 224, 224), num_classes=3),
        "ssd300_vgg16 (detection)": _tv("detection.ssd300_vgg16", (3, 64, 64), num_classes=3, weights_backbone=None),
        "fasterrcnn_resnet50_v2 (detection)": _tv("detection.fasterrcnn_resnet50_fpn_v2", (3, 64, 64), num_classes=3,
                                                  weights_backbone=None, min_size=64, max_size=64),
        "retinanet_resnet50_v2 (detection)": _tv("detection.retinanet_resnet50_fpn_v2", (3, 64, 64), num_classes=3,
                                                 weights_backbone=None, min_size=64, max_size=64),
        "fcn_resnet50 (segmentation)": _tv("segmentation.fcn_resnet50", (1, 3, 64, 64), num_classes=3,
                                           weights_backbone=None, aux_loss=True),
        "deeplabv3_resnet50 (segmentation)": _tv("segmentation.deeplabv3_resnet50", (1, 3, 64, 64), num_classes=3,
                                                 weights_backbone=None),
        **{name: _tv(name, (1, 3, 64, 64), num_classes=3) for name in (
            "alexnet", "vgg11_bn", "squeezenet1_1", "shufflenet_v2_x0_5", "mnasnet0_5", "mobilenet_v2",
            "resnext50_32x4d", "wide_resnet50_2", "densenet121", "convnext_tiny", "efficientnet_b0")},
        "googlenet": _tv("googlenet", (1, 3, 64, 64), num_classes=3, aux_logits=False, init_weights=True),
        "inception_v3": _tv("inception_v3", (1, 3, 96, 96), num_classes=3, aux_logits=False, init_weights=True),
        # uncalibrated, random: its eager output is all zero, nothing to compare (resnet18's is not)
        "quantized mobilenet_v2": _tv("quantization.mobilenet_v2", (1, 3, 64, 64), quantize=True),
        "quantized resnet18": _tv("quantization.resnet18", (1, 3, 64, 64), quantize=True),
        "swin3d_t (tracer=export)": _traced_by(_tv("video.swin3d_t", (1, 3, 4, 64, 64), num_classes=3), "export"),
        "swin3d_t (train step)": _step(_tv("video.swin3d_t", (1, 3, 4, 64, 64), num_classes=3), _hidden),
        "swin3d_t (meta device)": _on_meta(_tv("video.swin3d_t", (1, 3, 4, 64, 64), num_classes=3)),
        "fasterrcnn_mobilenet (meta device)": _on_meta(_tv("detection.fasterrcnn_mobilenet_v3_large_320_fpn",
                                                           (3, 64, 64), num_classes=3, weights_backbone=None)),
        "lraspp (train step)": _step(_tv("segmentation.lraspp_mobilenet_v3_large", (2, 3, 64, 64), num_classes=3,
                                         weights_backbone=None), _hidden),
        # issue 32's fourth sweep: a detector in training mode, fed images and their targets (a list of dicts)
        "fasterrcnn_mobilenet (train mode, targets)": _detector_training(num_classes=3),
        "raft_large (flow)": _tv("optical_flow.raft_large", (1, 3, 128, 128), n=2),
        # issue 32's fifth sweep: the other detectors as trained, on targets; families not tried before
        **{f"{name} (train mode, targets)": _detector_training(factory, **kw) for name, factory, kw in (
            ("retinanet_resnet50", "retinanet_resnet50_fpn", {"num_classes": 3, "min_size": 64, "max_size": 64}),
            ("fcos", "fcos_resnet50_fpn", {"num_classes": 3, "min_size": 64, "max_size": 64}),
            ("ssdlite320", "ssdlite320_mobilenet_v3_large", {"num_classes": 3, "batch": 2}),
            ("maskrcnn", "maskrcnn_resnet50_fpn", {"num_classes": 3, "min_size": 64, "max_size": 64}),
            ("keypointrcnn", "keypointrcnn_resnet50_fpn", {"num_classes": 2, "num_keypoints": 3, "min_size": 64,
                                                           "max_size": 64}))},
        "swin_t": _tv("swin_t", (1, 3, 64, 64), num_classes=3),
        **{f"quantized {name}": _tv(f"quantization.{name}", (1, 3, 64, 64), quantize=True)
           for name in ("googlenet", "shufflenet_v2_x0_5")},
        # mobilenet_v3_large and inception_v3, quantized as they are (uncalibrated): all zero in eager too
        "quantized resnext101_32x8d": _tv("quantization.resnext101_32x8d", (1, 3, 32, 32), quantize=True),
    },
}
#: issue 32's fifth sweep: some of its new families as a training step, a joint graph, a program, on the meta device
#: or under another tracer
_TIMM, _HF, _TV = FAMILIES["timm"], FAMILIES["hf"], FAMILIES["torchvision"]
_TIMM |= {"caformer_s18 (train step)": _step(_TIMM["caformer_s18"], lambda out: out),
          "tf_efficientnet_b0 (exported program)": _exported(_TIMM["tf_efficientnet_b0"]),
          "efficientvit_l1 (export joint)": _joint(_TIMM["efficientvit_l1"], lambda out: out)}
_HF |= {"nemotron-h (train step)": _step(_HF["nemotron-h (hybrid)"], _hidden),
        "deformable-detr (train step)": _step(_HF["deformable-detr"], _hidden),
        "vitdet (export joint)": _joint(_HF["vitdet (windows)"], _hidden),
        # its layer drop draws a random number in training: no one joint graph; a training step, dynamo's graphs
        "wav2vec2-conformer (export joint)": _joint(_HF["wav2vec2-conformer"], _hidden),
        "wav2vec2-conformer (train step)": _step(_HF["wav2vec2-conformer"], _hidden),
        "dac (meta device)": _on_meta(_HF["dac (codec)"]),
        "bamba (meta device)": _on_meta(_HF["bamba (hybrid)"]),
        "longt5 (tracer=dynamo)": _traced_by(_HF["longt5 (transient global)"], "dynamo"),
        "mimi (train step)": _step(_HF["mimi (codec)"], lambda out: out.audio_values),
        # integer-only arithmetic: custom autograd Functions rounding with straight-through gradients
        "ibert (quant mode)": _hf("IBertConfig", vocab_size=128, quant_mode=True, **SMALL),
        "bitnet (train step)": _step(_HF["bitnet"], _hidden),
        "dac (train step, weight norm)": _step(_HF["dac (codec)"], lambda out: out.audio_values),
        "rt-detr (exported program)": _exported(_HF["rt-detr"]),
        "perceiver (export joint)": _joint(_HF["perceiver (latents)"], _hidden)}
_TV |= {"swin_t (export joint)": _joint(_TV["swin_t"], lambda out: out)}
#: issue 32's sixth sweep: families not tried before (timm's newer ones, Hugging Face's, torchvision's), then a few
#: of them as a training step, a joint graph, a program, on the meta device or under another tracer
_TIMM |= {n: _timm(n) for n in (
    "cpubone_b0_bfrobust", "cspnext_tiny", "efficientvim_m1", "iformer_t", "lowformer_b0", "swiftformer_xs",
    "legacy_xception", "nasnetalarge", "mobilenetv4_hybrid_medium")} | {
    "hieradet_small": _timm("hieradet_small", num_classes=0)} | {  # its head starts at zero
    name: _timm(model, size, img_size=size, depth=2) for name, model, size in (
        ("gemma4_vit (2 blocks)", "gemma4_vit_167m", 64), ("qwen3_vit (2 blocks)", "qwen3_vit_88m", 64),
        ("deepseek_vit (2 blocks)", "deepseek_vit_412m", 56))}  # its patches are 14 px
_HF |= {
    "focalnet": _hf("FocalNetConfig", "pixels", image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                    focal_levels=[2, 2], focal_windows=[3, 3]),
    "data2vec-vision": _hf("Data2VecVisionConfig", "pixels", image_size=32, patch_size=8,
                           use_relative_position_bias=True, **SMALL),
    # its masking draws random noise in each forward: eager differs from itself
    "vit-mae (random masking)": _hf("ViTMAEConfig", "pixels", image_size=32, patch_size=8, **SMALL),
    "mobilenet_v1": _hf("MobileNetV1Config", "pixels", image_size=32, depth_multiplier=0.25),
    "pvt": _hf("PvtConfig", "pixels", image_size=32, hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1],
               num_attention_heads=[1, 1, 2, 2]),
    "glpn (depth)": _hf("GLPNConfig", "pixels", hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1],
                        decoder_hidden_size=16, num_attention_heads=[1, 1, 2, 2]),
    "conditional-detr": _hf("ConditionalDetrConfig", "pixels", use_timm_backbone=False, use_pretrained_backbone=False,
                            backbone_config={"model_type": "resnet", "embedding_size": 16, "hidden_sizes": [16, 32],
                                             "depths": [1, 1], "layer_type": "basic", "out_features": ["stage2"]},
                            d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                            decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=8),
    "mra (sparse attention)": _hf("MraConfig", vocab_size=128, max_position_embeddings=64, block_per_row=2,
                                  approx_mode="sparse", length=64, **SMALL),
    **{name: _hf(config, vocab_size=128, **SMALL) for name, config in (
        ("nomic-bert", "NomicBertConfig"), ("deberta", "DebertaConfig"))},
    "xlm": _hf("XLMConfig", vocab_size=128, emb_dim=32, n_layers=2, n_heads=2),
    **{name: _hf(config, use_cache=False, **kw, **TINY_LM) for name, config, kw in (
        ("doge", "DogeConfig", {}), ("apertus (xielu)", "ApertusConfig", {}),
        ("minimax (lightning attention)", "MiniMaxConfig", {
            "num_local_experts": 4, "num_experts_per_tok": 2, "block_size": 4, "head_dim": 16,
            "layer_types": ["linear_attention", "full_attention"]}),
        ("glm4-moe", "Glm4MoeConfig", {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                                       "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "head_dim": 16}))},
    "jetmoe": _hf("JetMoeConfig", vocab_size=128, hidden_size=32, num_hidden_layers=2, num_key_value_heads=2,
                  kv_channels=16, intermediate_size=64, num_local_experts=4, num_experts_per_tok=2, use_cache=False),
    "gemma3n-text (altup, laurel)": _hf(
        "Gemma3nTextConfig", use_cache=False, head_dim=16, vocab_size_per_layer_input=128,
        hidden_size_per_layer_input=8, laurel_rank=4, altup_num_inputs=2, num_kv_shared_layers=0, sliding_window=4,
        layer_types=["sliding_attention", "full_attention"], activation_sparsity_pattern=[0.0, 0.0],
        **{**TINY_LM, "intermediate_size": [64, 64]}),
    "xlstm": _hf("xLSTMConfig", vocab_size=128, hidden_size=32, embedding_dim=32, num_hidden_layers=2, num_heads=2,
                 mode="train", chunk_size=4, qk_dim_factor=0.5, v_dim_factor=1.0, use_cache=False),
    "pegasus-x (block-local)": _hf("PegasusXConfig", "seq2seq", vocab_size=128, d_model=32, encoder_layers=1,
                                   decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                                   encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, block_size=4,
                                   num_global_tokens=2),
    "nllb-moe": _hf("NllbMoeConfig", "seq2seq", vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2,
                    encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                    max_position_embeddings=64, num_experts=4, expert_capacity=4, encoder_sparse_step=2,
                    decoder_sparse_step=2),
    "sew (squeezed)": _hf("SEWConfig", "audio", **AUDIO_CONV, num_conv_pos_embeddings=16, squeeze_factor=2, **SMALL),
    "vivit (video)": _hf("VivitConfig", "video", image_size=32, num_frames=4, tubelet_size=[2, 8, 8], **SMALL),
    "decision-transformer": _decision_transformer,
    "vits (speech, data-dependent length)": _vits,
    # its noise sequence drawn in forward when not given
    "univnet (vocoder)": _hf("UnivNetConfig", "frames", model_in_channels=8, model_hidden_channels=8,
                             num_mel_bins=16, feature_projection_input_dim=16, resblock_kernel_sizes=[3],
                             resblock_stride_sizes=[4], resblock_dilation_sizes=[[1, 3]],
                             kernel_predictor_num_blocks=1, kernel_predictor_hidden_channels=8),
    "clap (text+audio)": _hf("ClapConfig", "text+mel", text_config={"vocab_size": 128, **SMALL}, projection_dim=16,
                             audio_config={"spec_size": 64, "patch_size": 4, "patch_embeds_hidden_size": 16,
                                           "depths": [1, 1], "num_attention_heads": [1, 2], "window_size": 4,
                                           "hidden_size": 32, "num_mel_bins": 64, "enable_fusion": False}),
    "timesfm (forecast)": _timesfm}
_TV |= {
    **{name: _tv(name, (1, 3, 64, 64), num_classes=3) for name in ("mobilenet_v3_small", "regnet_x_400mf")},
    # quantizable, not quantized: float modules with quant/dequant stubs and FloatFunctional adds
    "quantizable mobilenet_v3_large": _tv("quantization.mobilenet_v3_large", (1, 3, 64, 64), num_classes=3),
    "fasterrcnn_mobilenet_fpn (detection)": _tv("detection.fasterrcnn_mobilenet_v3_large_fpn", (3, 64, 64),
                                                num_classes=3, weights_backbone=None, min_size=64, max_size=64),
    "maskrcnn_v2 (detection)": _tv("detection.maskrcnn_resnet50_fpn_v2", (3, 64, 64), num_classes=3,
                                   weights_backbone=None, min_size=64, max_size=64),
    "raft_small (exported program)": _exported(_tv("optical_flow.raft_small", (1, 3, 128, 128), n=2))}
_TIMM |= {"efficientvim_m1 (train step)": _step(_timm("efficientvim_m1", batch=2), lambda out: out),
          "hieradet_small (exported program)": _exported(_TIMM["hieradet_small"]),
          "lowformer_b0 (export joint)": _joint(_TIMM["lowformer_b0"], lambda out: out)}
_HF |= {"minimax (train step)": _step(_HF["minimax (lightning attention)"], _hidden),
        "gemma3n-text (meta device)": _on_meta(_HF["gemma3n-text (altup, laurel)"]),
        "xlstm (tracer=dynamo)": _traced_by(_HF["xlstm"], "dynamo"),
        "glpn (exported program)": _exported(_HF["glpn (depth)"]),
        "vit-mae (train step)": _step(_HF["vit-mae (random masking)"], _hidden),
        "conditional-detr (train step)": _step(_HF["conditional-detr"], _hidden),
        "jetmoe (train step)": _step(_HF["jetmoe"], _hidden),
        "decision-transformer (export joint)": _joint(_decision_transformer, lambda out: out.state_preds.mean()
                                                      + out.action_preds.mean() + out.return_preds.mean()),
        "minimax (exported, decomposed)": lambda: _decomposed(_HF["minimax (lightning attention)"]),
        "deberta (torch.compile'd)": _compiled(_HF["deberta"]),
        # refused, as it should be: its expert loop runs over the experts hit (a data-dependent size)
        "nllb-moe (tracer=make_fx)": _traced_by(_HF["nllb-moe"], "make_fx"),
        "pegasus-x (tracer=dynamo)": _traced_by(_HF["pegasus-x (block-local)"], "dynamo")}
_TIMM |= {"cspnext_tiny (meta device)": _on_meta(_TIMM["cspnext_tiny"]),
          "swiftformer_xs (tracer=make_fx)": _traced_by(_TIMM["swiftformer_xs"], "make_fx")}
_TV |= {"quantizable mobilenet_v3_large (export joint)": _joint(_TV["quantizable mobilenet_v3_large"],
                                                                 lambda out: out)}
#: issue 32's seventh sweep: families not tried before (timm's, Hugging Face's, torchvision's and its ops taking dicts
#: and lists), then a few of them as a training step, a joint graph, a saved program (.pt2), on the meta device or
#: under another tracer
_TIMM |= {n: _timm(n) for n in (
    "darknetaa53", "densenetblur121d", "eca_nfnet_l0", "ecaresnetlight", "gc_efficientnetv2_rw_t", "gcresnext26ts",
    "mnasnet_small", "mobilenet_edgetpu_v2_xs", "poolformerv2_s12", "regnetv_040", "resnetblur18", "resnetrs50",
    "sedarknet21", "semnasnet_050", "seresnext26ts", "skresnext50_32x4d", "spnasnet_100", "nfnet_f0",
    "test_byobnet", "test_convnext2", "test_efficientnet_gn", "test_mambaout")} | {
    "pnasnet5large": _timm("pnasnet5large", 96),  # like nasnetalarge: its cells need more than 64 px
    "coatnext_nano": _timm("coatnext_nano_rw_224", 64, img_size=64),
    "gmixer_12": _timm("gmixer_12_224", 64, img_size=64, num_classes=0),  # its head starts at zero
    "maxxvit_rmlp_nano": _timm("maxxvit_rmlp_nano_rw_256", 128, img_size=128),
    "halo2botnet50ts": _timm("halo2botnet50ts_256", 256),
    "test_vit3": _timm("test_vit3", 64, img_size=64),
    **{name: _timm(model, size, img_size=size, depth=2) for name, model, size in (
        ("aimv2 (2 blocks)", "aimv2_large_patch14_224", 56), ("beitv2 (2 blocks)", "beitv2_base_patch16_224", 64))}}


def _pt2(build: Callable[[], tuple]) -> Callable[[], tuple]:
    """``build()``'s program saved to a ``.pt2`` file and handed to fxviz as that path, with no inputs (the
    program's saved example inputs are used), as a user opens a program someone else exported."""
    def make():
        import tempfile

        ep, _ = _exported(build)()
        path = os.path.join(tempfile.mkdtemp(prefix="fxviz-sweep-"), "program.pt2")
        torch.export.save(ep, path)
        return path, None
    return make


def _fpn() -> tuple:
    """torchvision's FeaturePyramidNetwork as detectors use it: an OrderedDict of feature maps in and out."""
    from collections import OrderedDict

    from torchvision.ops import FeaturePyramidNetwork

    model = FeaturePyramidNetwork([8, 16, 32], 16).eval()
    return model, (OrderedDict((f"p{i}", torch.randn(1, c, 32 >> i, 32 >> i)) for i, c in enumerate((8, 16, 32))),)


def _deform_conv() -> tuple:
    """torchvision's DeformConv2d: a convolution sampling where a second input (its offsets) says."""
    from torchvision.ops import DeformConv2d

    return DeformConv2d(4, 8, 3, padding=1).eval(), (torch.randn(1, 4, 8, 8), torch.randn(1, 18, 8, 8))


def _roi_align() -> tuple:
    """torchvision's MultiScaleRoIAlign: a dict of feature maps, a list of boxes per image and the image sizes."""
    from torchvision.ops import MultiScaleRoIAlign

    features = {"p0": torch.randn(1, 4, 16, 16), "p1": torch.randn(1, 4, 8, 8)}
    return (MultiScaleRoIAlign(["p0", "p1"], 3, 2).eval(),
            (features, [torch.tensor([[1.0, 1.0, 20.0, 20.0], [4.0, 8.0, 60.0, 50.0]])], [(64, 64)]))


_TV |= {**{name: _tv(name, (1, 3, size, size), num_classes=3) for name, size in (
            ("squeezenet1_0", 64), ("resnet34", 64), ("vgg13_bn", 64), ("vit_b_32", 224))},
        "quantized resnet50": _tv("quantization.resnet50", (1, 3, 64, 64), quantize=True),
        "fasterrcnn_resnet50 (detection)": _tv("detection.fasterrcnn_resnet50_fpn", (3, 64, 64), num_classes=3,
                                               weights_backbone=None, min_size=64, max_size=64),
        "feature pyramid (dict in, dict out)": _fpn,
        "deform_conv2d (offsets input)": _deform_conv,
        "multiscale roi_align (dict, boxes list)": _roi_align}
DIFFLLAMA = _hf("DiffLlamaConfig", use_cache=False, **{**TINY_LM, "num_key_value_heads": 2})


def _t5gemma() -> tuple:
    """T5Gemma: Gemma 2 layers as encoder and decoder; its third input is position ids (None), the fourth the decoder's."""
    model, (ids, mask, _) = _hf("T5GemmaConfig", "seq2seq", vocab_size=128, encoder={**TINY_LM, "head_dim": 16},
                                decoder={**TINY_LM, "head_dim": 16}, use_cache=False)()
    return model, (ids, mask, None, ids)


BIT = _hf("BitConfig", "pixels", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], num_groups=4)
POOLFORMER = _hf("PoolFormerConfig", "pixels", hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1])
_HF |= {
    "bit (weight standardised)": BIT,
    "bit (preact, 3 stages)": _hf("BitConfig", "pixels", embedding_size=16, hidden_sizes=[16, 32, 48], depths=[1, 1, 1],
                                  num_groups=4, layer_type="bottleneck", global_padding="SAME"),
    # output_stride: its last stages dilated, not strided (at 32 px they reach 1×1); initializer_range: as mobilevit's
    "mobilevitv2": _hf("MobileViTV2Config", "pixels", image_size=32, width_multiplier=0.25, output_stride=8,
                       initializer_range=0.5),
    "swiftformer": _hf("SwiftFormerConfig", "pixels", depths=[1, 1, 1, 1], embed_dims=[16, 16, 32, 32]),
    "hgnet_v2": _hf("HGNetV2Config", "pixels"),
    "poolformer": POOLFORMER,
    "vit-msn": _hf("ViTMSNConfig", "pixels", image_size=32, patch_size=8, **SMALL),
    "dinov3-vit (rope)": _hf("DINOv3ViTConfig", "pixels", image_size=32, patch_size=8, num_register_tokens=2,
                             **SMALL),
    "dinov3-convnext": _hf("DINOv3ConvNextConfig", "pixels", hidden_sizes=[16, 32], depths=[1, 1]),
    "diffllama (differential attention)": DIFFLLAMA,
    "minicpm3 (mla)": _hf("MiniCPM3Config", use_cache=False, q_lora_rank=16, kv_lora_rank=16, qk_nope_head_dim=8,
                          qk_rope_head_dim=8, v_head_dim=8, **{**TINY_LM, "num_key_value_heads": 2}),
    "ernie4.5-moe": _hf("Ernie4_5_MoeConfig", moe_num_experts=4, moe_k=2, moe_intermediate_size=32,
                        moe_layer_start_index=1, moe_num_shared_experts=1, use_cache=False, **TINY_LM),
    "hunyuan-moe": _hf("HunYuanMoEV1Config", num_experts=4, moe_topk=2, head_dim=16, use_cache=False, **TINY_LM),
    "t5gemma (encoder-decoder)": _t5gemma,
    "plbart": _hf("PLBartConfig", "seq2seq", vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                  encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                  max_position_embeddings=64, pad_token_id=0),
    "bigbird-pegasus (block sparse)": _hf("BigBirdPegasusConfig", "seq2seq", vocab_size=128, d_model=32,
                                          encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                          decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                          max_position_embeddings=64, attention_type="block_sparse", block_size=2,
                                          num_random_blocks=1, length=32),
    "openai-gpt": _hf("OpenAIGPTConfig", vocab_size=128, n_embd=32, n_layer=2, n_head=2, n_positions=64),
    "megatron-bert": _hf("MegatronBertConfig", vocab_size=128, **SMALL),
    "roberta-prelayernorm": _hf("RobertaPreLayerNormConfig", vocab_size=128, **SMALL),
    "imagegpt (pixels as tokens)": _hf("ImageGPTConfig", vocab_size=128, n_embd=32, n_layer=2, n_head=2,
                                       n_positions=64),
    "zamba (hybrid)": _hf("ZambaConfig", attention_hidden_size=64, attention_head_dim=32, n_mamba_heads=2,
                          mamba_d_state=4, mamba_dt_rank=4, attn_layer_period=2, attn_layer_offset=0,
                          use_cache=False, **{**TINY_LM, "num_hidden_layers": 5}),  # its shared block in 2 layers
    "granitemoehybrid": _hf("GraniteMoeHybridConfig", layer_types=["mamba", "attention"], mamba_n_heads=4,
                            mamba_d_head=16, mamba_n_groups=1, mamba_d_state=4, mamba_chunk_size=4,
                            num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=32,
                            use_cache=False, **TINY_LM),
    "llama4-text (moe, chunked)": _hf("Llama4TextConfig", head_dim=16, intermediate_size_mlp=64, num_local_experts=2,
                                      num_experts_per_tok=1, interleave_moe_layer_step=1, attention_chunk_size=4,
                                      use_cache=False, **TINY_LM),
    "vaultgemma": _hf("VaultGemmaConfig", head_dim=16, use_cache=False, **TINY_LM),
    "dots1 (moe)": _hf("Dots1Config", n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                       n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1, use_cache=False,
                       **TINY_LM),
    "dab-detr": _hf("DabDetrConfig", "pixels", use_timm_backbone=False, use_pretrained_backbone=False,
                    backbone_config={"model_type": "resnet", "embedding_size": 16, "hidden_sizes": [16, 32],
                                     "depths": [1, 1], "layer_type": "basic", "out_features": ["stage2"]},
                    hidden_size=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                    decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=8),
    "rt-detr-v2": _hf("RTDetrV2Config", "pixels", backbone_config={
        "model_type": "rt_detr_resnet", "embedding_size": 16, "hidden_sizes": [16, 32, 64, 64], "depths": [1, 1, 1, 1],
        "layer_type": "basic", "out_features": ["stage2", "stage3", "stage4"]},
        encoder_in_channels=[32, 64, 64], encoder_hidden_dim=32, encoder_ffn_dim=64, encoder_attention_heads=2,
        d_model=32, decoder_in_channels=[32, 32, 32], decoder_ffn_dim=64, decoder_layers=1, decoder_attention_heads=2,
        decoder_n_points=2, num_queries=8, num_denoising=0)}
_TIMM |= {"resnetrs50 (train step)": _step(_TIMM["resnetrs50"], lambda out: out),
          # a batch of 2: its selective kernels' batch norm sees 1×1 maps (one image fails in training, eager too)
          "skresnext50 (export joint)": _joint(_timm("skresnext50_32x4d", batch=2), lambda out: out),
          "eca_nfnet_l0 (saved program, .pt2)": _pt2(_TIMM["eca_nfnet_l0"]),
          "seresnext26ts (meta device)": _on_meta(_TIMM["seresnext26ts"]),
          "aimv2 (tracer=make_fx)": _traced_by(_TIMM["aimv2 (2 blocks)"], "make_fx")}
_HF |= {"diffllama (saved program, .pt2)": _pt2(DIFFLLAMA),
        "t5gemma (tracer=dynamo)": _traced_by(_t5gemma, "dynamo"),
        "bit (tracer=make_fx)": _traced_by(BIT, "make_fx"),
        "poolformer (export joint)": _joint(POOLFORMER, _hidden),
        "hunyuan-moe (train step)": _step(_HF["hunyuan-moe"], _hidden),
        # tied embeddings (shared, encoder's and decoder's): the program lists each name, the joint graph refused two
        "plbart (export joint, tied embeddings)": _joint(_HF["plbart"], _hidden),
        "dinov3-vit (exported, decomposed)": lambda: _decomposed(_HF["dinov3-vit (rope)"]),
        "ernie4.5-moe (meta device)": _on_meta(_HF["ernie4.5-moe"])}
_TV |= {"squeezenet1_0 (saved program, .pt2)": _pt2(_TV["squeezenet1_0"]),
        "feature pyramid (tracer=dynamo)": _traced_by(_fpn, "dynamo"),
        # a dict input: the joint graph took it flat, and its check (drawn from shapes, run first there) failed
        "feature pyramid (export joint)": _joint(_fpn, lambda out: sum(v.float().pow(2).mean() for v in out.values())),
        "resnet34 (train step)": _step(_TV["resnet34"], lambda out: out)}
#: issue 32's eighth sweep: timm variants whose mechanism no row had (per-sample routed convolutions, parallel blocks,
#: attention-pool heads, mixed rope, hybrids, focus stems, RMS norms), Hugging Face families not tried before
#: (forecasters, newer decoders and MoEs, super-resolution, video, text+image), then a few of them in other forms
_TIMM |= {n: _timm(n) for n in (
    "efficientnet_cc_b0_4e", "efficientnet_b0_g8_gn", "efficientnet_blur_b0", "test_efficientnet_ln", "test_resnet",
    "regnetz_d8_evos", "repvgg_d2se", "resnet51q", "convnext_atto_rms", "convnext_atto_ols", "cs3darknet_focus_s",
    "xception65p", "dla60_res2next", "tf_efficientnetv2_b0", "mobilenet_edgetpu_100", "ecaresnet50d_pruned")} | {
    "resnet50_clip (attention pool)": _timm("resnet50_clip", 64, img_size=64),
    "crossvit_9_dagger": _timm("crossvit_9_dagger_240", 240),
    "pit_ti_distilled": _timm("pit_ti_distilled_224", 224),
    "swin_s3_tiny": _timm("swin_s3_tiny_224", 224),
    "lambda_resnet26rpt": _timm("lambda_resnet26rpt_256", 256),
    "vit_tiny_r_s16_p8 (hybrid)": _timm("vit_tiny_r_s16_p8_224", 64, img_size=64),
    "sam2_hiera_tiny": _timm("sam2_hiera_tiny", 64, num_classes=0),
    **{name: _timm(model, 64, img_size=64, depth=2) for name, model in (
        ("vit parallel blocks (2 blocks)", "vit_small_patch16_18x2_224"),
        ("vit map head (2 blocks)", "vit_so150m_patch16_reg4_map_256"),
        ("vit mixed rope (2 blocks)", "vit_small_patch16_rope_mixed_224"),
        ("naflexvit map (2 blocks)", "naflexvit_base_patch16_map"))}}


def _forecaster(config: str, **kw: Any) -> Callable[[], tuple]:
    """A probabilistic forecaster (Autoformer, Informer, the time series transformer): past values with their lags,
    time features and observed mask, then the future values and time features it is taught on."""
    def build():
        import transformers

        cfg = getattr(transformers, config)(prediction_length=4, context_length=8, lags_sequence=[1, 2],
                                            num_time_features=1, d_model=16, encoder_layers=1, decoder_layers=1,
                                            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                                            decoder_ffn_dim=32, **kw)
        model = transformers.AutoModel.from_config(cfg).eval()
        past = 8 + 2
        return model, (torch.randn(1, past), torch.randn(1, past, 1), torch.ones(1, past), None, None,
                       torch.randn(1, 4), torch.randn(1, 4, 1))
    return build


def _vilt() -> tuple:
    """ViLT: text tokens and image patches in one transformer (ids, mask, token types, pixels)."""
    model, (ids,) = _hf("ViltConfig", vocab_size=128, image_size=32, patch_size=8, max_image_length=-1,
                        max_position_embeddings=64, **SMALL)()
    return model, (ids, torch.ones_like(ids), torch.zeros_like(ids), torch.randn(1, 3, 32, 32))


def _luke() -> tuple:
    """LUKE: words and entities (ids, their mask, then entity ids and the word positions each spans)."""
    model, (ids,) = _hf("LukeConfig", vocab_size=128, entity_vocab_size=16, entity_emb_size=16, **SMALL)()
    entities, spans = torch.tensor([[3, 5]]), torch.tensor([[[1, 2, -1], [4, -1, -1]]])
    return model, (ids, torch.ones_like(ids), None, None, entities, torch.ones_like(entities), None, spans)


def _vjepa2() -> tuple:
    """V-JEPA 2: a video's tubelets through the encoder, then its predictor on masked positions."""
    model, _ = _hf("VJEPA2Config", crop_size=32, frames_per_clip=4, patch_size=8, tubelet_size=2, hidden_size=32,
                   num_hidden_layers=2, num_attention_heads=2, pred_hidden_size=32, pred_num_attention_heads=2,
                   pred_num_hidden_layers=1, num_pooler_layers=1)()
    return model, (torch.randn(1, 4, 3, 32, 32),)


AUTOFORMER = _forecaster("AutoformerConfig", moving_average=3, label_length=4)  # its decoder starts 4 steps back
KIMI_LINEAR = _hf("KimiLinearConfig", use_cache=False, pad_token_id=0, **{**TINY_MLA, "moe_intermediate_size": 16})
#: torch.export alone fails on the forecasters, MVP and Blenderbot (their cache object is no pytree; fxviz's
#: export handles it), torchview on the forecasters (KeyError: its own)
_HF |= {
    "autoformer (forecast)": AUTOFORMER,
    "informer (prob-sparse)": _forecaster("InformerConfig"),
    "time-series-transformer": _forecaster("TimeSeriesTransformerConfig"),
    "vilt (text+image)": _vilt,  # image sizes read from the pixel mask's values: dynamo's graphs, cut there
    "luke (entities)": _luke,
    "vjepa2 (video)": _vjepa2,
    "owlvit (text+image)": _hf("OwlViTConfig", "text+pixels", text_config={"vocab_size": 128, **SMALL},
                               vision_config={"image_size": 32, "patch_size": 8, **SMALL}, projection_dim=16),
    "swin2sr (super-resolution)": _hf("Swin2SRConfig", "pixels", image_size=32, patch_size=1, embed_dim=16,
                                      depths=[1, 1], num_heads=[2, 2], window_size=4, upscale=2),
    "mgp-str (scene text)": _hf("MgpstrConfig", "pixels", image_size=[32, 32],
                                patch_size=8, max_token_length=8, num_character_labels=16, num_bpe_labels=16,
                                num_wordpiece_labels=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2),
    "tapas (table token types)": _hf("TapasConfig", vocab_size=128, **SMALL),
    "bert-generation": _hf("BertGenerationConfig", vocab_size=128, **SMALL),
    "camembert": _hf("CamembertConfig", vocab_size=128, **SMALL),
    "gpt-neox-japanese": _hf("GPTNeoXJapaneseConfig", vocab_size=128, hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_multiple_size=2, use_cache=False),
    "mvp (prompts)": _hf("MvpConfig", "seq2seq", vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                         encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                         max_position_embeddings=64, use_prompt=True, prompt_length=4, prompt_mid_dim=16),
    "blenderbot": _hf("BlenderbotConfig", "seq2seq", vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                      encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                      max_position_embeddings=64, pad_token_id=0, decoder_start_token_id=1),
    "unispeech": _hf("UniSpeechConfig", "audio", **AUDIO_CONV, num_conv_pos_embeddings=16, **SMALL),
    "modernbert-decoder": _hf("ModernBertDecoderConfig", vocab_size=128, pad_token_id=0, bos_token_id=1,
                              eos_token_id=2, cls_token_id=1, sep_token_id=2, local_attention=4,
                              layer_types=["sliding_attention", "full_attention"], use_cache=False, **SMALL),
    "kimi-linear (mla, moe)": KIMI_LINEAR,
    **{name: _hf(config, use_cache=False, **kw, **TINY_LM) for name, config, kw in (
        ("ernie4.5", "Ernie4_5Config", {"head_dim": 16}), ("exaone", "ExaoneConfig", {}),
        ("glm", "GlmConfig", {"pad_token_id": 0}),
        ("hunyuan-dense", "HunYuanDenseV1Config", {"head_dim": 16}), ("seed-oss", "SeedOssConfig", {"head_dim": 16}),
        ("ministral (sliding)", "MinistralConfig", {"sliding_window": 4, "head_dim": 16,
                                                    "layer_types": ["sliding_attention", "full_attention"]}),
        ("olmo3 (sliding)", "Olmo3Config", {"sliding_window": 4, "layer_types": ["sliding_attention",
                                                                                 "full_attention"]}),
        ("phimoe", "PhimoeConfig", {"num_local_experts": 4, "num_experts_per_tok": 2}),
        ("flex-olmo (moe)", "FlexOlmoConfig", {"num_experts": 4, "num_experts_per_tok": 2, "pad_token_id": 0}),
        ("minimax-m2 (moe)", "MiniMaxM2Config", {"num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 16}),
        ("lfm2-moe", "Lfm2MoeConfig", {"moe_intermediate_size": 16, "num_experts": 4, "num_experts_per_tok": 2,
                                       "num_dense_layers": 1, "layer_types": ["conv", "full_attention"]}),
        ("afmoe", "AfmoeConfig", {"moe_intermediate_size": 16, "num_experts": 4, "num_experts_per_tok": 2,
                                  "num_dense_layers": 1, "head_dim": 16, "sliding_window": 4,
                                  "global_attn_every_n_layers": 2}),
        ("olmo-hybrid (linear attention)", "OlmoHybridConfig", {
            "layer_types": ["linear_attention", "full_attention"], "linear_num_key_heads": 1,
            "linear_num_value_heads": 2, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
            "linear_conv_kernel_dim": 4, "pad_token_id": 0}))}}
_TIMM |= {"efficientnet_cc_b0_4e (train step)": _step(_TIMM["efficientnet_cc_b0_4e"], lambda out: out),
          "resnet50_clip (exported program)": _exported(_TIMM["resnet50_clip (attention pool)"]),
          "vit parallel blocks (export joint)": _joint(_TIMM["vit parallel blocks (2 blocks)"], lambda out: out),
          "convnext_atto_rms (saved program, .pt2)": _pt2(_TIMM["convnext_atto_rms"])}
_HF |= {"autoformer (train step)": _step(AUTOFORMER, _hidden),  # its layer drop draws in training: dynamo's graphs
        "kimi-linear (meta device)": _on_meta(KIMI_LINEAR),  # "not checked": no data on meta (eager fails there too)
        "swin2sr (tracer=dynamo)": _traced_by(_HF["swin2sr (super-resolution)"], "dynamo"),
        "owlvit (exported, decomposed)": lambda: _decomposed(_HF["owlvit (text+image)"]),
        "phimoe (train step)": _step(_HF["phimoe"], _hidden)}
_TV |= {"ssd300_vgg16 (train mode, targets)": _detector_training("ssd300_vgg16", num_classes=3),
        "fasterrcnn_resnet50_v2 (train mode, targets)": _detector_training(
            "fasterrcnn_resnet50_fpn_v2", num_classes=3, min_size=64, max_size=64),
        **{name: _tv(name, (1, 3, 64, 64), num_classes=3) for name in ("shufflenet_v2_x1_0", "regnet_y_800mf")},
        "swin_v2_t (tracer=make_fx)": _traced_by(_TV["swin_v2_t"], "make_fx")}


def _parakeet() -> tuple:
    """Parakeet's FastConformer encoder: log-mel frames, subsampled 8× by strided convolutions."""
    model, _ = _hf("ParakeetEncoderConfig", hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=64, num_mel_bins=16, subsampling_conv_channels=8, conv_kernel_size=3,
                   max_position_embeddings=64)()
    return model, (torch.randn(1, 64, 16),)


def _ps_roi_align() -> tuple:
    """torchvision's PSRoIAlign: position-sensitive pooling of a feature map over a tensor of boxes."""
    from torchvision.ops import PSRoIAlign

    return PSRoIAlign(3, 0.5, 2).eval(), (torch.randn(1, 18, 16, 16),
                                          torch.tensor([[0.0, 1.0, 1.0, 20.0, 20.0], [0.0, 4.0, 8.0, 30.0, 28.0]]))


def _drop_block() -> tuple:
    """torchvision's DropBlock2d and StochasticDepth in training: blocks and rows dropped by random draws."""
    from torchvision.ops import DropBlock2d, StochasticDepth

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), DropBlock2d(0.2, 3), StochasticDepth(0.2, "row"))
    return model.train(), (torch.randn(2, 3, 16, 16),)


def _mask2former() -> tuple:
    """Mask2Former on a tiny Swin: 64 px (at 32 its last stage is 1×1, too small for its group norms of 32 groups)."""
    model, _ = _hf("Mask2FormerConfig", backbone_config={
        "model_type": "swin", "image_size": 64, "embed_dim": 16, "depths": [1, 1, 1, 1], "num_heads": [1, 1, 2, 2],
        "window_size": 4, "out_features": ["stage1", "stage2", "stage3", "stage4"]}, feature_size=32,
        mask_feature_size=32, hidden_dim=32, encoder_feedforward_dim=64, encoder_layers=1, decoder_layers=2,
        num_attention_heads=2, dim_feedforward=64, num_queries=8)()
    return model, (torch.randn(1, 3, 64, 64),)


_HF |= {
    "clipseg (text+image)": _hf("CLIPSegConfig", "text+pixels", text_config={"vocab_size": 128, **SMALL},
                                vision_config={"image_size": 32, "patch_size": 8, **SMALL}, projection_dim=16,
                                reduce_dim=16, extract_layers=[1]),
    "chinese-clip (text+image)": _hf("ChineseCLIPConfig", "text+pixels", text_config={"vocab_size": 128, **SMALL},
                                     vision_config={"image_size": 32, "patch_size": 8, **SMALL}, projection_dim=16),
    "altclip (text+image)": _hf("AltCLIPConfig", "text+pixels", text_config={"vocab_size": 128, "project_dim": 16,
                                                                           "pad_token_id": 1, **SMALL},
                                vision_config={"image_size": 32, "patch_size": 8, **SMALL}, projection_dim=16),
    "roc-bert (shape, pronunciation)": _hf("RoCBertConfig", vocab_size=128, pronunciation_vocab_size=16,
                                           shape_vocab_size=16, pronunciation_embed_dim=16, shape_embed_dim=16,
                                           **SMALL),
    "dpr (question encoder)": _hf("DPRConfig", vocab_size=128, **SMALL),
    "eurobert": _hf("EuroBertConfig", pad_token_id=0, bos_token_id=1, eos_token_id=2, mask_token_id=3, **TINY_LM),
    "parakeet (fastconformer)": _parakeet,
    # its durations, predicted from the text, set how many frames come out: dynamo's graphs
    "fastspeech2-conformer (data-dependent length)": _hf(
        "FastSpeech2ConformerConfig", hidden_size=32, vocab_size=128, num_mel_bins=16, encoder_layers=1,
        decoder_layers=1, encoder_linear_units=64, decoder_linear_units=64, speech_decoder_postnet_layers=1,
        speech_decoder_postnet_units=16, duration_predictor_channels=16, energy_predictor_channels=16,
        pitch_predictor_channels=16, pitch_predictor_layers=1, decoder_kernel_size=3, encoder_kernel_size=3),
    "mask2former (swin)": _mask2former}
# DropBlock2d and StochasticDepth in training read a plain "match": the check did not say their draws shared a seed
_TV |= {"ps_roi_align (boxes tensor)": _ps_roi_align, "drop block, stochastic depth (train)": _drop_block}


def _training(build: Callable[[], tuple]) -> Callable[[], tuple]:
    """``build()``'s model in training mode, opened as it is (not a step): its dropout and drop path draw."""
    def make():
        model, inputs, *rest = build()
        return model.train(), inputs, *rest
    return make


_TIMM |= {"convnext_atto (train mode, drop path)": _training(_timm("convnext_atto", drop_path_rate=0.2)),
          "vit_tiny (train mode, dropout, drop path)": _training(_timm(
              "vit_tiny_patch16_224", 64, img_size=64, depth=2, drop_rate=0.1, proj_drop_rate=0.1,
              drop_path_rate=0.2))}
#: Run without --wide: a few per family.
QUICK = {"timm": ("resnet18", "convnext_atto", "vit_tiny_patch16_224", "resnet18 (train step)",
                  "resnet18 (export joint)"),
         "hf": ("bert", "gpt2 (cache)", "llama (no cache)", "t5", "bert (train step)"),
         "torchvision": ("lraspp (segmentation)", "raft_small (flow)", "fasterrcnn_mobilenet (detection)")}


def _try(fn: Callable[[], Any]) -> tuple[bool, float, str]:
    start = time.perf_counter()
    try:
        fn()
        return True, time.perf_counter() - start, ""
    except Exception as exc:  # a benchmark row, not a crash: the reason is printed
        text = str(exc).splitlines()[0][:90] if str(exc) else ""
        return False, time.perf_counter() - start, f"{type(exc).__name__}: {text}"


def measure(build: Callable[[], tuple]) -> dict[str, Any]:
    """One row: fxviz, then symbolic_trace, torch.export and torchview on the same model."""
    import fxviz
    from fxviz.draw.render import render

    row: dict[str, Any] = {}
    try:
        model, inputs, *tracer = build()  # a third item: the tracer to use instead of "auto"
    except Exception as exc:  # the model cannot even be built here: a row, not a crash
        return {"opens": False, "fxviz_s": 0.0, "error": f"build: {type(exc).__name__}: {exc}"[:120]}

    def open_and_draw():
        try:
            row["session"] = session = fxviz.Session(model, inputs, tracer=tracer[0] if tracer else "auto")
            drawing = render(session.current.graph).drawn()  # as the first view is laid out
            row["boxes"] = drawing.box_count if drawing.svg else 0
            row["view"] = view_counts(session.current.graph, drawing)
        except Exception as exc:
            row["raw"] = not isinstance(exc, fxviz.errors.FxvizError)  # not a clear fxviz error
            raise

    row["opens"], row["fxviz_s"], row["error"] = _try(open_and_draw)
    if row["opens"]:  # the check runs after the first drawing (the Explorer runs it in the background)
        session = row.pop("session")
        row["method"] = session.capture.method
        row["graphs"] = len(session.capture.graphs)
        row["cut"] = bool(session.capture.note)  # dynamo's graphs, cut at graph breaks
        graph = session.current.graph
        row["nodes"] = graph.number_of_nodes()
        row["clusters"] = bool({d["module_path"] for _, d in graph.nodes(data=True)} - {None, ""})
        row["backward"] = sum(" · backward" in (d["module_path"] or "") for _, d in graph.nodes(data=True))
        ok, _, why = _try(lambda: session.current.check.status)
        row["check"] = session.current.check.status if ok else f"error ({why[:40]})"
    if isinstance(model, torch.nn.Module) and not tracer:  # a module, not a step or model+loss
        row["symbolic"] = _try(lambda: torch.fx.symbolic_trace(model))[0]
        row["export"], row["export_s"], _ = _try(lambda: torch.export.export(model, inputs, strict=False))
        row["torchview"], _, why = _try(lambda: _torchview(model, inputs))
        if not row["torchview"]:
            row["torchview_error"] = why
    return row


def view_counts(graph: Any, first: Any) -> dict[str, int]:
    """What a first view and "Collapse all" (every top-level box closed) draw: boxes, and
    how many of them are parameters, "nodes N–M" segments, or setup plumbing (drawn op by
    op, not folded into a setup box)."""
    from fxviz.draw.layout_index import box_index
    from fxviz.draw.render import render

    try:
        from fxviz.draw.layout_paths import node_paths, setup_paths  # this work's; absent before it
        paths = node_paths(graph, {n for n, a in graph.nodes(data=True) if a.get("weight")})
        found, checks = setup_paths(graph, paths)
        plumbing = set(found) | checks
    except ImportError:
        plumbing = set()
    tree = box_index(graph).tree
    top = [key for kind, key in tree.boxes[""].items if kind == "box"]
    counts = {}
    for name, rendering in (("first", first), ("all", render(graph, collapse=top))):
        drawn = [e for e in rendering.elements.values() if e["kind"] in ("node", "collapsed")]
        nodes = [graph.nodes[e["name"]] | {"name": e["name"]} for e in drawn if e["kind"] == "node"]
        counts[f"{name}_boxes"] = len(drawn)
        counts[f"{name}_params"] = sum(bool(a.get("weight")) or a["op"] == "get_attr" or (
            a["op"] == "placeholder" and a["target"] != a["name"] and not _dynamo_data(a["name"], a["target"])
            and not a["target"].startswith("*")) for a in nodes)
        counts[f"{name}_segments"] = sum(e["kind"] == "collapsed" and tree.boxes[e["name"]].label.startswith("nodes ")
                                         for e in drawn if e["name"] in tree.boxes)
        counts[f"{name}_plumbing"] = sum(a["name"] in plumbing for a in nodes)
    return counts


def _dynamo_data(name: str, target: str) -> bool:
    """Whether ``target`` is dynamo's source name of a local it takes as data (``L_x_`` for
    ``l_x_``, ``dict_getitem_L_stack0_...``), in a graph that starts after a break: not a parameter."""
    return target.lower() == name and "_parameters_" not in name and "_buffers_" not in name


def _torchview(model: torch.nn.Module, inputs: tuple) -> None:
    import torchview

    torchview.draw_graph(model, input_data=list(inputs), expand_nested=True, depth=10).visual_graph.source


def _one(family: str, name: str) -> None:
    warnings.filterwarnings("ignore")
    print("ROW " + json.dumps(measure(FAMILIES[family][name]), default=str), flush=True)


def _run(family: str, name: str) -> dict[str, Any]:
    """``measure`` in a subprocess, so a hang or a crash of the interpreter is one row."""
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", family, name],
                              capture_output=True, text=True, timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        return {"opens": False, "fxviz_s": time.perf_counter() - start, "error": f"timeout: over {LIMIT_S} s"}
    rows = [line[4:] for line in done.stdout.splitlines() if line.startswith("ROW ")]
    if not rows:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"opens": False, "fxviz_s": 0.0, "error": f"crashed (exit {done.returncode}): {tail[:90]}"}
    return json.loads(rows[-1])


def _yes(value: Any) -> str:
    return "-" if value is None else ("yes" if value else "no")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wide", action="store_true", help="every model (default: a few per family)")
    parser.add_argument("--family", choices=tuple(FAMILIES), action="append", help="only these families")
    parser.add_argument("--model", action="append", help="only these models (names as in the table)")
    parser.add_argument("--one", nargs=2, metavar=("FAMILY", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return _one(*args.one)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; limit {LIMIT_S} s per model")
    print(f"{'family':<12} {'model':<34} {'fxviz':<16} {'clusters':<8} {'check':<12} {'nodes':>6} {'boxes':>5} {'t_draw':>7} "
          f"{'symbolic':>8} {'export':>6} {'t_export':>8} {'torchview':>9} {'first / collapse-all':>21}")
    print("first / collapse-all: boxes drawn / of them parameters / 'nodes N-M' segments / setup ops drawn one by one")
    for family, models in FAMILIES.items():
        if args.family and family not in args.family:
            continue
        rows = []
        chosen = [n for n in models if n in args.model] if args.model else models if args.wide else QUICK[family]
        if not chosen:
            continue
        for name in chosen:
            row = _run(family, name)
            rows.append(row)
            opened = row.get("method", "FAILED") if row["opens"] else "FAILED"
            if row.get("cut"):  # not the whole model in one graph: how many, cut at breaks
                opened += f" x{row['graphs']}, cut"
            clusters = _yes(row.get("clusters")) + (f" +{row['backward']}bw" if row.get("backward") else "")
            notes = "; ".join(filter(None, [row.get("error"), row.get("torchview_error")]))
            view = row.get("view") or {}
            seen = " ".join(f"{view.get(f'{w}_boxes', '-')}/{view.get(f'{w}_params', '-')}/{view.get(f'{w}_segments', '-')}"
                            f"/{view.get(f'{w}_plumbing', '-')}" for w in ("first", "all"))
            print(f"{family:<12} {name:<34} {opened:<16} {clusters:<8} {row.get('check', '-'):<12} "
                  f"{row.get('nodes', '-'):>6} {row.get('boxes', '-'):>5} {row['fxviz_s']:7.2f} {_yes(row.get('symbolic')):>8} {_yes(row.get('export')):>6} "
                  f"{row.get('export_s', float('nan')):8.2f} {_yes(row.get('torchview')):>9} {seen:>21}"
                  + (f"  {notes}" if notes else ""), flush=True)
        n = len(rows)
        opened = [r for r in rows if r["opens"]]
        exported = [r for r in rows if r.get("export")]
        modules = [r for r in rows if "symbolic" in r]  # training steps are functions: no torch front-end column
        print(f"== {family}: fxviz opens {len(opened)}/{n}, clusters {sum(bool(r.get('clusters')) for r in opened)}/{n}, "
              f"check match {sum(r.get('check') == 'match' for r in opened)}/{n} (of them cut into dynamo's graphs, each "
              f"checked on its own: {sum(bool(r.get('cut')) for r in opened)}), raw exceptions "
              f"{sum(bool(r.get('raw')) for r in rows)}, crashes/timeouts "
              f"{sum(r.get('error', '').startswith(('crashed', 'timeout')) for r in rows)}; on the {len(modules)} modules: symbolic_trace {sum(bool(r['symbolic']) for r in modules)}, "
              f"torch.export {len(exported)}, torchview {sum(bool(r.get('torchview')) for r in modules)}; median "
              f"time to first drawing {statistics.median(r['fxviz_s'] for r in opened) if opened else float('nan'):.2f} s "
              f"vs export alone {statistics.median(r['export_s'] for r in exported) if exported else float('nan'):.2f} s",
              flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

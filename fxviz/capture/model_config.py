"""What to change when a model fails because of its own configuration, not its inputs.

Hugging Face configs accept combinations their models cannot run, and the failure shows far
from its cause (a size mismatch inside the attention call). Each rule recognises one such
combination from the model's modules and names the setting to change."""
from __future__ import annotations

from collections.abc import Iterable

from torch import nn


def config_advice(modules: Iterable[nn.Module]) -> str | None:
    """The setting to change, when a module of ``modules`` (or below) is configured in a way
    its code cannot run; None when no rule applies."""
    for module in modules:
        for sub in module.modules():
            advice = _latent_attention_heads(sub)
            if advice:
                return advice
    return None


def _latent_attention_heads(module: nn.Module) -> str | None:
    """Multi-head latent attention (transformers' DeepSeek-V2/V3, MiniCPM3, GLM-4-MoE-Lite,
    Mistral 4...) makes keys and values for every attention head from its latent
    (``kv_b_proj``), yet keeps ``num_key_value_groups = num_attention_heads //
    num_key_value_heads`` and repeats them that many times as grouped-query attention
    would: any ratio but 1 breaks the attention call, eager or traced (huggingface/trl#6265).
    ``num_key_value_heads`` changes no weight's shape."""
    config = getattr(module, "config", None)
    groups = getattr(module, "num_key_value_groups", 1)
    if not isinstance(getattr(module, "kv_b_proj", None), nn.Module) or groups == 1 or config is None:
        return None
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    return (f"{type(config).__name__} sets num_key_value_heads={kv_heads} with num_attention_heads={heads}, which "
            f"its multi-head latent attention ({type(module).__name__}) cannot run: kv_b_proj already makes keys and "
            f"values for all {heads} heads, and transformers still groups them by num_attention_heads // "
            f"num_key_value_heads = {groups} (it must be 1). Build the config with num_key_value_heads={heads} "
            f"(= num_attention_heads, as DeepSeek's own checkpoints do; no weight changes shape).")

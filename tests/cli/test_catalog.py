"""The model picker's list: the default, folders used before, causal LMs in a Hugging Face cache (a temporary one)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import tiny_llama
from hf_reference import word_tokenizer
from specviz_core.cli.commands import main
from specviz_core.runtime.catalog import list_models, recent_models, remember_model

WORDS = ["<unk>", "<eos>"] + [f"w{i}" for i in range(94)]
OTHER_WORDS = ["<unk>", "<eos>"] + [f"v{i}" for i in range(94)]


def save_tiny(folder: Path, words: list[str], seed: int = 0) -> int:
    m = tiny_llama(len(words), seed=seed)
    m.model.save_pretrained(folder)
    word_tokenizer(words).save_pretrained(folder)
    return sum(p.numel() for p in m.model.parameters())


def put_in_hub_cache(cache: Path, repo_id: str, folder: Path, revision: str = "0" * 40, ref: bool = True) -> None:
    """The hub cache's layout: blobs by hash, a snapshot of links to them, refs/main naming the snapshot."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snap = repo / "snapshots" / revision
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for i, f in enumerate(sorted(folder.iterdir())):
        blob = repo / "blobs" / f"{revision[:8]}{i:04d}"
        shutil.copy(f, blob)
        (snap / f.name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
    if ref:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(revision)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A temporary HF cache with two tiny causal LMs sharing a tokenizer, one with another tokenizer, one encoder
    (not a causal LM) and a dataset; HF_HUB_CACHE points at it."""
    cache = tmp_path / "hub"
    params = {}
    for repo, words, seed in (("org/tiny-a", WORDS, 0), ("org/tiny-a2", WORDS, 1), ("org/tiny-b", OTHER_WORDS, 2)):
        src = tmp_path / "src" / repo
        params[repo] = save_tiny(src, words, seed)
        put_in_hub_cache(cache, repo, src)
    enc = tmp_path / "src" / "encoder"
    enc.mkdir(parents=True)
    (enc / "config.json").write_text(json.dumps({"architectures": ["BertModel"], "model_type": "bert"}))
    put_in_hub_cache(cache, "org/encoder", enc)
    (cache / "datasets--org--data" / "snapshots" / ("1" * 40)).mkdir(parents=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "specviz-cache"))  # the default model not yet converted
    return params


def test_models_in_the_hub_cache_are_listed(hub):
    entries = {e.name: e for e in list_models()}
    assert {"default", "org/tiny-a", "org/tiny-a2", "org/tiny-b"} <= set(entries)
    assert "org/encoder" not in entries  # not a causal LM
    a = entries["org/tiny-a"]
    assert (a.source, a.architecture, a.vocab_size) == ("hf-cache", "LlamaForCausalLM", 96)
    assert a.n_params == hub["org/tiny-a"]  # from the safetensors header, nothing loaded
    weights = Path(a.path) / "model.safetensors"
    assert a.size_bytes > weights.stat().st_size  # weights, config and tokenizer
    assert entries["default"].source == "embedded"


def test_draft_for_marks_shared_and_universal_tokenizers(hub):
    entries = {e.name: e.draft for e in list_models(draft_for="org/tiny-a")}
    assert entries["org/tiny-a"] == "target"
    assert entries["org/tiny-a2"] == "same"  # hf_assisted, draft_tree, ...
    assert entries["org/tiny-b"] == "universal"  # hf_universal


def test_a_snapshot_without_main_is_listed_by_folder(hub, tmp_path):
    src = tmp_path / "src" / "loose"
    save_tiny(src, WORDS)
    put_in_hub_cache(tmp_path / "hub", "org/loose", src, revision="2" * 40, ref=False)
    names = [e.name for e in list_models()]
    assert any(n.endswith("models--org--loose/snapshots/" + "2" * 40) for n in names)


def test_recorded_models_are_remembered(hub, tmp_path, capsys):
    folder = tmp_path / "mine"
    save_tiny(folder, WORDS)
    prompt = " ".join(f"w{i % 9}" for i in range(20))
    for model in (str(folder), "org/tiny-b"):  # a folder, and a hub id from the cache
        code = main(["record", "--method", "ar", "--model", model, "--prompt", prompt, "--max-new-tokens", "3",
                     "--no-chat-template", "--db", str(tmp_path / "r.db"), "--quiet"])
        assert code == 0, capsys.readouterr().err
    assert [m["name"] for m in recent_models()] == ["org/tiny-b", str(folder.resolve())]
    entries = {e.name: e for e in list_models()}
    assert entries[str(folder.resolve())].source == "recent"
    remember_model(str(folder))  # used again: to the top, once
    assert [m["name"] for m in recent_models()] == [str(folder.resolve()), "org/tiny-b"]


def test_models_command(hub, capsys):
    assert main(["models", "--draft-for", "org/tiny-a"]) == 0
    out = capsys.readouterr().out.splitlines()
    row = next(line for line in out if line.startswith("org/tiny-b "))
    assert "hf-cache" in row and "LlamaForCausalLM" in row and "other tokenizer: hf_universal" in row
    assert "same tokenizer" in next(line for line in out if line.startswith("org/tiny-a2 "))
    assert main(["models", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["name"] for r in rows} >= {"default", "org/tiny-a"}
    assert main(["models", "--draft-for", "org/nothing"]) == 2
    assert "specviz: error: --draft-for org/nothing" in capsys.readouterr().err


def test_heads_are_listed_apart_from_models_with_the_models_they_fit(hub, tmp_path, monkeypatch, capsys):
    """An EAGLE-3 head in the hub cache (its config says LlamaForCausalLM, as published ones do) is a head, not a
    model; a head in SpecViz's heads folder for another width fits none of them."""
    from test_eagle_layouts import write_checkpoint
    from transformers import LlamaConfig

    tiny_cfg = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                           num_key_value_heads=2)
    write_checkpoint(tmp_path / "src" / "eagle3", "eagle3", tiny_cfg, draft_vocab=40)
    put_in_hub_cache(tmp_path / "hub", "org/tiny-eagle3", tmp_path / "src" / "eagle3")  # the fixture's cache
    monkeypatch.setenv("SPECVIZ_HEADS", str(tmp_path / "heads"))
    write_checkpoint(tmp_path / "heads" / "wide", "eagle",
                     LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                                 num_key_value_heads=2))
    assert "org/tiny-eagle3" not in {e.name for e in list_models()}
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("org/tiny-eagle3"))
    assert "EAGLE-3" in line and "40" in line and "org/tiny-a" in line and "org/tiny-b" in line
    wide = next(ln for ln in out.splitlines() if "wide" in ln)
    assert "EAGLE-1/2" in wide and "none of these models" in wide

"""A recording names its model so that another machine finds it: ``default``, a hub id, or a local folder's
absolute path, never the writing machine's cache folder; replaying resolves that name where it runs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from specviz_core.runtime.locations import locate_model, model_reference
from specviz_core.runtime.vocab import load_token_text


def _fake_model(folder: Path, tokenizer: Path) -> Path:
    """A folder that looks like a model to the locator: a config and the given tokenizer.json."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    (folder / "tokenizer.json").write_bytes(tokenizer.read_bytes())
    return folder


@pytest.fixture
def tokenizer_json(tiny_dir) -> Path:
    return tiny_dir / "tokenizer.json"


@pytest.fixture(autouse=True)
def _fresh_token_text_cache():
    load_token_text.cache_clear()
    yield
    load_token_text.cache_clear()


def test_model_reference_names_the_model_not_the_machine(tmp_path, monkeypatch):
    assert model_reference(None) == model_reference("default") == "default"
    assert model_reference("HuggingFaceTB/SmolLM2-360M") == "HuggingFaceTB/SmolLM2-360M"
    (tmp_path / "mine").mkdir()
    monkeypatch.chdir(tmp_path)
    # A relative folder would mean nothing from another working directory: it is recorded absolute.
    assert model_reference("mine") == str((tmp_path / "mine").resolve())
    assert model_reference("./mine") == str((tmp_path / "mine").resolve())
    assert model_reference(str(tmp_path / "mine")) == str(tmp_path / "mine")
    assert model_reference("~/models/mine") == "~/models/mine"
    # The default model loaded from Python names itself by its folder in this machine's cache.
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    assert model_reference(str(tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct")) == "default"
    assert model_reference(str(tmp_path / "elsewhere" / "models" / "SmolLM2-135M-Instruct")) != "default"


def test_the_default_model_resolves_in_this_machines_cache(tmp_path, monkeypatch, tokenizer_json):
    from tokenizers import Tokenizer

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    here = _fake_model(tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct", tokenizer_json)
    assert locate_model("default") == here
    # What older recordings held: the writing machine's folder, which is not here.
    assert locate_model("/home/someone-else/.cache/specviz/models/SmolLM2-135M-Instruct") == here
    assert locate_model("C:\\Users\\ann\\AppData\\Local\\specviz\\Cache\\models\\SmolLM2-135M-Instruct") == here
    text = load_token_text("default")
    assert text.tokenizer is not None
    ids = Tokenizer.from_file(str(tokenizer_json)).encode("Hello world", add_special_tokens=False).ids
    assert text.text(ids) == "Hello world"


def test_a_default_model_never_converted_is_not_converted_when_told_not_to(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "empty-cache"))
    assert locate_model("default", convert=False) is None
    assert locate_model("/home/someone/.cache/specviz/models/SmolLM2-135M-Instruct", convert=False) is None


def test_a_hub_model_resolves_in_this_machines_hub_cache(tmp_path, monkeypatch, tokenizer_json):
    hub = tmp_path / "hub"
    repo = hub / "models--some-org--tiny"
    snap = _fake_model(repo / "snapshots" / "0123abcd", tokenizer_json)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd", encoding="utf-8")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    assert locate_model("some-org/tiny") == snap
    # An older recording's snapshot folder from another machine's hub cache names the same hub model.
    assert locate_model("/home/ann/.cache/huggingface/hub/models--some-org--tiny/snapshots/0123abcd") == snap
    assert locate_model("other-org/absent") is None
    assert load_token_text("some-org/tiny").tokenizer is not None


def test_a_missing_folder_gives_token_ids_not_an_error(tmp_path):
    assert locate_model(str(tmp_path / "gone")) is None
    assert load_token_text(str(tmp_path / "gone")).text([5, 6]) == "#5 #6"


def test_a_recording_names_a_local_folder_by_its_absolute_path(tiny_dir, tmp_path, monkeypatch, capsys):
    """Recorded from a relative folder name in another working directory, the session names the folder
    absolutely, and the tokenizer field names the model (not a cache folder)."""
    from specviz_core.cli.commands import main

    work = tmp_path / "work"
    work.mkdir()
    (work / "m").symlink_to(tiny_dir, target_is_directory=True)
    monkeypatch.chdir(work)
    db = tmp_path / "r.db"
    assert main(["record", "--method", "pld", "--prompt", "x = 1", "--model", "m", "--max-new-tokens", "3",
                 "--device", "cpu", "--db", str(db), "--quiet"]) == 0
    capsys.readouterr()
    conn = sqlite3.connect(db)
    (model, tokenizer), = conn.execute("SELECT model, tokenizer FROM sessions").fetchall()
    conn.close()
    assert model == tokenizer == str((work / "m").resolve())
    assert Path(tokenizer).is_absolute()
    monkeypatch.chdir(tmp_path)  # replayed from elsewhere, it still finds its tokenizer
    assert load_token_text(tokenizer).tokenizer is not None


def test_golden_exports_hold_no_absolute_path():
    """The golden exports are recorded on the default model: nothing in them may depend on where the writing
    machine keeps its cache, its home or its temporary folder."""
    import gzip

    def strings(value):
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for v in value.values():
                yield from strings(v)
        elif isinstance(value, list):
            for v in value:
                yield from strings(v)

    golden = Path(__file__).parent / "golden"
    files = sorted(golden.glob("*.jsonl.gz"))
    assert files
    for f in files:
        for line in gzip.open(f, "rt", encoding="utf-8"):
            for s in strings(json.loads(line)):
                assert not (s.startswith(("/", "~", "\\")) or (len(s) > 2 and s[1:3] in (":\\", ":/"))), \
                    f"{f.name} holds a path: {s!r}"

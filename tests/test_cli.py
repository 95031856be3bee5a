"""The CLI: bad input gives one clear line and a non-zero exit, never a traceback; good input records."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import PreTrainedTokenizerFast

from helpers import tiny_llama
from specviz_core.cli.commands import main


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    """A tiny random Llama saved as a model folder, with a 96-word tokenizer of its own."""
    d = tmp_path_factory.mktemp("tiny-model")
    m = tiny_llama()
    m.model.save_pretrained(d)
    words = ["<unk>", "<eos>"] + [f"w{i}" for i in range(94)]
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>").save_pretrained(d)
    return d


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_one_line_error(code: int, err: str, needle: str) -> None:
    assert code != 0
    lines = [x for x in err.splitlines() if x.startswith("specviz: error")]
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_record_export_sessions_roundtrip(capsys, tiny_dir, tmp_path):
    db = tmp_path / "r.db"
    prompt = " ".join(f"w{i % 7}" for i in range(30))
    code, out, err = cli(capsys, "record", "--method", "tr", "--model", str(tiny_dir), "--prompt", prompt,
                         "--max-new-tokens", "20", "--no-chat-template", "--db", str(db), "--quiet")
    assert code == 0, err
    assert "tokens/forward" in out and "tokens/s" in out
    sid = out.split()[1].rstrip(":")
    code, out, _ = cli(capsys, "sessions", "--db", str(db))
    assert code == 0 and sid in out and "complete" in out
    code, out, _ = cli(capsys, "export", "--db", str(db), "--session", sid, "--format", "jsonl")
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["id"] == sid and len(lines[0]["output_ids"]) == 20
    assert len(lines) - 1 == lines[0]["n_forward"]


@pytest.mark.parametrize("argv,needle", [
    (["--method", "ar", "--model", "/no/such/model"], "model path not found"),
    (["--method", "warp"], "unknown method"),
    (["--method", "tr", "--param", "depth=3"], "unknown parameter 'depth'"),
    (["--method", "tr", "--param", "k=many"], "parameter k must be a int"),
    (["--method", "tr", "--budget", "0"], "budget must be at least 1"),
    (["--method", "draft_tree"], "needs --draft-model"),
])
def test_bad_arguments(capsys, tmp_path, argv, needle):
    code, _, err = cli(capsys, "record", *argv, "--prompt", "hi", "--db", str(tmp_path / "x.db"), "--quiet")
    assert_one_line_error(code, err, needle)


def test_empty_prompt(capsys, tmp_path):
    code, _, err = cli(capsys, "record", "--method", "ar", "--prompt", "   ", "--db", str(tmp_path / "x.db"))
    assert_one_line_error(code, err, "prompt is empty")


def test_unwritable_database(capsys, tiny_dir, tmp_path):
    code, _, err = cli(capsys, "record", "--method", "ar", "--model", str(tiny_dir), "--prompt", "w1 w2",
                       "--db", str(tmp_path / "missing" / "dir" / "x.db"), "--quiet")
    assert_one_line_error(code, err, "cannot write the recording")


def test_prompt_longer_than_context(capsys, tiny_dir, tmp_path):
    long_prompt = " ".join(f"w{i % 90}" for i in range(300))  # the tiny model's context is 256
    code, _, err = cli(capsys, "record", "--method", "ar", "--model", str(tiny_dir), "--prompt", long_prompt,
                       "--no-chat-template", "--db", str(tmp_path / "x.db"), "--quiet")
    assert_one_line_error(code, err, "model's context is 256")


@pytest.mark.default_model
def test_draft_model_with_another_tokenizer(capsys, smol, tiny_dir, tmp_path):
    code, _, err = cli(capsys, "record", "--method", "draft_tree", "--draft-model", str(tiny_dir), "--prompt", "hi",
                       "--db", str(tmp_path / "x.db"), "--quiet")
    assert_one_line_error(code, err, "different tokenizer")


def test_no_traceback_in_a_real_process(tmp_path):
    """The installed entry point, as a user runs it."""
    p = subprocess.run([sys.executable, "-m", "specviz_core.cli", "record", "--method", "ar", "--model", "/nope",
                        "--prompt", "x", "--db", str(tmp_path / "x.db")], capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1] == "specviz: error: model path not found: /nope"


def test_missing_recording(capsys, tmp_path):
    code, _, err = cli(capsys, "sessions", "--db", str(tmp_path / "none.db"))
    assert_one_line_error(code, err, "no recording at")

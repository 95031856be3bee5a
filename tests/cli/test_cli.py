"""The CLI: bad input gives one clear line and a non-zero exit, never a traceback; good input records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
    # One forward a cycle, none for a first token that the prefill's last row gave.
    assert len(lines) - 1 - sum(bool(x["state"].get("from_prefill")) for x in lines[1:]) == lines[0]["n_forward"]


@pytest.mark.parametrize("argv,needle", [
    (["--method", "ar", "--model", "/no/such/model"], "model path not found"),
    (["--method", "ar", "--model", "gpt2"], "model 'gpt2' is neither a local folder nor a hub id in the local cache"),
    (["--method", "warp"], "unknown method"),
    (["--method", "tr", "--param", "depth=3"], "unknown parameter 'depth'"),
    (["--method", "tr", "--param", "k=many"], "parameter k must be a whole number, got 'many'"),
    # One check of budget, with the method's own bounds, whichever way it is given.
    (["--method", "tr", "--budget", "0"], "budget for tr must be auto, paper or a whole number from 1 to 1,024, got 0"),
    (["--method", "talon", "--budget", "1000000"], "budget for talon must be auto, paper or a whole number from 1 to "
                                                   "1,024, got 1000000"),
    (["--method", "tr", "--param", "budget=100000"], "budget for tr must be auto, paper or a whole number from 1 to "
                                                     "1,024, got '100000'"),
    (["--method", "goose", "--budget", "1"], "budget for goose must be auto, paper or a whole number from 2 to 1,024"),
    (["--method", "goose", "--param", "budget=1"], "budget for goose must be auto, paper or a whole number from 2"),
    (["--method", "tr", "--param", "budget=2.5"], "budget for tr must be auto, paper or a whole number from 1 to "
                                                  "1,024, got '2.5'"),
    (["--method", "ar", "--temperature", "nan"], "argument --temperature: must be a number from 0 to 100, got 'nan'"),
    (["--method", "ar", "--temperature", "inf"], "must be a number from 0 to 100"),
    (["--method", "talon", "--param", "mu=nan"], "parameter mu must be a finite number"),
    (["--method", "ar", "--seed", str(2**63)], "argument --seed: must be a whole number from 0 to"),
    (["--method", "ar", "--max-new-tokens", "10000000000"], "argument --max-new-tokens: must be a whole number from 1"),
    (["--method", "draft_tree"], "needs a draft model (--draft-model"),
    # A draft model the method would not use is refused, not silently ignored.
    (["--method", "goose", "--draft-model", "default"], "method goose drafts with no draft model; a draft model is "
                                                        "for draft_tree, talon (drafter=model)"),
    (["--method", "talon", "--draft-model", "default"], "method talon drafts with no draft model (add drafter=model"),
])
def test_bad_arguments(capsys, tmp_path, argv, needle):
    try:
        code, _, err = cli(capsys, "record", *argv, "--prompt", "hi", "--db", str(tmp_path / "x.db"), "--quiet")
    except SystemExit as e:  # argparse's own checks exit
        code, err = e.code, capsys.readouterr().err
    assert_one_line_error(code, err, needle)
    assert not (tmp_path / "x.db").exists()  # refused before anything was created or loaded


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


def test_export_never_overwrites_the_recording_it_reads(capsys, tiny_dir, tmp_path):
    """Issue 15.1: ``export --db v.db --out v.db`` left v.db at 0 bytes; same file by another name too."""
    import hashlib
    import os

    db = tmp_path / "v.db"
    code, _, err = cli(capsys, "record", "--method", "ar", "--model", str(tiny_dir), "--prompt", "w1 w2 w3",
                       "--max-new-tokens", "4", "--no-chat-template", "--db", str(db), "--quiet")
    assert code == 0, err
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    os.link(db, tmp_path / "alias.db")
    for out in (db, tmp_path / "." / "v.db", tmp_path / "alias.db"):
        code, _, err = cli(capsys, "export", "--db", str(db), "--out", str(out))
        assert_one_line_error(code, err, "is the recording being read")
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    code, _, err = cli(capsys, "export", "--db", str(db), "--out", str(tmp_path / "v.jsonl"))
    assert code == 0 and len((tmp_path / "v.jsonl").read_text().splitlines()) == 5
    assert not list(tmp_path.glob(".v.jsonl.*"))  # the temporary file was renamed into place


def test_an_unexpected_error_is_one_line_with_a_log(capsys, tmp_path, monkeypatch):
    """A bug prints one line naming a log file that holds the traceback."""
    import specviz_core.cli.commands as commands

    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))

    def boom(args):
        raise KeyError("no such thing")

    monkeypatch.setattr(commands, "cmd_sessions", boom)
    code, _, err = cli(capsys, "sessions", "--db", str(tmp_path / "x.db"))
    assert code == 1 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("specviz: error: unexpected KeyError: 'no such thing' (details in ")
    log = line.split("(details in ")[1].rstrip(")")
    assert "Traceback" in Path(log).read_text() and log.startswith(str(tmp_path))


def test_a_prompt_file_that_is_not_utf8(capsys, tmp_path):
    f = tmp_path / "p.txt"
    f.write_bytes("café".encode("latin-1"))
    code, _, err = cli(capsys, "record", "--method", "ar", "--prompt-file", str(f), "--db", str(tmp_path / "x.db"))
    assert_one_line_error(code, err, "is not UTF-8 text (byte 3)")


@pytest.mark.parametrize("damage,needle", [("truncated_weights", "incomplete metadata"),
                                           ("vocab_disagrees", "shapes disagree with config.json"),
                                           ("no_tokenizer", "no usable tokenizer")])
def test_a_damaged_model_folder_is_one_line(capsys, tiny_dir, tmp_path, damage, needle):
    import shutil

    d = tmp_path / "model"
    shutil.copytree(tiny_dir, d)
    if damage == "truncated_weights":
        w = d / "model.safetensors"
        w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    elif damage == "vocab_disagrees":
        cfg = json.loads((d / "config.json").read_text())
        cfg["vocab_size"] = 4096
        (d / "config.json").write_text(json.dumps(cfg))
    else:
        for f in d.glob("tokenizer*"):
            f.unlink()
    code, _, err = cli(capsys, "record", "--method", "ar", "--model", str(d), "--prompt", "w1 w2",
                       "--no-chat-template", "--db", str(tmp_path / "x.db"), "--quiet")
    assert_one_line_error(code, err, "could not load model from")
    assert needle in err


@pytest.mark.parametrize("where", ["model load", "progress bar"])
def test_ctrl_c_before_the_first_cycle_leaves_no_session_running(capsys, tiny_dir, tmp_path, monkeypatch, where):
    """Ctrl-C while the model loads or the progress bar is set up: exit 130, one line, no session left `running`."""
    import tqdm

    import specviz_core.session.factory as factory

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    if where == "model load":
        monkeypatch.setattr(factory, "load_checked_model", interrupt)
    else:
        monkeypatch.setattr(tqdm, "tqdm", interrupt)
    db = tmp_path / "r.db"
    code, _, err = cli(capsys, "record", "--method", "ar", "--prompt", "w1 w2", "--model", str(tiny_dir),
                       "--max-new-tokens", "4", "--db", str(db))
    assert code == 130 and "Traceback" not in err and err.strip().splitlines()[-1] == "specviz: interrupted"
    from specviz_core.recording.store import Recording

    with Recording(db) as rec:
        assert [s.status for s in rec.sessions() if s.status == "running"] == []


def test_progress_on_a_pipe_never_runs_onto_the_summary(tiny_dir, tmp_path):
    """Issue 30, item 9: with standard error not a terminal, the progress bar ran onto the summary line."""
    p = subprocess.run([sys.executable, "-m", "specviz_core.cli", "record", "--method", "pld", "--model", str(tiny_dir),
                        "--prompt", "one two three one two three", "--max-new-tokens", "24", "--device", "cpu",
                        "--db", str(tmp_path / "r.db")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    out = p.stdout.decode("utf-8")  # bytes: text mode would turn the bar's carriage returns into newlines
    assert p.returncode == 0, out
    lines = out.split("\n")
    assert any(line.startswith("session ") for line in lines), repr(out[-600:])
    assert any("tok/s" in line and "\r" in line for line in lines), repr(out[-600:])  # the bar was shown


def test_a_request_is_checked_without_torch():
    """The one check of a session's settings reads the method cards alone: a wrong method, parameter or number is
    refused before torch (or any drafter) is imported, so the command line and the Run panel answer at once."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from specviz_core.errors import SpecVizError\n"
            "from specviz_core.session.spec import SessionRequest\n"
            "SessionRequest(method='talon', prompt='hi', params={'mu': 0.05}, temperature=0.7).check()\n"
            "for bad in ({'method': 'nosuch'}, {'method': 'goose', 'params': {'budgte': 3}}):\n"
            "    try:\n"
            "        SessionRequest(prompt='hi', **bad).check()\n"
            "    except SpecVizError:\n"
            "        pass\n"
            "    else:\n"
            "        raise SystemExit('not refused')\n"
            "print('torch' in sys.modules, 'specviz_core.drafters' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_train_head_refuses_an_out_it_cannot_write_before_any_model_loads(capsys, tmp_path, monkeypatch):
    """Issue 51: --out naming a file trained for a minute and then failed, losing the head. Now refused at once,
    with the plan line never printed (no model is loaded: the default model is not even converted)."""
    monkeypatch.setattr("specviz_core.session.factory.load_checked_model",
                        lambda *a, **k: pytest.fail("a model was loaded"))
    taken = tmp_path / "demo.db"
    taken.write_text("not a folder")
    code, _, err = cli(capsys, "train-head", "--format", "eagle3", "--out", str(taken))
    assert_one_line_error(code, err, f"--out {taken} is a file: give a folder")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if not os.access(locked, os.W_OK):  # root writes anywhere: nothing to refuse there
            code, _, err = cli(capsys, "train-head", "--format", "eagle", "--out", str(locked / "head"))
            assert_one_line_error(code, err, "is not a folder this user may write to")
    finally:
        locked.chmod(0o700)


def test_the_commands_that_read_a_recording_default_to_the_windows(capsys, tmp_path, monkeypatch):
    """Every live session of the window goes to sessions.db in the user data folder: sessions, export, audit,
    compare, explain and check read it without --db."""
    from specviz_core.cli.commands import build_parser

    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path / "data"))
    for cmd in (["sessions"], ["export"], ["audit"], ["check"], ["explain"], ["compare", "a", "b"], ["record"]):
        assert build_parser().parse_args(cmd).db == tmp_path / "data" / "sessions.db", cmd


def test_explain_one_cycle_says_what_the_windows_why_panel_says(capsys, tmp_path):
    """``explain --cycle N``: why cycle N's walk stopped (the stop cause's sentence, tokens as text), its method's
    notes and its time; -1 is the last cycle; a cycle the session does not have is one line naming its range."""
    from specviz_app.demo import copy_demo
    from specviz_core.analysis.stop_cause import stop_cause
    from specviz_core.recording.store import Recording
    from specviz_core.runtime.vocab import load_token_text

    db = copy_demo(tmp_path)
    with Recording(db, read_only=True) as rec:
        info = next(s for s in rec.sessions() if s.method == "goose")
        records = list(rec.cycles(info.id))
    text = load_token_text(info.tokenizer)
    for arg, r in (("3", records[3]), ("-1", records[-1])):
        code, out, _ = cli(capsys, "explain", "--db", str(db), "--session", info.id, "--cycle", arg)
        assert code == 0
        assert f"cycle {r.index} ({r.mode}, {r.n_verified} verified, {len(r.committed_ids)} committed)" in out
        assert f"Why it stopped: {stop_cause(r).sentence(lambda t: repr(text.label(t)))}" in out
        assert "  Time: " in out and (f"{r.n_verified}-row verify" in out or "An AR cycle" in out)
    code, out, _ = cli(capsys, "explain", "--db", str(db), "--session", info.id, "--cycle", "3", "--json")
    assert json.loads(out)["cycle"]["why"] == stop_cause(records[3]).sentence(lambda t: repr(text.label(t)))
    code, _, err = cli(capsys, "explain", "--db", str(db), "--session", info.id, "--cycle", "99")
    assert code != 0 and f"has {len(records)} cycles (0 to {len(records) - 1})" in err and err.count("\n") <= 1

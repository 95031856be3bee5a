"""Issue 30, "every long command": ``record --samples``, ``bench``, ``reproduce`` and ``optimize-tree`` refuse bad
sizes before any model loads, respect ``--minutes`` (a clock injected, so nothing here depends on the machine's
speed), show progress on stderr only, and keep what was finished on Ctrl-C."""

from __future__ import annotations

import pytest

from specviz_core.cli.commands import main
from specviz_core.runtime.time_limit import TimeLimit

pytestmark = pytest.mark.usefixtures("one_thread")


class Ticks:
    """A clock that moves ``step`` seconds each time it is read: a limit passes after a known number of checks."""

    def __init__(self, step: float) -> None:
        self.step, self.reads = step, 0

    def __call__(self) -> float:
        self.reads += 1
        return self.reads * self.step


def ticking_limit(monkeypatch, module, step: float) -> Ticks:
    clock = Ticks(step)
    monkeypatch.setattr(module, "time_limit", lambda args: TimeLimit(args.minutes, clock=clock))
    return clock


def no_model(monkeypatch) -> None:
    """Any model load fails the test: a refusal must come before it."""
    import specviz_core.session.factory as factory

    def boom(*a, **k):
        raise AssertionError("a model was loaded before the refusal")

    for name in ("load_checked_model", "load_models", "load_draft"):
        monkeypatch.setattr(factory, name, boom)


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error(code: int, err: str) -> str:
    lines = [x for x in err.splitlines() if x.startswith("specviz: error: ")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0].removeprefix("specviz: error: ")


def last_cycles(db, session_id: str) -> int:
    from specviz_core.recording.store import Recording

    with Recording(db) as rec:
        return len(rec.cycle_summaries(session_id))


# -- record --samples -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,needle", [
    (["--minutes", "0"], "--minutes must be above 0"),
    (["--minutes", "-2"], "argument --minutes: must be a finite number from 0 to 10080"),
    (["--minutes", "1e9"], "argument --minutes: must be a finite number from 0 to 10080"),
    (["--minutes", "nan"], "argument --minutes"),
    (["--fork", "abc:2", "--minutes", "3"], "--minutes does not go with --fork"),
])
def test_record_refuses_bad_minutes_before_any_model_loads(capsys, tmp_path, monkeypatch, argv, needle):
    no_model(monkeypatch)
    prompt = [] if "--fork" in argv else ["--prompt", "hi"]
    try:
        code, _, err = cli(capsys, "record", "--method", "ar", *prompt, "--db", str(tmp_path / "r.db"), *argv)
    except SystemExit as e:  # argparse's own refusal
        code, err = e.code, capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err, err
    assert not (tmp_path / "r.db").exists()


def test_record_samples_stop_at_the_time_limit_and_keep_the_cycles(capsys, tiny_dir, tmp_path, monkeypatch):
    import specviz_core.cli.commands as commands
    from specviz_core.recording.store import Recording

    clock = ticking_limit(monkeypatch, commands, 1.0)  # a second a check: 0.1 minutes pass on the 6th read
    db = tmp_path / "r.db"
    code, out, err = cli(capsys, "record", "--method", "ar", "--model", str(tiny_dir), "--prompt", "w1 w2 w3",
                         "--no-chat-template", "--max-new-tokens", "3", "--samples", "5", "--minutes", "0.1",
                         "--db", str(db))
    assert code == 0, err
    with Recording(db) as rec:
        sessions = sorted(rec.sessions(), key=lambda s: s.seed)
    # ar commits a token a cycle: a sample is a check before it and one after each cycle but its last (3 reads), so
    # the start's read and six checks end the run two cycles into the second sample.
    assert clock.reads == 7 and len(sessions) == 2 and last_cycles(db, sessions[-1].id) == 2
    *whole, last = sessions
    assert all(s.status == "complete" and s.n_tokens == 3 for s in whole)
    assert last.status == "interrupted" and last.stop_reason == "the time limit (--minutes 0.1) was reached"
    assert err.strip().splitlines()[-1] == (f"specviz: stopped: the time limit (--minutes 0.1) was reached in sample "
                                            f"{len(sessions)} of 5; the cycles so far are saved")
    assert "[specviz] 5 samples of up to 3 tokens each (seeds 0..4); at most 0.1 minutes (--minutes)" in err
    assert "ar 1/5" in err and "ar 1/5" not in out  # the progress bar is on stderr only
    assert out.count("session ") == len(sessions)


# -- bench ----------------------------------------------------------------------------------------------------

def bench_argv(tiny_dir, out, *more: str) -> list[str]:
    return ["bench", "--model", str(tiny_dir), "--suite", "quick", "--methods", "ar,pld", "--max-new-tokens", "4",
            "--repeats", "1", "--no-warmup", "--no-cost-curve", "--record-methods", "none", "--out", str(out), *more]


def test_bench_refuses_bad_minutes_before_any_model_loads(capsys, tmp_path, monkeypatch):
    no_model(monkeypatch)
    code, _, err = cli(capsys, *bench_argv("nowhere", tmp_path / "b.json", "--minutes", "0"))
    assert one_error(code, err) == "--minutes must be above 0 and at most 10,080 (a week), got 0"
    assert not (tmp_path / "b.json").exists()


def test_bench_refuses_a_head_folder_that_is_not_there_before_any_model_loads(capsys, tmp_path, monkeypatch):
    no_model(monkeypatch)
    code, _, err = cli(capsys, "bench", "--suite", "quick", "--methods", "ar,eagle", "--param", "head=/no/such/head",
                       "--out", str(tmp_path / "b.json"))
    assert one_error(code, err) == ("draft head not found: /no/such/head (a folder with config.json and "
                                    "pytorch_model.bin or model.safetensors, or a hub id in the local cache)")
    assert not (tmp_path / "b.json").exists()


def test_bench_stops_at_the_time_limit_with_the_finished_prompts(capsys, tiny_dir, tmp_path, monkeypatch):
    import json

    import specviz_core.cli.bench as cli_bench

    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path / "data"))
    clock = ticking_limit(monkeypatch, cli_bench, 1.0)  # 0.05 minutes (3 s): the third check after the start
    out = tmp_path / "b.json"
    code, printed, err = cli(capsys, *bench_argv(tiny_dir, out, "--minutes", "0.05"))
    assert code == 0, err
    res = json.loads(out.read_text())
    # A check before each run: two runs (ar, pld) finish the first of the quick suite's three prompts.
    assert clock.reads == 4 and [r["method"] for r in res["rows"]] == ["ar", "pld"]
    assert len({r["prompt"] for r in res["rows"]}) == 1
    assert res["stopped"] == "the time limit (--minutes 0.05) was reached"
    assert res["config"]["prompts_planned"] == 3 and res["config"]["prompts_finished"] == 1
    assert err.strip().splitlines()[-1] == ("specviz: stopped: the time limit (--minutes 0.05) was reached; the 1 of 3 "
                                            f"prompts finished are in {out}")
    # The plan is said before the model loads; the bar is on stderr, the tables on stdout.
    plan = "[specviz] 6 runs of up to 4 tokens: 3 prompts x 2 methods x 1 repeat, 0 recorded once a prompt"
    assert plan in err and err.index(plan) < err.index("Loading")
    assert "/6 [" in err and ("run/s" in err or "s/run" in err)  # tqdm's count of runs
    assert "| suite | method |" in printed and "[specviz]" not in printed and "\r" not in printed and "/6 [" not in printed


def test_bench_ctrl_c_writes_the_finished_prompts(capsys, tiny_dir, tmp_path, monkeypatch):
    import json

    import specviz_core.bench.runner as runner

    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path / "data"))
    real, calls = runner.run_one, []

    def run_one(*a, **k):
        calls.append(1)
        if len(calls) == 4:  # in the second prompt's pld run
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(runner, "run_one", run_one)
    out = tmp_path / "b.json"
    code, _, err = cli(capsys, *bench_argv(tiny_dir, out, "--quiet"))
    res = json.loads(out.read_text())
    assert code == 130 and res["stopped"] == "interrupted" and res["config"]["prompts_finished"] == 1
    assert [r["method"] for r in res["rows"]] == ["ar", "pld"]
    assert err.strip().splitlines()[-1] == f"specviz: interrupted; the 1 of 3 prompts finished are in {out}"


# -- optimize-tree --------------------------------------------------------------------------------------------

def tree_argv(tmp_path, model, *more: str) -> list[str]:
    (tmp_path / "p.txt").write_text("one two three one two three one two")
    return ["optimize-tree", "--model", str(model), "--prompt-file", str(tmp_path / "p.txt"), "--out",
            str(tmp_path / "t.json"), "--no-chat-template", "--large", "40", "--keep", "8", "--max-depth", "6", *more]


@pytest.mark.parametrize("more,message", [
    (["--keep", "41"], "--keep 41 is more than the large tree's 40 nodes (--large): keep fewer"),
    (["--param", "tree=x.json"], "optimize-tree starts from its own large tree: do not pass tree="),
    (["--param", "budget=auto"], "optimize-tree decodes on its own large tree: budget=auto does not apply"),
    (["--minutes", "0"], "--minutes must be above 0 and at most 10,080 (a week), got 0"),
    (["--large", "5000"], "argument --large: must be from 1 to 4,096, got 5,000 (see specviz optimize-tree --help)"),
    (["--samples", "0"], "argument --samples: must be a whole number from 1 to 1,000, got '0' (see specviz optimize-tree --help)"),
])
def test_optimize_tree_refuses_before_any_model_loads(capsys, tmp_path, monkeypatch, more, message):
    no_model(monkeypatch)
    try:
        code, _, err = cli(capsys, *tree_argv(tmp_path, "nowhere", *more))
    except SystemExit as e:
        code, err = e.code, capsys.readouterr().err
    assert one_error(code, err) == message
    assert not (tmp_path / "t.json").exists()


def test_optimize_tree_stops_at_the_time_limit_and_writes_the_tree_so_far(capsys, tiny_dir, tmp_path, monkeypatch):
    import json

    import specviz_core.cli.optimize_tree as cli_tree

    clock = ticking_limit(monkeypatch, cli_tree, 1.0)  # 0.05 minutes: the third check before a cycle stops it
    code, out, err = cli(capsys, *tree_argv(tmp_path, tiny_dir, "--samples", "2", "--max-new-tokens", "24",
                                            "--minutes", "0.05"))
    assert code == 0, err
    data = json.loads((tmp_path / "t.json").read_text())
    cal = data["calibration"]
    assert clock.reads == 4 and cal["cycles"] == 2 and cal["samples_finished"] == 0 and cal["samples_planned"] == 2
    assert cal["stopped"] == "the time limit (--minutes 0.05) was reached" and data["nodes"] == 8
    assert err.strip().splitlines()[-1] == ("specviz: stopped: the time limit (--minutes 0.05) was reached; the tree "
                                            "counts the 2 cycles decoded (0 of 2 samples finished)")
    plan = "[specviz] 1 prompt x 2 samples of up to 24 tokens, every cycle verifying a 40-node tree of depth up to 6"
    assert plan in err and err.index(plan) < err.index("Loading")
    assert "prompt 1/1 sample 1/2" in err and "prompt 1/1" not in out and out.startswith("wrote ")


def test_optimize_tree_ctrl_c_writes_the_tree_of_the_cycles_decoded(capsys, tiny_dir, tmp_path, monkeypatch):
    import json

    import specviz_core.cli.optimize_tree as cli_tree

    updates = []

    class Bar:  # the progress bar, told of every cycle; Ctrl-C arrives during the third
        def set_description_str(self, *a, **k):
            pass

        def update(self, n):
            updates.append(n)
            if len(updates) == 3:
                raise KeyboardInterrupt

        def close(self):
            pass

    monkeypatch.setattr(cli_tree, "progress_bar", lambda **kw: Bar())
    code, _, err = cli(capsys, *tree_argv(tmp_path, tiny_dir, "--max-new-tokens", "24"))
    data = json.loads((tmp_path / "t.json").read_text())
    assert code == 130 and data["calibration"]["stopped"] == "interrupted" and data["calibration"]["cycles"] == 3
    assert data["calibration"]["tokens"] == sum(updates)
    assert err.strip().splitlines()[-1] == ("specviz: interrupted; the tree counts the 3 cycles decoded "
                                            "(0 of 1 sample finished)")


# -- reproduce ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("more,message", [
    (["--paper", "all"], "TALON's claims are about a trained draft head and the default model has none: run specviz "
                         "train-head first (about 10 minutes), or give --draft-head (or give --paper goose or stand)"),
    (["--paper", "talon"], "TALON's claims are about a trained draft head and the default model has none: run specviz "
                           "train-head first (about 10 minutes), or give --draft-head"),
    (["--paper", "talon", "--draft-head", "/no/such/head"], "draft head not found: /no/such/head (a folder with "
                                                             "config.json and pytorch_model.bin or model.safetensors, "
                                                             "or a hub id in the local cache)"),
    (["--paper", "goose", "--minutes", "0"], "--minutes must be above 0 and at most 10,080 (a week), got 0"),
])
def test_reproduce_refuses_before_any_model_loads(capsys, tmp_path, monkeypatch, more, message):
    monkeypatch.setenv("SPECVIZ_HEADS", str(tmp_path / "heads"))  # no head trained
    no_model(monkeypatch)
    code, out, err = cli(capsys, "reproduce", "--quick", "--out", str(tmp_path / "r.json"), *more)
    assert one_error(code, err) == message and out == ""
    assert not (tmp_path / "r.json").exists()


def test_reproduce_talon_with_a_wrong_model_path_says_so_not_that_a_head_is_missing(capsys, tmp_path, monkeypatch):
    no_model(monkeypatch)
    code, _, err = cli(capsys, "reproduce", "--paper", "talon", "--model", str(tmp_path / "none"))
    assert "train-head" not in one_error(code, err)


def test_reproduce_stops_at_the_time_limit_with_claims_over_the_prompts_finished(capsys, tiny_dir, tmp_path,
                                                                                  monkeypatch):
    import json

    import specviz_core.cli.reproduce as cli_reproduce
    from specviz_core.bench.reproduce.claims import GOOSE_SESSIONS

    clock = ticking_limit(monkeypatch, cli_reproduce, 6.0)  # 1 minute: the tenth check before a session stops it
    out = tmp_path / "r.json"
    code, printed, err = cli(capsys, "reproduce", "--paper", "goose", "--quick", "--model", str(tiny_dir),
                             "--minutes", "1", "--out", str(out))
    assert code == 0, err
    doc = json.loads(out.read_text())
    (res,) = doc["results"]
    # Nine sessions ran: the first prompt's eight and one of the second's, which does not count.
    assert clock.reads == 11 and GOOSE_SESSIONS == 8
    assert res["prompts_finished"] == 1 and res["prompts_planned"] == 3 and doc["stopped"] == res["stopped"]
    prop4 = next(c for c in res["claims"] if c["name"].startswith("tau >= max(PLD, TR)"))
    assert len(prop4["data"]["prompts"]) == len(prop4["data"]["goose"]) == 1 and prop4["ours"] == "1 of 1 prompts"
    assert err.strip().splitlines()[-1] == ("specviz: stopped: the time limit (--minutes 1) was reached; goose's "
                                            "claims are over the 1 of 3 prompts finished")
    plan = "[specviz] up to 24 sessions: 3 prompts x 8 for goose; at most 1 minute (--minutes)"
    assert plan in err and err.index(plan) < err.index("Loading")
    assert "9/24 [" in err and "/24 [" not in printed and "goose on " in printed  # the bar counts sessions


def test_reproduce_ctrl_c_keeps_the_claims_of_the_prompts_finished(capsys, tiny_dir, tmp_path, monkeypatch):
    import json

    import specviz_core.bench.reproduce.claims as core

    real, calls = core.decode, []

    def decode(*a, **k):
        calls.append(1)
        if len(calls) == 10:  # in the second prompt
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(core, "decode", decode)
    out = tmp_path / "r.json"
    code, printed, err = cli(capsys, "reproduce", "--paper", "goose", "--quick", "--model", str(tiny_dir), "--quiet",
                             "--out", str(out))
    (res,) = json.loads(out.read_text())["results"]
    assert code == 130 and res["stopped"] == "interrupted" and res["prompts_finished"] == 1
    assert "tau >= max(PLD, TR) on every prompt (Prop. 4)" in printed
    assert err.strip().splitlines()[-1] == ("specviz: interrupted; goose's claims are over the 1 of 3 prompts "
                                            "finished")

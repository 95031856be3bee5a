"""Forks (issue 20): a fork re-runs and checks its parent's cycles before the fork cycle, then switches settings.

Checked against the parent's own recorded cycles (unchanged settings), transformers' generate (another method)
and a recording tampered with by hand (the check must fail there)."""

from __future__ import annotations

import json
import random
import sqlite3

import pytest

from helpers import compare_greedy, hf_greedy
from specviz_core.cli.commands import main
from specviz_core.recording.store import SCHEMA_VERSION, Recording
from specviz_core.session.fork import Fork, ForkMismatch, fork_request
from specviz_core.session.spec import check_method, spec_for
from specviz_core.session.session import Session

_rng = random.Random(3)
_PAT = [_rng.randrange(96) for _ in range(5)]
PROMPT = _PAT * 3 + [_rng.randrange(96) for _ in range(4)] + _PAT[:2]
N = 40


def record(rec: Recording, m, method: str, temperature: float = 0.0, seed: int = 0, **params) -> str:
    spec = spec_for(check_method(method, params), PROMPT, max_new_tokens=N, temperature=temperature, seed=seed,
                    prompt="tiny")
    run = Session(spec, m, recording=rec)
    for _ in run.run():
        pass
    return run.info.id


def fork(rec: Recording, m, parent_id: str, cycle: int, anyway: bool = False, **changes) -> Fork:
    parent = rec.session(parent_id)
    return Fork.start(rec, parent, cycle, fork_request(parent, **changes), m, anyway=anyway)


def plain(c):
    """A cycle without its timings (the only thing a re-run may change on one machine)."""
    return c.replace(timings_ms={})


@pytest.mark.parametrize("temperature,seed", [(0.0, 0), (1.0, 11)], ids=["greedy", "sampled"])
@pytest.mark.parametrize("method,params", [("pld", {}), ("tr", {"budget": 12}), ("goose", {"budget": 16})],
                         ids=["pld", "tr", "goose"])
def test_unchanged_fork_reproduces_the_parents_remaining_cycles(tiny, one_thread, tmp_path, method, params,
                                                                temperature, seed):
    with Recording(tmp_path / "f.db", create=True) as rec:
        pid = record(rec, tiny, method, temperature, seed, **params)
        parent = list(rec.cycles(pid))
        assert len(parent) > 4
        cycle = len(parent) // 2
        run = fork(rec, tiny, pid, cycle)
        for _ in run.run():
            pass
        assert run.mismatch is None and run.switched
        child = list(rec.cycles(run.info.id))
        info = rec.session(run.info.id)
    assert [plain(c) for c in child] == [plain(c) for c in parent]  # every cycle, bit for bit (scores, top-k...)
    assert info.parent_session == pid and info.fork_cycle == cycle and info.status == "complete"
    assert info.method == method and info.stats["fork_check"] == f"reproduced cycles 0-{cycle - 1}"


@pytest.mark.parametrize("temperature,seed", [(0.0, 0), (0.8, 5)], ids=["greedy", "sampled"])
@pytest.mark.parametrize("method", ["goose", "tr"])
def test_a_default_budget_session_forks_exactly_on_another_machine(tiny, one_thread, tmp_path, monkeypatch, method,
                                                                   temperature, seed):
    """budget=auto's choices depend on the device's curve. A session recorded with one curve, forked where another
    is stored (another machine) and with a clock that makes every forward slow (a busy one), re-runs its cycles
    exactly: each cycle's recorded choice (draft ceiling, nodes kept, padding) is applied, not decided again. From
    the fork's cycle on, the new machine decides (and the output stays plain greedy's)."""
    from specviz_core.engine.cost_curve import measure_cost_curve
    from specviz_core.runtime.cost_files import save_cost_curve

    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path))
    curve = measure_cost_curve(tiny, sizes=tuple(range(1, 17)) + (64,), cache_len=32, reps=1, warmup=0)
    # Recorded where trees are cheap (8 rows cost less than 3: padding), forked where every row costs 30% more.
    # (its host times and load set too: a curve measured under load is measured again by a session on a quiet machine)
    save_cost_curve(dict(curve, ms=[10.0 + (0.5 if n != 8 else -2.0) * n for n in curve["n"]],
                         host_ms=[0.1] * len(curve["n"]), load=0.0))
    with Recording(tmp_path / "f.db", create=True) as rec:
        pid = record(rec, tiny, method, temperature, seed)
        parent = list(rec.cycles(pid))
        assert any(len(c.verify_order) > 1 and "ceiling" in c.state["budget"] for c in parent)
        save_cost_curve(dict(curve, ms=[10.0 * (1 + 0.3 * (n - 1)) for n in curve["n"]]))
        cycle = len(parent) - 2
        run = fork(rec, tiny, pid, cycle)
        run.engine.clock = iter(range(0, 10**9, 10**6)).__next__  # a second and more between readings
        for _ in run.run():
            pass
        assert run.mismatch is None, run.mismatch
        child = list(rec.cycles(run.info.id))
    assert [plain(c) for c in child[:cycle]] == [plain(c) for c in parent[:cycle]]
    if temperature == 0:
        assert run.engine.output_ids == hf_greedy(tiny, PROMPT, N)


@pytest.mark.parametrize("parent,child", [
    (("pld", {}), {"method": "tr"}),
    (("tr", {"budget": 30}), {"params": {"budget": 6}}),
    (("goose", {}), {"method": "pld"}),
], ids=["pld-to-tr", "tr-budget-30-to-6", "goose-to-pld"])
def test_fork_with_other_settings_keeps_the_prefix_and_is_lossless(tiny, one_thread, tmp_path, parent, child):
    method, params = parent
    with Recording(tmp_path / "f.db", create=True) as rec:
        pid = record(rec, tiny, method, **params)
        cycles = list(rec.cycles(pid))
        cycle = max(1, len(cycles) // 3)
        prefix = [t for c in cycles[:cycle] for t in c.committed_ids]
        run = fork(rec, tiny, pid, cycle, **child)
        for _ in run.run():
            pass
        info = rec.session(run.info.id)
        forked = list(rec.cycles(info.id))
    out = list(info.output_ids)
    assert out[:len(prefix)] == prefix  # the prefix, token for token
    assert [plain(c) for c in forked[:cycle]] == [plain(c) for c in cycles[:cycle]]
    ref = hf_greedy(tiny, PROMPT, N)
    assert compare_greedy(tiny, PROMPT, out, ref) in ("identical",) or "tie" in compare_greedy(tiny, PROMPT, out, ref)
    after = forked[cycle:]
    if "method" in child:
        assert info.method == child["method"]
        source = {"tr": "recycle", "pld": "ngram"}[child["method"]]
        assert {n.source for c in after for n in c.nodes} <= {"root", source}
        assert "warmup" in after[0].timings_ms  # the new drafter's start on the committed prefix is timed
    else:
        assert all(c.n_verified <= 1 + child["params"]["budget"] for c in after)
        assert any(c.n_verified > 7 for c in cycles[cycle:])  # the parent's budget did verify more


def _tamper(path, sid: str, index: int) -> None:
    """Change a recorded cycle's bonus token and so its last committed token (the record stays self-consistent:
    the reader's own checks pass, only a re-run can tell)."""
    conn = sqlite3.connect(path)
    with conn:
        raw, bonus = conn.execute("SELECT committed_ids, bonus_token FROM cycles WHERE session_id = ? AND idx = ?",
                                  [sid, index]).fetchone()
        ids = json.loads(raw)
        assert ids[-1] == bonus
        ids[-1] = (bonus + 1) % 96
        conn.execute("UPDATE cycles SET committed_ids = ?, bonus_token = ? WHERE session_id = ? AND idx = ?",
                     [json.dumps(ids), ids[-1], sid, index])
    conn.close()


def test_a_tampered_parent_fails_the_check_and_the_user_chooses(tiny, one_thread, tmp_path):
    path = tmp_path / "f.db"
    with Recording(path, create=True) as rec:
        pid = record(rec, tiny, "tr", budget=12)
    _tamper(path, pid, 2)
    with Recording(path) as rec:
        stopped = fork(rec, tiny, pid, 5)
        with pytest.raises(ForkMismatch) as err:
            for _ in range(6):
                stopped.step()
        assert err.value.mismatch.cycle == 2 and err.value.mismatch.what == "committed tokens"
        assert "cycle 2 did not reproduce" in str(err.value)
        assert rec.session(stopped.info.id).n_cycles == 2  # the differing cycle is not stored while it waits
        with pytest.raises(ForkMismatch):
            stopped.step()  # asking again does not slip past the check
        stopped.stop()
        failed = rec.session(stopped.info.id)
        assert failed.status == "failed" and "cycle 2 did not reproduce" in failed.stop_reason

        go_on = fork(rec, tiny, pid, 5)
        with pytest.raises(ForkMismatch):
            while True:
                go_on.step()
        go_on.continue_anyway()
        while not go_on.engine.done:
            go_on.step()
        done = rec.session(go_on.info.id)
    assert done.status == "complete" and done.stats["fork_check"].startswith("not reproducible: cycle 2")


def test_cli_fork_lists_exports_and_refuses_a_tampered_parent(tiny_dir, one_thread, tmp_path, capsys):
    db = tmp_path / "c.db"
    assert main(["record", "--method", "pld", "--model", str(tiny_dir), "--prompt", "one two three one two three",
                 "--max-new-tokens", "24", "--db", str(db), "--quiet"]) == 0
    with Recording(db) as rec:
        pid = rec.session().id
    assert main(["record", "--fork", f"{pid}:3", "--method", "tr", "--param", "budget=8", "--db", str(db),
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"fork of {pid} at cycle 3 (reproduced cycles 0-2)" in out
    assert main(["sessions", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith(pid) and lines[2].startswith("  ") and lines[2].rstrip().endswith(f"fork of {pid}@3")
    assert main(["export", "--db", str(db)]) == 0
    head = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (head["parent_session"], head["fork_cycle"], head["method"]) == (pid, 3, "tr")
    assert main(["export", "--db", str(db), "--session", pid]) == 0
    assert "parent_session" not in json.loads(capsys.readouterr().out.splitlines()[0])  # not a fork: as before

    _tamper(db, pid, 1)
    assert main(["record", "--fork", f"{pid}:3", "--db", str(db), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cycle 1 did not reproduce: its committed tokens differ" in err[0]
    assert main(["record", "--fork", f"{pid}:3", "--fork-anyway", "--db", str(db), "--quiet"]) == 0
    assert "continued anyway" in capsys.readouterr().err
    for bad, why in ((f"{pid}:99", "cannot fork at cycle 99"), ("nope:1", "no session 'nope'"),
                     (pid, "SESSION:CYCLE")):
        assert main(["record", "--fork", bad, "--db", str(db), "--quiet"]) == 2
        assert why in capsys.readouterr().err


def test_a_schema_3_file_gains_the_fork_columns(tiny, one_thread, tmp_path):
    path = tmp_path / "old.db"
    with Recording(path, create=True) as rec:
        sid = record(rec, tiny, "ar")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("ALTER TABLE sessions DROP COLUMN parent_session")
        conn.execute("ALTER TABLE sessions DROP COLUMN fork_cycle")
        conn.execute("UPDATE specviz_meta SET value = '3' WHERE key = 'schema_version'")
    conn.close()
    with Recording(path, read_only=True) as rec:  # read as it is
        assert rec.session(sid).parent_session is None
    with Recording(path) as rec:  # upgraded in place
        assert rec.session(sid).fork_cycle is None
        assert rec.db.execute("SELECT value FROM specviz_meta WHERE key = 'schema_version'").fetchone()[0] \
            == str(SCHEMA_VERSION)
        assert {"parent_session", "fork_cycle"} <= {c.name for c in rec.db["sessions"].columns}

"""Issue 15.4: damaged recordings are read defensively. Every kind of damage gives a clear message naming the
file, the session and the cycle; ``export`` skips damaged cycles (or fails with ``--strict``); ``check`` reports
a file's integrity without changing it; the viewer shows a damaged cycle as damaged and keeps going."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from helpers import make_session
from specviz_core.cli.commands import main
from specviz_core.errors import DamagedCycle, DamagedRecording
from specviz_core.recording.store import Recording
from specviz_core.records import SessionInfo
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import RecordingSource

PROMPT = [3, 4, 5, 6, 3, 4, 5, 6, 3, 4]
BAD = 2
"""The cycle the targeted tests damage."""
TIMINGS = {"draft": 1.0, "forward": 4.0, "walk": 0.5, "trim": 0.25, "harvest": 0.25, "build": 0.5, "record": 0.5}


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def single_file(path: Path) -> None:
    """Fold the WAL into the file and remove it, so the file's bytes are the whole recording."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")  # as the recorder leaves it
    conn.close()
    for extra in ("-wal", "-shm"):
        Path(f"{path}{extra}").unlink(missing_ok=True)


@pytest.fixture(scope="module")
def good(tmp_path_factory, tiny):
    """A recording of two sessions on a tiny model: Token Recycling (trees of ~80 nodes) and AR. Built once."""
    path = tmp_path_factory.mktemp("damaged") / "good.db"
    sids = []
    with Recording(path, create=True) as rec:
        for method, n in (("tr", 24), ("ar", 6)):
            info = SessionInfo(id=f"{method}session", model="tiny", tokenizer="", method=method, params={},
                               prompt_ids=tuple(PROMPT), prompt_text="3 4 5 6", temperature=0.0, seed=0,
                               device="cpu", dtype="float32", max_new_tokens=n)
            run = make_session(tiny, method, PROMPT, n, recording=rec, info=info)
            for _ in run.run():
                pass
            sids.append(info.id)
    # Times and writer details differ from run to run: fix them, so the file's bytes (and the fuzz test's cases)
    # are the same every time.
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE cycles SET timings_ms = ?", [json.dumps(TIMINGS, separators=(",", ":"))])
        conn.execute("UPDATE sessions SET created = '2026-01-01T00:00:00.000+00:00', writer_pid = 1, "
                     "writer_started = 0, writer_host = 'test', prefill_ms = 1.0, decode_ms = n_cycles * ?",
                     [sum(TIMINGS.values())])
    conn.execute("VACUUM")
    conn.close()
    single_file(path)
    return path, sids


def damaged_copy(good, tmp_path: Path, *sql: str) -> Path:
    """A copy of the good recording with ``sql`` applied (``{sid}`` is the tree session's id)."""
    path = tmp_path / "bad.db"
    shutil.copy(good[0], path)
    conn = sqlite3.connect(path)
    with conn:
        for s in sql:
            conn.execute(s.format(sid=good[1][0], bad=BAD))
    conn.close()
    single_file(path)
    return path


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def where(cycle: bool = True) -> str:
    return f"session trsession, cycle {BAD} is damaged" if cycle else "session trsession is damaged"


ROW = " WHERE idx = {bad} AND session_id = '{sid}'"
"""The damaged row: cycle BAD of the tree session."""
CYCLE_DAMAGE = {
    "bad JSON": ("UPDATE cycles SET nodes = substr(nodes, 1, 40)" + ROW, "nodes: not valid JSON"),
    "missing key": ("UPDATE cycles SET nodes = json_remove(nodes, '$.source')" + ROW,
                    "nodes: no 'source'"),
    "wrong type": ("UPDATE cycles SET cache_len = 'many'" + ROW, "cache_len: 'many' is not a whole number"),
    "wrong JSON type": ("UPDATE cycles SET verify_order = '{{\"a\": 1}}'" + ROW,
                        "verify_order: an object, not a list"),
    "invalid UTF-8": ("UPDATE cycles SET state = CAST(X'7B2278223A22FF227D' AS TEXT)" + ROW,
                      "state: not valid UTF-8"),
    "unknown source": ("UPDATE cycles SET nodes = replace(nodes, '\"root\"', '\"soot\"')" + ROW,
                       "node 0: source 'soot' is not one of root, spine,"),
    "truncated mask": ("UPDATE cycles SET mask = substr(mask, 1, 10)" + ROW, "mask: 10 bytes"),
    "parent out of range": ("UPDATE cycles SET nodes = json_set(nodes, '$.parent[3]', 999)" + ROW,
                            "node 3: parent 999 is not an earlier node"),
    "flipped mask bit": ("UPDATE cycles SET mask = CAST(zeroblob(length(mask)) AS BLOB)" + ROW,
                         "mask: row 0 does not attend to"),
    "accepted path off the tree": (
        "UPDATE cycles SET accepted_path = '[1, 999]', n_accepted = 2" + ROW,
        "accepted_path: 999 is not a node"),
}
SUMMARY_DAMAGE = "UPDATE cycles SET summary = '[1'" + ROW


@pytest.mark.parametrize("kind", list(CYCLE_DAMAGE))
def test_each_kind_of_cycle_damage_names_session_and_cycle(good, tmp_path, capsys, kind):
    sql, reason = CYCLE_DAMAGE[kind]
    path = damaged_copy(good, tmp_path, sql)
    before = digest(path)
    with Recording(path, read_only=True) as rec:
        with pytest.raises(DamagedCycle) as e:
            rec.cycle("trsession", BAD)
        assert str(e.value).startswith(f"{path}: {where()}: ") and reason in str(e.value), str(e.value)
        assert rec.cycle("trsession", BAD + 1).index == BAD + 1

    # export skips it and says so; --strict fails with the same message and leaves no file
    out = tmp_path / "x.jsonl"
    code, _, err = cli(capsys, "export", "--db", str(path), "--session", "trsession", "--out", str(out))
    assert code == 0 and "Traceback" not in err
    assert f"skipped cycle {BAD} of session trsession" in err and reason in err, err
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["index"] for x in lines[1:]] == [i for i in range(lines[0]["n_cycles"]) if i != BAD]
    out.unlink()
    code, _, err = cli(capsys, "export", "--db", str(path), "--session", "trsession", "--out", str(out), "--strict")
    assert code == 2 and not out.exists() and len(err.strip().splitlines()) == 1
    assert err.startswith(f"specviz: error: {path}: {where()}: ") and reason in err, err

    # check reports it, exits 1
    code, report, err = cli(capsys, "check", "--db", str(path))
    assert code == 1 and not err, err
    assert f"cycle {BAD}: " in report and reason in report, report
    assert digest(path) == before


def test_the_issue_bit_flip_soot_for_root(good, tmp_path, capsys):
    """One bit flip in the file ('r' 0x72 -> 's' 0x73) showed a node source 'soot' for 'root', silently."""
    path = tmp_path / "flip.db"
    data = bytearray(good[0].read_bytes())
    at = data.find(b'"root"')
    assert at > 0
    data[at + 1] ^= 0x01
    path.write_bytes(bytes(data))
    code, report, _ = cli(capsys, "check", "--db", str(path))
    assert code == 1 and "source 'soot' is not one of" in report, report


SESSION_DAMAGE = {
    "bad params JSON": ("UPDATE sessions SET params = '{{bad' WHERE id = '{sid}'", "params: not valid JSON"),
    "prompt ids of the wrong type": ("UPDATE sessions SET prompt_ids = '[1, \"two\"]' WHERE id = '{sid}'",
                                     "prompt_ids: item 1 is not a whole number"),
    "unknown status": ("UPDATE sessions SET status = 'exploded' WHERE id = '{sid}'",
                       "status: 'exploded' is not one of"),
    "invalid UTF-8 prompt": ("UPDATE sessions SET prompt_text = CAST(X'41FF42' AS TEXT) WHERE id = '{sid}'",
                             "prompt_text: not valid UTF-8"),
}


@pytest.mark.parametrize("kind", list(SESSION_DAMAGE))
def test_session_damage_names_the_session(good, tmp_path, capsys, kind):
    sql, reason = SESSION_DAMAGE[kind]
    path = damaged_copy(good, tmp_path, sql)
    before = digest(path)
    code, out, err = cli(capsys, "sessions", "--db", str(path))
    assert code == 0 and "arsession" in out and "trsession" in out and reason in out, out + err
    code, _, err = cli(capsys, "export", "--db", str(path), "--session", "trsession")
    assert code == 2 and err == f"specviz: error: {path}: {where(False)}: {err.split(': ', 4)[-1]}"
    assert reason in err
    code, out, _ = cli(capsys, "export", "--db", str(path), "--session", "arsession")
    assert code == 0 and json.loads(out.splitlines()[0])["id"] == "arsession"
    code, report, _ = cli(capsys, "check", "--db", str(path))
    assert code == 1 and reason in report
    assert digest(path) == before


def test_check_on_a_clean_file(good, capsys):
    before = digest(good[0])
    code, report, err = cli(capsys, "check", "--db", str(good[0]))
    assert code == 0 and not err
    assert "integrity check: ok" in report and "session trsession" in report and "cycles ok" in report
    code, report, _ = cli(capsys, "check", "--db", str(good[0]), "--session", "arsession", "--quick")
    assert code == 0 and "trsession" not in report and "arsession" in report
    assert digest(good[0]) == before
    assert sorted(p.name for p in good[0].parent.iterdir()) == ["good.db"], "check must leave no -wal or -shm"


@pytest.mark.parametrize("argv, needle", [
    (["--db", "/no/such.db"], "no recording at /no/such.db"),
    (["--db", "."], "is a folder"),
    (["--session", "nope"], "no session 'nope'"),
])
def test_check_usage_errors(good, capsys, argv, needle):
    if "--db" not in argv:
        argv = ["--db", str(good[0]), *argv]
    code, _, err = cli(capsys, "check", *argv)
    assert code == 2 and err.startswith("specviz: error: ") and needle in err and len(err.splitlines()) == 1


def test_a_truncated_file_is_one_line(good, tmp_path, capsys):
    path = tmp_path / "cut.db"
    path.write_bytes(good[0].read_bytes()[:3000])
    for argv in (["sessions"], ["export"], ["check"]):
        code, out, err = cli(capsys, *argv, "--db", str(path))
        assert code in (1, 2) and "Traceback" not in err and "unexpected" not in err, err
        assert len(err.strip().splitlines()) <= 1


def test_cross_cycle_damage_is_found_by_check(good, tmp_path, capsys):
    """A digit changed in cache_len keeps the row well-formed; the chain of cache lengths shows it."""
    path = damaged_copy(good, tmp_path, "UPDATE cycles SET cache_len = cache_len + 1, positions = (SELECT "
                                        "json_group_array(value + 1) FROM json_each(positions)) WHERE idx = {bad} "
                                        "AND session_id = '{sid}'")
    code, report, _ = cli(capsys, "check", "--db", str(path))
    assert code == 1 and f"cycle {BAD}: cache_len" in report and "damaged: 2, 3" in report, report
    assert report.endswith("is damaged: 2 damaged cycles in 1 session\n")


# -- the viewer ------------------------------------------------------------------------------------------------------
def test_the_viewer_shows_a_damaged_cycle_and_keeps_going(good, tmp_path):
    path = damaged_copy(good, tmp_path, CYCLE_DAMAGE["unknown source"][0])
    model = SessionModel()
    seen = []
    model.cycle_changed.connect(lambda rec: seen.append((model.index, rec)))
    with Recording(path) as rec:
        source = RecordingSource(rec, "trsession")
        model.open(source)
        n = model.n_cycles
        assert n > BAD + 2 and model.index == 0 and model.record.index == 0
        for _ in range(n + 2):
            model.move(1)
        indices = [i for i, _ in seen]
        assert indices == list(range(n)), "stepping visits every cycle, the damaged one included"
        for i, record in seen:
            if i == BAD:
                assert record is None
            else:
                assert record is not None and record.index == i
        model.set_cycle(BAD)
        assert model.record is None and model.index == BAD
        assert model.damage_text.startswith(f"Cycle {BAD} is damaged: node 0: source 'soot'")
        assert source.summaries()[BAD].damaged, "the timeline learns the cycle is damaged"
        assert BAD not in model.visible_indices() or model.filter.kind == "all"
        model.move(-1)
        assert model.index == BAD - 1 and model.record.index == BAD - 1 and model.damage_text == ""


def test_a_damaged_summary_is_summarised_again(good, tmp_path, capsys):
    """The stored summary is derived data: the viewer summarises the cycle again, export has no use for it; check
    reports the damage."""
    path = damaged_copy(good, tmp_path, SUMMARY_DAMAGE)
    with Recording(good[0], read_only=True) as rec:
        want = rec.cycle_summaries("trsession")
    with Recording(path) as rec:
        source = RecordingSource(rec, "trsession")
        assert source.summaries() == want and not any(s.damaged for s in want)
        assert source.cycle(BAD).index == BAD
    code, report, _ = cli(capsys, "check", "--db", str(path))
    assert code == 1 and f"cycle {BAD}: summary: not valid JSON" in report, report
    assert "(the viewer summarises the cycle again)" in report
    code, out, err = cli(capsys, "export", "--db", str(path), "--session", "trsession", "--strict")
    assert code == 0 and not err and len(out.splitlines()) == 1 + len(want)


def test_a_session_that_cannot_be_read_is_an_error_not_a_traceback(good, tmp_path):
    path = damaged_copy(good, tmp_path, SESSION_DAMAGE["bad params JSON"][0])
    with Recording(path) as rec:
        with pytest.raises(DamagedRecording, match="session trsession is damaged: params: not valid JSON"):
            RecordingSource(rec, "trsession")
        assert RecordingSource(rec, "arsession").ar_baseline()[1] == "this session is AR"


def clean(good) -> str:
    """How ``specviz check`` ends its report on the undamaged recording (its cycles counted here, in SQL)."""
    conn = sqlite3.connect(good[0])
    try:
        n = conn.execute("SELECT COUNT(*) FROM cycles").fetchone()[0]
    finally:
        conn.close()
    return f"is clean: 2 sessions, {n} cycles"


def test_the_readme_check_command_runs_as_written(good, tmp_path, capsys, monkeypatch):
    import shlex

    from test_docs import readme_block

    lines = readme_block("`check` reports a file's integrity")
    assert lines and all(line.startswith("specviz check ") for line in lines)
    monkeypatch.chdir(tmp_path)
    shutil.copy(good[0], tmp_path / "runs.db")
    for line in lines:
        code, out, err = cli(capsys, *shlex.split(line)[1:])
        assert code == 0 and not err and out.rstrip().endswith(clean(good)), out + err


def test_reading_commands_report_a_dead_writer_without_writing(good, tmp_path, capsys):
    """sessions, export and check open the file read-only: a session whose writer died is reported interrupted, as
    a writable open would mark it, and the file is left as it was."""
    import socket

    path = damaged_copy(good, tmp_path, "UPDATE sessions SET status = 'running', writer_pid = 999999999, "
                                        f"writer_host = '{socket.gethostname()}' WHERE id = '{{sid}}'")
    before = digest(path)
    code, out, _ = cli(capsys, "sessions", "--db", str(path))
    assert code == 0 and [line.split()[3] for line in out.splitlines()[1:]] == ["interrupted", "complete"]
    code, out, _ = cli(capsys, "export", "--db", str(path), "--session", "trsession")
    assert code == 0 and json.loads(out.splitlines()[0])["stop_reason"] == "writer stopped"
    assert digest(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["bad.db"]
    with Recording(path) as rec:  # opened for writing, it is marked
        assert rec.session("trsession").status == "interrupted"
    assert digest(path) != before


def test_check_reads_a_version_1_file_as_it_is(good, tmp_path, capsys):
    """A schema 1 file has no stored summaries: check (read-only, no upgrade) does not call them missing."""
    path = damaged_copy(good, tmp_path, "ALTER TABLE cycles DROP COLUMN summary",
                        "UPDATE specviz_meta SET value = '1' WHERE key = 'schema_version'")
    before = digest(path)
    code, report, _ = cli(capsys, "check", "--db", str(path))
    assert code == 0 and report.rstrip().endswith(clean(good)), report
    assert digest(path) == before


def test_check_counts_one_as_one(tmp_path, tiny_dir, capsys):
    """Issue 30, item 9: ``check`` said "1 cycles"."""
    db = tmp_path / "one.db"
    assert main(["record", "--method", "ar", "--model", str(tiny_dir), "--prompt", "one two", "--max-new-tokens", "1",
                 "--device", "cpu", "--db", str(db), "--quiet"]) == 0
    capsys.readouterr()
    code, report, _ = cli(capsys, "check", "--db", str(db))
    assert code == 0 and ": 1 cycle ok" in report and "is clean: 1 session, 1 cycle" in report, report
    assert "1 cycles" not in report and "1 sessions" not in report


@pytest.mark.parametrize("keep", [0.6, 0.85])
def test_a_truncated_file_is_salvaged_cycle_by_cycle(good, tmp_path, capsys, keep):
    """A copy cut short is unreadable to SQLite as a whole; ``check --salvage`` writes every session and cycle still
    whole in it to a new recording: each kept cycle equal to the original's (read from the good file by SQLite), the
    sessions whose cycles were lost marked interrupted, and the loss said per session."""
    cut = tmp_path / "cut.db"
    data = good[0].read_bytes()
    cut.write_bytes(data[: int(len(data) * keep)])
    code, _, err = cli(capsys, "sessions", "--db", str(cut))
    assert code != 0 and "damaged" in err  # SQLite refuses it as a whole
    out = tmp_path / "salvaged.db"
    code, text, err = cli(capsys, "check", "--db", str(cut), "--salvage", str(out))
    assert code == 0 and not err, err
    with Recording(good[0], read_only=True) as rec:
        originals = {(s.id, c.index): c for s in rec.sessions() for c in rec.cycles(s.id)}
        infos = {s.id: s for s in rec.sessions()}
    with Recording(out, read_only=True) as rec:
        kept = {(s.id, c.index): c for s in rec.sessions() for c in rec.cycles(s.id)}
        salvaged = {s.id: s for s in rec.sessions()}
    assert kept and set(kept) < set(originals)  # something kept, something lost
    assert all(kept[k] == originals[k] for k in kept)
    for sid, s in salvaged.items():
        lost = [i for i in range(infos[sid].n_cycles) if (sid, i) not in kept]
        assert (s.status == "interrupted") == bool(lost), (sid, lost)
        line = next(x for x in text.splitlines() if x.startswith(f"session {sid} "))
        assert f"{infos[sid].n_cycles - len(lost)} cycles kept" in line
        if lost:
            assert f"{len(lost)} lost" in line and "salvaged from a damaged recording" in s.stop_reason
        # Its counters are what the new file holds: the kept cycles' tokens (none for a session that kept none).
        mine = [kept[k] for k in sorted(kept) if k[0] == sid]
        assert (s.n_cycles, s.n_tokens) == (len(mine), sum(len(c.committed_ids) for c in mine))
    code, _, err = cli(capsys, "check", "--db", str(cut), "--salvage", str(out))
    assert code == 2 and "exists" in err  # never overwrites

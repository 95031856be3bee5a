"""Recording: replay gives identical records, a killed writer leaves a readable file, bad files change nothing."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import make_session
from specviz_core.errors import SpecVizError
from specviz_core.recording.export import export_jsonl
from specviz_core.recording.rows import pack_mask, unpack_mask
from specviz_core.recording.store import SCHEMA_VERSION, Recording, new_session_id
from specviz_core.records import SessionInfo


def info_for(prompt, method="tr") -> SessionInfo:
    return SessionInfo(id=new_session_id(), model="tiny", tokenizer="tiny", method=method, params={},
                       prompt_ids=tuple(prompt), prompt_text="", temperature=0.0, seed=0, device="cpu",
                       dtype="float32", max_new_tokens=30)


def record_tiny(tiny, path: Path, method="tr"):
    prompt = [3, 4, 5, 6, 3, 4, 5, 6, 3, 4]
    with Recording(path, create=True) as rec:
        run = make_session(tiny, method, prompt, 30, recording=rec, info=info_for(prompt, method))
        live = [c.record for c in run.run()]
    return run.info.id, live, run.engine


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_mask_packing_roundtrip():
    rng = np.random.default_rng(0)
    m = rng.random((60, 60)) < 0.3
    blob = pack_mask(m)
    assert len(blob) == 450
    assert (unpack_mask(blob, 60) == m).all()


@pytest.mark.parametrize("method", ["tr", "draft_tree"])
def test_replay_gives_identical_records(tiny, tmp_path, method):
    sid, live, engine = record_tiny(tiny, tmp_path / "s.db", method)
    with Recording(tmp_path / "s.db") as rec:
        replay = list(rec.cycles(sid))
        info = rec.session(sid)
        assert rec.cycle(sid, 3) == live[3]
    assert len(replay) == len(live) > 3
    assert replay == live
    assert list(info.output_ids) == engine.output_ids
    assert info.status == "complete" and info.n_forward == len(live) and info.n_tokens == len(engine.output_ids)


def test_export_has_the_documented_fields(tiny, tmp_path):
    import io

    sid, live, engine = record_tiny(tiny, tmp_path / "s.db")
    buf = io.StringIO()
    with Recording(tmp_path / "s.db") as rec:
        export_jsonl(rec, sid, buf)
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    s, cycles = lines[0], lines[1:]
    for key in ("id", "model", "method", "params", "prompt_ids", "output_ids", "temperature", "seed", "status",
                "n_forward", "decode_ms"):
        assert key in s
    assert s["output_ids"] == engine.output_ids and len(cycles) == len(live)
    for c, r in zip(cycles, live):
        for key in ("index", "mode", "cache_len", "nodes", "verify_order", "mask", "positions", "accepted_path",
                    "bonus_token", "committed_ids", "kv_keep", "timings_ms"):
            assert key in c
        assert set(c["nodes"][0]) >= {"id", "parent", "token", "source", "depth", "score", "verified", "accepted",
                                      "target_token"}
        # The mask strings are the mask the model saw: ancestors and self, by the parents in the export.
        parent = {n["id"]: n["parent"] for n in c["nodes"]}
        row_of = {nid: i for i, nid in enumerate(c["verify_order"])}
        for i, nid in enumerate(c["verify_order"]):
            anc, a = set(), nid
            while a != -1:
                anc.add(row_of[a])
                a = parent[a]
            assert c["mask"][i] == "".join("1" if j in anc else "0" for j in range(len(c["verify_order"])))
        assert c["committed_ids"] == list(r.committed_ids)


KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    from helpers import tiny_llama, make_session
    from specviz_core.recording.store import Recording, new_session_id
    from specviz_core.records import SessionInfo
    m = tiny_llama()
    prompt = [3, 4, 5, 6, 3, 4]
    info = SessionInfo(id="victim", model="tiny", tokenizer="tiny", method="ar", params={{}}, prompt_ids=tuple(prompt),
                       prompt_text="", temperature=0.0, seed=0, device="cpu", dtype="float32", max_new_tokens=200)
    rec = Recording(sys.argv[1], create=True)
    run = make_session(m, "ar", prompt, 200, recording=rec, info=info)
    for i, c in enumerate(run.run()):
        if i == 5:
            print("ready", flush=True)
        time.sleep(0.05)
""")


def test_sigkill_leaves_committed_cycles_and_marks_interrupted(tmp_path):
    db = tmp_path / "k.db"
    script = tmp_path / "victim.py"
    script.write_text(KILL_SCRIPT.format(tests=str(Path(__file__).resolve().parents[1])))
    with subprocess.Popen([sys.executable, str(script), str(db)], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with Recording(db) as rec:
        info = rec.session("victim")
        cycles = list(rec.cycles("victim"))
    assert info.status == "interrupted"
    assert len(cycles) >= 6 and [c.index for c in cycles] == list(range(len(cycles)))
    assert info.n_cycles == len(cycles)  # counters committed with each cycle, in one transaction
    assert list(info.output_ids) == [t for c in cycles for t in c.committed_ids]


def test_corrupt_file_gives_clear_error_and_is_untouched(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    before = digest(bad)
    with pytest.raises(SpecVizError, match="not a SpecViz recording"):
        Recording(bad)
    with pytest.raises(SpecVizError, match="not a SpecViz recording"):
        Recording(bad, create=True)
    assert digest(bad) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.db"]


def test_newer_schema_gives_clear_error_and_is_untouched(tiny, tmp_path):
    db = tmp_path / "new.db"
    record_tiny(tiny, db)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE specviz_meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = digest(db)
    with pytest.raises(SpecVizError, match="newer SpecViz"):
        Recording(db)
    assert digest(db) == before


def test_foreign_sqlite_file_is_refused(tmp_path):
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    before = digest(db)
    with pytest.raises(SpecVizError, match="not a SpecViz recording"):
        Recording(db, create=True)
    assert digest(db) == before


def test_schema_2_file_is_upgraded_with_an_empty_attention(tiny, tmp_path):
    path = tmp_path / "old.db"
    sid, live, _ = record_tiny(tiny, path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("ALTER TABLE sessions DROP COLUMN attention")
        conn.execute("UPDATE specviz_meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()
    with Recording(path) as rec:
        info = rec.session(sid)
        assert info.attention == "" and info.n_cycles == len(live)
        assert rec.db.execute("SELECT value FROM specviz_meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_a_recording_on_read_only_media_replays(tiny, tmp_path, monkeypatch):
    """Issue 15.5: a valid file whose folder cannot be written (a CD, a read-only mount) opened as immutable,
    not reported as corrupt; nothing is written beside it."""
    path = tmp_path / "ro" / "r.db"
    path.parent.mkdir()
    sid, live, _ = record_tiny(tiny, path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for extra in ("-wal", "-shm"):
        (path.parent / f"r.db{extra}").unlink(missing_ok=True)
    before = digest(path)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p).parent == tmp_path and mode == os.W_OK
                        else real_access(p, mode))
    with Recording(path) as rec:
        assert rec.read_only
        assert [c.committed_ids for c in rec.cycles(sid)] == [c.committed_ids for c in live]
    assert digest(path) == before and sorted(p.name for p in path.parent.iterdir()) == ["r.db"]
    with pytest.raises(SpecVizError, match="is read-only"):
        Recording(path, create=True)


def test_export_of_a_session_being_recorded_is_one_snapshot(tiny, tmp_path, monkeypatch):
    """Issue 15.8: a cycle committed by another writer while export runs is in neither the counts nor the lines."""
    import io

    from specviz_core.recording import export

    path = tmp_path / "r.db"
    sid, live, _ = record_tiny(tiny, path)
    real_line = export.session_line

    def line_then_another_writer_appends(info, *rest):
        other = sqlite3.connect(path)
        with other:
            other.execute("INSERT INTO cycles SELECT session_id, idx + 1000, mode, cache_len, n_verified, n_accepted, "
                          "nodes, verify_order, mask, positions, accepted_path, bonus_token, committed_ids, kv_keep, "
                          "target_topk, state, timings_ms, summary FROM cycles WHERE idx = 0")
            other.execute("UPDATE sessions SET n_cycles = n_cycles + 1, n_forward = n_forward + 1")
        other.close()
        return real_line(info, *rest)

    monkeypatch.setattr(export, "session_line", line_then_another_writer_appends)
    buf = io.StringIO()
    with Recording(path) as rec:
        n = export.export_jsonl(rec, sid, buf)
    lines = buf.getvalue().splitlines()
    assert n == len(lines) - 1 == json.loads(lines[0])["n_cycles"] == len(live)


class _InterruptOnCounterUpdate:
    """A connection whose UPDATE of the session counters is interrupted (Ctrl-C) after the cycle's INSERT."""

    def __init__(self, conn):
        self._conn = conn

    def execute(self, sql, *args):
        if sql.startswith("UPDATE sessions SET n_cycles"):
            raise KeyboardInterrupt
        return self._conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_ctrl_c_inside_a_cycle_write_leaves_counts_and_rows_in_step(tiny, tmp_path):
    """Issue 15.10: the INSERT and the counters are one transaction, even when interrupted between them."""
    path = tmp_path / "r.db"
    prompt = [3, 4, 5, 6, 3, 4, 5, 6, 3, 4]
    with Recording(path, create=True) as rec:
        run = make_session(tiny, "tr", prompt, 30, recording=rec, info=info_for(prompt, "tr"))
        run.step()
        real = rec.db.conn
        rec.db.conn = _InterruptOnCounterUpdate(real)
        with pytest.raises(KeyboardInterrupt):
            run.step()
        rec.db.conn = real
        run.finish("interrupted", "stopped by the user")  # commits: the half-written cycle must not come with it
        info = rec.session(run.info.id)
        assert info.n_cycles == rec.n_cycles(info.id) == 1


def test_a_locked_database_fails_the_session_once_without_blaming_the_user(tiny, tmp_path, monkeypatch):
    """Issue 15.9: another writer holding the file past the busy timeout gives one clear error, and the session
    is not recorded as 'stopped by the user'."""
    monkeypatch.setattr(Recording, "busy_timeout_s", 0.2)
    path = tmp_path / "r.db"
    prompt = [3, 4, 5, 6, 3, 4, 5, 6, 3, 4]
    with Recording(path, create=True) as rec:
        run = make_session(tiny, "tr", prompt, 30, recording=rec, info=info_for(prompt, "tr"))
        cycles = run.run()
        next(cycles)
        blocker = sqlite3.connect(path)
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(SpecVizError, match="cannot write the recording.*locked"):
            next(cycles)
        cycles.close()
        blocker.rollback()
        blocker.close()
        info = rec.session(run.info.id)
        assert info.stop_reason != "stopped by the user" and info.n_cycles == rec.n_cycles(info.id) == 1


def _create_at_once(path: str, barrier, results) -> None:
    barrier.wait()
    try:
        with Recording(path, create=True) as rec:
            results.put(("ok", rec.sessions()))
    except Exception as e:  # the test reports what went wrong
        results.put((type(e).__name__, str(e)))


def test_two_processes_creating_one_fresh_file_both_succeed(tmp_path):
    """Issue 15.10: two writers creating a new recording at the same moment (it failed half the time)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    for i in range(8):
        path = str(tmp_path / f"fresh{i}.db")
        barrier, results = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_create_at_once, args=(path, barrier, results)) for _ in range(2)]
        for p in procs:
            p.start()
        got = [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert got == [("ok", []), ("ok", [])], got
        with Recording(path) as rec:
            assert rec.db.execute("SELECT value FROM specviz_meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_a_copy_of_the_db_alone_holds_the_committed_cycles(tiny, tmp_path):
    """Issue 30, item 10: a recording copied (the .db file alone) while a session was written opened as empty: the
    cycles were all in the -wal file. They reach the main file every few cycles, and at the end of the session,
    also while another connection (a window replaying it) keeps the file open."""
    import shutil

    from specviz_core.recording.writer import CHECKPOINT_EVERY

    path = tmp_path / "r.db"
    prompt = [3, 4, 5, 6, 3, 4, 5, 6, 3, 4]
    with Recording(path, create=True) as rec:
        run = make_session(tiny, "ar", prompt, 3 * CHECKPOINT_EVERY, recording=rec, info=info_for(prompt, "ar"))
        reader = sqlite3.connect(path)  # another process's view of the file, open all along
        reader.execute("SELECT COUNT(*) FROM cycles").fetchall()
        for _ in range(CHECKPOINT_EVERY + 3):
            run.step()
        assert Path(f"{path}-wal").exists()
        copy = tmp_path / "copy" / "r.db"
        copy.parent.mkdir()
        shutil.copy(path, copy)  # no -wal, no -shm: what a user's cp of the .db gives
        with Recording(copy, read_only=True) as got:
            (info,) = got.sessions()
            assert info.id == run.info.id and got.n_cycles(info.id) >= CHECKPOINT_EVERY
            assert info.n_cycles == got.n_cycles(info.id), "the counters travel with the cycles"
        run.finish("complete", "max_new_tokens")
        n = rec.n_cycles(run.info.id)
        shutil.copy(path, copy)
        with Recording(copy, read_only=True) as got:
            assert got.n_cycles(run.info.id) == n and got.session(run.info.id).status == "complete"
        reader.close()

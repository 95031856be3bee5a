"""Sessions recorded to SQLite (through sqlite-utils) and read back as the same records.

WAL mode, one transaction per cycle (a killed process loses at most the cycle in
flight), a schema version checked on open, masks stored bit-packed. A session
whose writer died without saying so (SIGKILL, power loss) is marked
``interrupted`` the next time the file is opened on the same machine.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil
import sqlite_utils

from specviz_core.errors import SpecVizError
from specviz_core.recording.rows import cycle_from_row, cycle_to_row, dumps
from specviz_core.records import CycleRecord, SessionInfo
from specviz_core.summary import CycleSummary, summarize, summary_from_row

SCHEMA_VERSION = 3
"""2 added ``cycles.summary`` (see :mod:`specviz_core.summary`), 3 ``sessions.attention``; older files are upgraded
in place when writable."""

_SESSION_JSON = ("params", "prompt_ids", "stats")


class Recording:
    """An open recording file: many sessions, each with its cycles."""

    busy_timeout_s = 10.0
    """How long a write waits for another writer's lock before it fails."""

    def __init__(self, path: str | os.PathLike, create: bool = False) -> None:
        self.path = Path(path)
        self._legacy = False
        if not self.path.exists():
            if not create:
                raise SpecVizError(f"no recording at {self.path}")
            self._check_writable_dir()
        elif self.path.is_dir():
            raise SpecVizError(f"{self.path} is a folder, not a recording file")
        self.read_only = self.path.exists() and not self._writable()
        if create and self.read_only:
            raise SpecVizError(f"cannot write the recording: {self.path} is read-only")
        try:
            if self.read_only:
                # Read-only media: SQLite could not create its -shm file, so open the file as immutable.
                conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
            else:
                conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout_s)
        except sqlite3.Error as e:
            raise SpecVizError(f"cannot open {self.path}: {e}") from None
        self.db = sqlite_utils.Database(conn)
        # Validate before anything writes to the file: a corrupt or foreign file stays untouched.
        try:
            tables = set(self.db.table_names())
        except sqlite3.DatabaseError:
            conn.close()
            raise SpecVizError(f"{self.path} is not a SpecViz recording (not an SQLite database, or corrupt)") from None
        if "specviz_meta" not in tables:
            if tables:
                conn.close()
                raise SpecVizError(f"{self.path} is an SQLite database but not a SpecViz recording")
            if not create:
                conn.close()
                raise SpecVizError(f"{self.path} is empty, not a SpecViz recording")
            self._create_schema()
            tables = set(self.db.table_names())
        if "specviz_meta" not in tables:
            conn.close()
            raise SpecVizError(f"{self.path} is an SQLite database but not a SpecViz recording")
        else:
            version = self._schema_version()
            if version > SCHEMA_VERSION:
                conn.close()
                raise SpecVizError(
                    f"{self.path} was written by a newer SpecViz (schema {version}; this version reads up to "
                    f"{SCHEMA_VERSION}): upgrade SpecViz to open it"
                )
            if not self.read_only:
                self._set_wal()
            if version < SCHEMA_VERSION:
                if self.read_only:
                    self._legacy = version < 2
                else:
                    self._upgrade(version)
        if not self.read_only:
            self._mark_dead_writers()

    # -- schema -----------------------------------------------------------------
    def _writable(self) -> bool:
        """The file and its folder can be written (SQLite needs the folder for its -wal and -shm files)."""
        parent = self.path.parent if str(self.path.parent) else Path(".")
        return os.access(self.path, os.W_OK) and os.access(parent, os.W_OK)

    def _check_writable_dir(self) -> None:
        parent = self.path.parent if str(self.path.parent) else Path(".")
        if not parent.is_dir():
            raise SpecVizError(f"cannot write the recording: folder {parent} does not exist")
        if not os.access(parent, os.W_OK):
            raise SpecVizError(f"cannot write the recording: folder {parent} is not writable")

    def _set_wal(self) -> None:
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.OperationalError:
            pass  # a read-only file still replays

    def _schema_version(self) -> int:
        try:
            row = self.db.execute("SELECT value FROM specviz_meta WHERE key = 'schema_version'").fetchone()
            return int(row[0])
        except (sqlite3.DatabaseError, TypeError, ValueError):
            raise SpecVizError(f"{self.path} is a damaged SpecViz recording (no schema version)") from None

    def _create_schema(self) -> None:
        conn = self.db.conn
        try:
            self._set_wal()
            # Take the write lock before looking again: another process may be creating this file right now.
            conn.execute("BEGIN IMMEDIATE")
            if self.db.table_names():
                conn.rollback()
                return
            with conn:
                self.db["sessions"].create(
                    {
                        "id": str, "created": str, "model": str, "tokenizer": str, "draft_model": str,
                        "method": str, "params": str, "prompt_ids": str, "prompt_text": str,
                        "chat_template": int, "temperature": float, "seed": int, "device": str, "dtype": str,
                        "attention": str, "max_new_tokens": int, "group_id": str, "status": str, "stop_reason": str,
                        "n_cycles": int, "n_forward": int, "n_tokens": int, "decode_ms": float,
                        "prefill_ms": float, "stats": str,
                        "writer_pid": int, "writer_started": float, "writer_host": str,
                    },
                    pk="id",
                )
                self.db["cycles"].create(
                    {
                        "session_id": str, "idx": int, "mode": str, "cache_len": int, "n_verified": int,
                        "n_accepted": int, "nodes": str, "verify_order": str, "mask": bytes, "positions": str,
                        "accepted_path": str, "bonus_token": int, "committed_ids": str, "kv_keep": str,
                        "target_topk": str, "state": str, "timings_ms": str, "summary": str,
                    },
                    pk=("session_id", "idx"),
                    foreign_keys=[("session_id", "sessions", "id")],
                )
                conn.execute("CREATE TABLE specviz_meta (key TEXT PRIMARY KEY, value TEXT)")
                conn.executemany("INSERT INTO specviz_meta VALUES (?, ?)",
                                 [("schema_version", str(SCHEMA_VERSION)), ("created_by", "specviz")])
        except sqlite3.OperationalError as e:
            raise SpecVizError(f"cannot write the recording at {self.path}: {e}") from None

    def _upgrade(self, version: int) -> None:
        """1 -> 2: add and fill ``cycles.summary``; 2 -> 3: add ``sessions.attention`` (empty: not recorded).
        A read-only file is read as it is."""
        try:
            with self.db.conn:
                if version < 2:
                    self.db.execute("ALTER TABLE cycles ADD COLUMN summary TEXT")
                    cur = self.db.execute("SELECT * FROM cycles")
                    cols = [d[0] for d in cur.description]
                    rows = [dict(zip(cols, r)) for r in cur.fetchall()]
                    self.db.conn.executemany(
                        "UPDATE cycles SET summary = ? WHERE session_id = ? AND idx = ?",
                        [(dumps(summarize(cycle_from_row(r)).to_json()), r["session_id"], r["idx"]) for r in rows])
                if version < 3:
                    self.db.execute("ALTER TABLE sessions ADD COLUMN attention TEXT")
                self.db.execute("UPDATE specviz_meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
        except sqlite3.OperationalError:
            self._legacy = version < 2

    def _mark_dead_writers(self) -> None:
        """A ``running`` session whose writer process is gone was killed: mark it ``interrupted``."""
        host = socket.gethostname()
        rows = self.db.execute(
            "SELECT id, writer_pid, writer_started FROM sessions WHERE status = 'running' AND writer_host = ?", [host]
        ).fetchall()
        dead = [sid for sid, pid, started in rows if not _process_alive(pid, started)]
        if dead:
            try:
                with self.db.conn:
                    self.db.conn.executemany(
                        "UPDATE sessions SET status = 'interrupted', stop_reason = 'writer stopped' WHERE id = ?",
                        [(sid,) for sid in dead],
                    )
            except sqlite3.OperationalError:
                pass  # read-only: report them as running

    def close(self) -> None:
        self.db.conn.close()

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------
    def sessions(self) -> list[SessionInfo]:
        """Every session, oldest first, without output ids (cheap)."""
        rows = self.db.execute("SELECT * FROM sessions ORDER BY created, rowid").fetchall()
        cols = [d[0] for d in self.db.execute("SELECT * FROM sessions LIMIT 0").description]
        return [self._session_from_row(dict(zip(cols, r)), with_output=False) for r in rows]

    def session(self, session_id: str | None = None, with_output: bool = True) -> SessionInfo:
        """One session (with its output ids unless ``with_output`` is False); the latest one if ``session_id`` is None."""
        if session_id is None:
            row = self.db.execute("SELECT id FROM sessions ORDER BY created DESC, rowid DESC LIMIT 1").fetchone()
            if row is None:
                raise SpecVizError(f"{self.path} holds no sessions")
            session_id = row[0]
        try:
            row = self.db["sessions"].get(session_id)
        except sqlite_utils.db.NotFoundError:
            raise SpecVizError(f"no session {session_id!r} in {self.path}") from None
        return self._session_from_row(row, with_output=with_output)

    def _session_from_row(self, row: dict[str, Any], with_output: bool) -> SessionInfo:
        output: tuple[int, ...] = ()
        if with_output:
            out: list[int] = []
            for (ids,) in self.db.execute(
                "SELECT committed_ids FROM cycles WHERE session_id = ? ORDER BY idx", [row["id"]]
            ):
                out.extend(json.loads(ids))
            output = tuple(out)
        kwargs = {f.name: row[f.name] for f in fields(SessionInfo) if f.name in row}
        for key in _SESSION_JSON:
            kwargs[key] = json.loads(row[key]) if row[key] else ({} if key != "prompt_ids" else [])
        kwargs["prompt_ids"] = tuple(kwargs["prompt_ids"])
        kwargs["chat_template"] = bool(row["chat_template"])
        kwargs["attention"] = row.get("attention") or ""
        kwargs["output_ids"] = output
        return SessionInfo(**kwargs)

    def n_cycles(self, session_id: str) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM cycles WHERE session_id = ?", [session_id]).fetchone()[0])

    def cycle(self, session_id: str, index: int) -> CycleRecord:
        cur = self.db.execute("SELECT * FROM cycles WHERE session_id = ? AND idx = ?", [session_id, index])
        row = cur.fetchone()
        if row is None:
            raise SpecVizError(f"session {session_id} has no cycle {index}")
        return cycle_from_row(dict(zip([d[0] for d in cur.description], row)))

    def cycles(self, session_id: str, start: int = 0, stop: int | None = None) -> Iterator[CycleRecord]:
        """Cycles ``start <= index < stop`` in order."""
        cur = self.db.execute(
            "SELECT * FROM cycles WHERE session_id = ? AND idx >= ? AND idx < ? ORDER BY idx",
            [session_id, start, stop if stop is not None else 2**62],
        )
        cols = [d[0] for d in cur.description]
        for row in cur:
            yield cycle_from_row(dict(zip(cols, row)))

    def cycle_summaries(self, session_id: str, start: int = 0) -> list[CycleSummary]:
        """Every cycle from ``start`` on, summarised (cheap: no trees, no masks)."""
        if self._legacy:  # a read-only version 1 file: summarise the full records
            return [summarize(r) for r in self.cycles(session_id, start)]
        # One JSON document per row: one parse instead of four.
        cur = self.db.execute(
            "SELECT idx, mode, n_verified, n_accepted, "
            "'[' || committed_ids || ',' || state || ',' || timings_ms || ',' || summary || ']' FROM cycles "
            "WHERE session_id = ? AND idx >= ? ORDER BY idx", [session_id, start])
        loads = json.loads
        return [summary_from_row(i, m, v, a, *loads(doc)) for i, m, v, a, doc in cur]

    # -- writing -----------------------------------------------------------------
    def new_session(self, info: SessionInfo) -> SessionWriter:
        return SessionWriter(self, info)


def _process_alive(pid: int | None, started: float | None) -> bool:
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        return started is None or abs(proc.create_time() - started) < 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def new_session_id() -> str:
    return uuid.uuid4().hex[:12]


class SessionWriter:
    """Appends one session's cycles, one transaction each; ``finish`` sets the final status."""

    def __init__(self, recording: Recording, info: SessionInfo) -> None:
        self.rec = recording
        if not info.created:
            info = replace(info, created=datetime.now(timezone.utc).isoformat(timespec="milliseconds"))
        self.info = info
        row = {f: getattr(info, f) for f in (x.name for x in fields(SessionInfo)) if f != "output_ids"}
        for key in _SESSION_JSON:
            row[key] = dumps(list(row[key]) if key == "prompt_ids" else row[key])
        row["chat_template"] = int(info.chat_template)
        me = psutil.Process()
        row.update(writer_pid=os.getpid(), writer_started=me.create_time(), writer_host=socket.gethostname())
        try:
            with recording.db.conn:
                recording.db["sessions"].insert(row)
        except sqlite3.Error as e:
            raise SpecVizError(f"cannot write the recording at {recording.path}: {e}") from None
        self.id = info.id
        self.finished = False

    def append(self, record: CycleRecord, summary: CycleSummary | None = None) -> CycleRecord:
        """Store one cycle (``summary``: its summary if the caller has it); returns it with
        ``timings_ms['record']`` filled in."""
        t0 = time.perf_counter()
        row = cycle_to_row(self.id, record, summary)
        record_ms = (time.perf_counter() - t0) * 1000.0
        timings = dict(record.timings_ms, record=record_ms)
        row["timings_ms"] = dumps(timings)
        decode_ms = sum(timings.values())
        conn = self.rec.db.conn
        # One transaction per cycle: the cycle row and the session's counters together.
        try:
            conn.execute(
                f"INSERT INTO cycles ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values())
            )
            conn.execute(
                "UPDATE sessions SET n_cycles = n_cycles + 1, n_forward = n_forward + 1, "
                "n_tokens = n_tokens + ?, decode_ms = decode_ms + ? WHERE id = ?",
                [len(record.committed_ids), decode_ms, self.id],
            )
            conn.commit()
        except sqlite3.Error as e:
            conn.rollback()
            raise SpecVizError(f"cannot write the recording at {self.rec.path}: {e}") from None
        except BaseException:  # Ctrl-C between the two statements: neither may be committed later by another write
            conn.rollback()
            raise
        return record.replace(timings_ms=timings)

    def set_prefill_ms(self, ms: float) -> None:
        try:
            with self.rec.db.conn:
                self.rec.db.conn.execute("UPDATE sessions SET prefill_ms = ? WHERE id = ?", [ms, self.id])
        except sqlite3.Error as e:
            raise SpecVizError(f"cannot write the recording at {self.rec.path}: {e}") from None

    def finish(self, status: str, stop_reason: str = "", stats: dict[str, Any] | None = None) -> None:
        if self.finished:
            return
        try:
            with self.rec.db.conn:
                self.rec.db.conn.execute(
                    "UPDATE sessions SET status = ?, stop_reason = ?, stats = ? WHERE id = ?",
                    [status, stop_reason, dumps(stats or {}), self.id],
                )
        except sqlite3.Error as e:
            raise SpecVizError(f"cannot write the recording at {self.rec.path}: {e}") from None
        self.finished = True

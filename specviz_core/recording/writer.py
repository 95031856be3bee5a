"""Appending one session to a recording: a row for the session, then one transaction per cycle."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from dataclasses import fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import psutil
import sqlite_utils

from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.cycle_state import EngineFacts
from specviz_core.errors import SpecVizError
from specviz_core.recording.rows import cycle_to_row, dumps
from specviz_core.records import CycleRecord, SessionInfo


class Target(Protocol):
    """What a writer needs of the recording it appends to (a :class:`~specviz_core.recording.store.Recording`)."""

    path: Path
    db: sqlite_utils.Database


SESSION_JSON = ("params", "prompt_ids", "stats")
#: Committed cycles reach the main file (out of the -wal file) this often, and at the end of every session: a copy
#: of the .db alone then holds them (SQLite's own checkpoint waits for about 4 MB of log, hundreds of cycles).
CHECKPOINT_EVERY = 16
"""Session columns stored as JSON text."""


class SessionWriter:
    """Appends one session's cycles, one transaction each; ``finish`` sets the final status."""

    def __init__(self, recording: Target, info: SessionInfo) -> None:
        self.rec = recording
        if not info.created:
            info = replace(info, created=datetime.now(timezone.utc).isoformat(timespec="milliseconds"))
        self.info = info
        row = {f: getattr(info, f) for f in (x.name for x in fields(SessionInfo)) if f != "output_ids"}
        for key in SESSION_JSON:
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
        self._since_checkpoint = 0

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
            conn.execute(  # a cycle served from the prefill's last row ran no forward of its own
                "UPDATE sessions SET n_cycles = n_cycles + 1, n_forward = n_forward + ?, "
                "n_tokens = n_tokens + ?, decode_ms = decode_ms + ? WHERE id = ?",
                [0 if EngineFacts.read(record.state).from_prefill else 1, len(record.committed_ids), decode_ms, self.id],
            )
            conn.commit()
        except sqlite3.Error as e:
            conn.rollback()
            raise SpecVizError(f"cannot write the recording at {self.rec.path}: {e}") from None
        except BaseException:  # Ctrl-C between the two statements: neither may be committed later by another write
            conn.rollback()
            raise
        self._since_checkpoint += 1
        if self._since_checkpoint >= CHECKPOINT_EVERY:
            self.checkpoint()
        return record.replace(timings_ms=timings)

    def checkpoint(self) -> None:
        """Copy the committed cycles from the -wal file into the main file, without waiting for readers (a window
        replaying the file keeps it open; pages a reader still needs are copied at the next checkpoint)."""
        self._since_checkpoint = 0
        try:
            self.rec.db.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:  # a busy file: the next checkpoint, or SQLite's own, copies them
            pass

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
        self.checkpoint()


def writer_alive(pid: int | None, started: float | None) -> bool:
    """Whether the process a session row names as its writer (``writer_pid``, ``writer_started``, stamped by
    :class:`SessionWriter`) is still running: the same pid with the same start time (a reused pid is another)."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        return started is None or abs(proc.create_time() - started) < 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False

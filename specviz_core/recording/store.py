"""Sessions recorded to SQLite (through sqlite-utils) and read back as the same records.

WAL mode, one transaction per cycle (a killed process loses at most the cycle in
flight), a schema version checked on open, masks stored bit-packed. A session
whose writer died without saying so (SIGKILL, power loss) is marked
``interrupted`` the next time the file is opened for writing on the same machine
(opened read-only, it is reported so).

Reading is defensive: every row is checked against the record contract (:mod:`.contract`), and a row that breaks
it, or that SQLite itself cannot read, raises :class:`~specviz_core.errors.DamagedCycle` (or
:class:`~specviz_core.errors.DamagedRecording` for a session or the whole file) naming the file, the session and
the cycle. Opened with ``read_only=True`` the file is never written, and no -wal or -shm file is left beside it.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

from specviz_core.analysis.cycle_summary import CycleSummary, damaged_summary, summarize, summary_from_row
from specviz_core.errors import DamagedCycle, DamagedRecording, SpecVizError
from specviz_core.recording.contract import RowError, int_list, loads, session_fields, session_label, summary_parts
from specviz_core.recording.rows import cycle_from_row
from specviz_core.recording.schema import SCHEMA_VERSION, create_schema, set_wal, upgrade
from specviz_core.recording.writer import SessionWriter, writer_alive
from specviz_core.records import MODES, CycleRecord, SessionInfo

__all__ = ["SCHEMA_VERSION", "Recording", "SessionWriter", "new_session_id"]


def _text(raw: bytes) -> str:
    """TEXT columns as str. Bytes that are not UTF-8 become lone surrogates, which the contract reports by column,
    instead of a decode error that stops the whole query."""
    return str(raw, "utf-8", "surrogateescape")


class Recording:
    """An open recording file: many sessions, each with its cycles."""

    busy_timeout_s = 10.0
    """How long a write waits for another writer's lock before it fails."""

    vocab_size: int | None = None
    """Token ids read back must be below this, when the reader knows it (the tokenizer's size)."""

    def __init__(self, path: str | os.PathLike, create: bool = False, read_only: bool = False) -> None:
        """Open ``path`` (``create``: make it if missing). ``read_only``: never write to it, not even to mark a dead
        writer's session interrupted (it is reported so) or to upgrade an older schema (it is read as it is)."""
        self.path = Path(path)
        self._legacy = False
        self._dead: set[str] = set()
        """Sessions still ``running`` whose writer is gone, reported ``interrupted`` (read-only: not written)."""
        if create and read_only:
            raise ValueError("a recording opened read-only cannot be created")
        if not self.path.exists():
            if not create:
                raise SpecVizError(f"no recording at {self.path}")
            self._check_writable_dir()
        elif self.path.is_dir():
            raise SpecVizError(f"{self.path} is a folder, not a recording file")
        self.read_only = read_only or (self.path.exists() and not self._writable())
        if create and self.read_only:
            raise SpecVizError(f"cannot write the recording: {self.path} is read-only")
        try:
            if self.read_only:
                conn = sqlite3.connect(self._read_only_uri(), uri=True)
            else:
                conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout_s)
        except sqlite3.Error as e:
            raise SpecVizError(f"cannot open {self.path}: {e}") from None
        conn.text_factory = _text
        self.db = sqlite_utils.Database(conn)
        try:
            self._open(create)
        except sqlite3.DatabaseError as e:
            conn.close()
            raise self._sqlite_error(e) from None
        except UnicodeDecodeError:
            conn.close()
            raise DamagedRecording(self.path, "its schema's text is damaged (a column name is not UTF-8)") from None
        except BaseException:
            conn.close()
            raise

    def _read_only_uri(self) -> str:
        uri = self.path.resolve().as_uri()
        wal, shm = Path(f"{self.path}-wal"), Path(f"{self.path}-shm")
        # A -wal file beside it: a writer is at work (or died), and the last cycles are in it: read through it.
        # Otherwise nothing is writing the file, and immutable reads it without creating -wal or -shm files (it is
        # also the only way on read-only media, where SQLite could not create them).
        if wal.exists() and (shm.exists() or self._writable()):
            return f"{uri}?mode=ro"
        return f"{uri}?mode=ro&immutable=1"

    def _open(self, create: bool) -> None:
        # Validate before anything writes to the file: a corrupt or foreign file stays untouched.
        try:
            tables = set(self.db.table_names())
        except sqlite3.DatabaseError as e:
            if "not a database" in str(e):
                raise DamagedRecording(self.path, "not an SQLite database", message=(
                    f"{self.path} is not a SpecViz recording (not an SQLite database, or its header is damaged)"))
            raise self._sqlite_error(e) from None  # truncated, say
        if "specviz_meta" not in tables:
            if not tables and create:
                self._create_schema()
                tables = set(self.db.table_names())
            elif not tables:
                raise DamagedRecording(self.path, "empty", message=f"{self.path} is empty, not a SpecViz recording")
        if "specviz_meta" not in tables:
            raise DamagedRecording(self.path, "no specviz_meta table",
                                   message=f"{self.path} is an SQLite database but not a SpecViz recording")
        version = self._schema_version()
        if version > SCHEMA_VERSION:
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
        set_wal(self.db)

    def _schema_version(self) -> int:
        try:
            row = self.db.execute("SELECT value FROM specviz_meta WHERE key = 'schema_version'").fetchone()
            return int(row[0])
        except (sqlite3.DatabaseError, TypeError, ValueError):
            raise DamagedRecording(self.path, "no schema version") from None

    def _create_schema(self) -> None:
        try:
            create_schema(self.db)
        except sqlite3.OperationalError as e:
            raise SpecVizError(f"cannot write the recording at {self.path}: {e}") from None

    def _upgrade(self, version: int) -> None:
        """Upgrade an older file in place; one that cannot be written (or is damaged) is read as it is."""
        try:
            upgrade(self.db, version)
        except sqlite3.DatabaseError:
            self._legacy = version < 2

    def _mark_dead_writers(self) -> None:
        """A ``running`` session whose writer process is gone was killed: mark it ``interrupted`` (read-only: only
        report it so)."""
        host = socket.gethostname()
        try:
            rows = self.db.execute(
                "SELECT id, writer_pid, writer_started FROM sessions WHERE status = 'running' AND writer_host = ?",
                [host]).fetchall()
        except sqlite3.DatabaseError:
            return  # a damaged sessions table: reading it says so
        self._dead = {sid for sid, pid, started in rows if not writer_alive(pid, started)}
        if self._dead and not self.read_only:
            try:
                with self.db.conn:
                    self.db.conn.executemany(
                        "UPDATE sessions SET status = 'interrupted', stop_reason = 'writer stopped' WHERE id = ?",
                        [(sid,) for sid in self._dead],
                    )
            except sqlite3.DatabaseError:
                pass  # cannot write after all: reported as interrupted all the same

    def close(self) -> None:
        self.db.conn.close()

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------
    def _sqlite_error(self, e: sqlite3.DatabaseError, session_id: str | None = None,
                      index: int | None = None) -> SpecVizError:
        """What SQLite could not read, said for the user: a damaged file, session or cycle, or a busy file."""
        msg = " ".join(str(e).split())  # one line: a malformed schema is quoted whole
        msg = msg if len(msg) <= 120 else msg[:117] + "..."
        if "locked" in msg or "busy" in msg:
            return SpecVizError(f"cannot read {self.path}: {msg} (another process is writing it; try again)")
        if index is not None and session_id is not None:
            return DamagedCycle(self.path, session_id, index, f"SQLite cannot read it ({msg})")
        return DamagedRecording(self.path, f"SQLite cannot read it ({msg})", session_id)

    @contextmanager
    def _reading(self, session_id: str | None = None, index: int | None = None) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as e:
            raise self._sqlite_error(e, session_id, index) from None
        except UnicodeDecodeError:  # a column name that is not UTF-8: a byte of the schema's text was damaged
            raise DamagedRecording(self.path, "its schema's text is damaged (a column name is not UTF-8)",
                                   session_id) from None

    def sessions(self, damaged: list[DamagedRecording] | None = None) -> list[SessionInfo]:
        """Every session, oldest first, without output ids (cheap). A damaged session raises, or with ``damaged``
        given, is added to it and left out."""
        with self._reading():
            cur = self.db.execute("SELECT rowid AS _rowid, * FROM sessions ORDER BY created, rowid")
            cols = [d[0] for d in cur.description]
            rows = cur.fetchall()
        out = []
        for r in rows:
            try:
                out.append(self._session_from_row(dict(zip(cols, r)), with_output=False))
            except DamagedRecording as e:
                if damaged is None:
                    raise
                damaged.append(e)
        return out

    def session(self, session_id: str | None = None, with_output: bool = True) -> SessionInfo:
        """One session (with its output ids unless ``with_output`` is False); the latest one if ``session_id`` is None."""
        with self._reading(session_id):
            if session_id is None:
                row = self.db.execute("SELECT id FROM sessions ORDER BY created DESC, rowid DESC LIMIT 1").fetchone()
                if row is None:
                    raise SpecVizError(f"{self.path} holds no sessions")
                session_id = row[0]
            cur = self.db.execute("SELECT rowid AS _rowid, * FROM sessions WHERE id = ?", [session_id])
            row = cur.fetchone()
        if row is None:
            raise SpecVizError(f"no session {session_id!r} in {self.path}")
        return self._session_from_row(dict(zip([d[0] for d in cur.description], row)), with_output=with_output)

    def _session_from_row(self, row: dict[str, Any], with_output: bool) -> SessionInfo:
        try:
            kwargs = session_fields(row)
        except RowError as e:
            raise DamagedRecording(self.path, str(e), session_label(row)) from None
        if kwargs["id"] in self._dead and kwargs["status"] == "running":
            kwargs.update(status="interrupted", stop_reason="writer stopped")
        return SessionInfo(**kwargs, output_ids=self._output_ids(kwargs["id"]) if with_output else ())

    def _output_ids(self, session_id: str) -> tuple[int, ...]:
        """Every token the session's cycles committed; a damaged cycle's are left out (reading it says why)."""
        out: list[int] = []
        for _, row in self._rows(session_id, "committed_ids"):
            if type(row) is tuple and type(row[1]) is str:
                try:
                    out.extend(int_list(loads(row[1]), "committed_ids"))
                except (ValueError, RecursionError):
                    pass
        return tuple(out)

    def n_cycles(self, session_id: str) -> int:
        with self._reading(session_id):
            return int(self.db.execute("SELECT COUNT(*) FROM cycles WHERE session_id = ?", [session_id]).fetchone()[0])

    def _rows(self, session_id: str, select: str, start: int = 0,
              stop: int | None = None) -> Iterator[tuple[int, tuple | str]]:
        """``(index, (idx, *select))`` for the cycles ``start <= index < stop`` in order, unchecked. Where SQLite
        cannot read a row, ``(index, why)`` instead, and the rows after it are read one at a time."""
        where = "FROM cycles WHERE session_id = ? AND idx >= ? AND idx < ?"
        args = [session_id, start, 2**62 if stop is None else stop]
        index = start
        try:
            for row in self.db.execute(f"SELECT idx, {select} {where} ORDER BY idx", args):
                yield index, row
                index += 1
            return
        except sqlite3.DatabaseError as e:
            err = self._sqlite_error(e, session_id, index)
        if not isinstance(err, DamagedCycle):
            raise err
        try:  # the primary key's index may still say which rows there are
            args[1] = index
            keys = [k for (k,) in self.db.execute(f"SELECT idx {where} ORDER BY idx", args) if type(k) is int]
        except sqlite3.DatabaseError:
            keys = []
        if not keys or keys[0] != index:
            yield index, err.reason
        for k in keys:
            try:
                row = self.db.execute(f"SELECT idx, {select} FROM cycles WHERE session_id = ? AND idx = ?",
                                      [session_id, k]).fetchone()
            except sqlite3.DatabaseError as e:
                err = self._sqlite_error(e, session_id, k)
                if not isinstance(err, DamagedCycle):
                    raise err from None
                row = err.reason
            if row is not None:
                yield k, row

    def cycle_rows(self, session_id: str) -> Iterator[tuple[int, dict[str, Any] | str]]:
        """Every cycle row of a session as its columns, unchecked, in order; where SQLite cannot read a row, why."""
        cols = self._cycle_columns()
        for index, row in self._rows(session_id, "*"):
            yield index, row if type(row) is str else dict(zip(cols, row[1:]))

    def _cycle_columns(self) -> list[str]:
        with self._reading():
            return [d[0] for d in self.db.execute("SELECT * FROM cycles LIMIT 0").description]

    def cycle(self, session_id: str, index: int) -> CycleRecord:
        """Cycle ``index``, checked against the record contract (:class:`DamagedCycle` if it breaks it)."""
        with self._reading(session_id, index):
            cur = self.db.execute("SELECT * FROM cycles WHERE session_id = ? AND idx = ?", [session_id, index])
            row = cur.fetchone()
        if row is None:
            raise SpecVizError(f"session {session_id} has no cycle {index}")
        try:
            return cycle_from_row(dict(zip([d[0] for d in cur.description], row)), index, self.vocab_size)
        except RowError as e:
            raise DamagedCycle(self.path, session_id, index, str(e)) from None

    def cycles(self, session_id: str, start: int = 0, stop: int | None = None,
               damaged: list[DamagedCycle] | None = None) -> Iterator[CycleRecord]:
        """Cycles ``start <= index < stop`` in order. A damaged cycle raises :class:`DamagedCycle`, or with
        ``damaged`` given, is added to it and skipped."""
        cols = self._cycle_columns()
        for index, row in self._rows(session_id, "*", start, stop):
            try:
                if type(row) is str:
                    raise RowError(row)
                record = cycle_from_row(dict(zip(cols, row[1:])), index, self.vocab_size)
            except RowError as e:
                err = DamagedCycle(self.path, session_id, index, str(e))
                if damaged is None:
                    raise err from None
                damaged.append(err)
                continue
            yield record

    def cycle_summaries(self, session_id: str, start: int = 0) -> list[CycleSummary]:
        """Every cycle from ``start`` on, summarised (cheap: no trees, no masks). A damaged cycle is in its place as
        a summary saying why (:func:`~specviz_core.analysis.cycle_summary.damaged_summary`); one whose stored summary alone is
        damaged is summarised again from its record."""
        # One JSON document per row: one parse instead of four. A version 1 file has no summaries to read.
        doc = "NULL" if self._legacy else "'[' || committed_ids || ',' || state || ',' || timings_ms || ',' || summary || ']'"
        out: list[CycleSummary] = []
        for index, row in self._rows(session_id, f"mode, n_verified, n_accepted, {doc}, cache_len", start):
            while start + len(out) < index:
                out.append(damaged_summary(start + len(out), "missing from the recording"))
            if type(row) is tuple and row[0] == index and row[1] in MODES and type(row[2]) is int \
                    and type(row[3]) is int and 0 <= row[3] < row[2]:
                try:
                    out.append(summary_from_row(index, row[1], row[2], row[3], *summary_parts(loads(row[4])),
                                                cache_len=row[5]))
                    continue
                except (RowError, ValueError, TypeError, RecursionError):
                    pass
            out.append(self._summary_again(session_id, index, row))
        return out

    def _summary_again(self, session_id: str, index: int, row: tuple | str) -> CycleSummary:
        """A cycle whose summary could not be read: summarised from its record, or a damaged summary saying why."""
        if type(row) is str:
            return damaged_summary(index, row)
        try:
            return summarize(self.cycle(session_id, index))
        except DamagedCycle as e:
            return damaged_summary(index, e.reason)
        except SpecVizError as e:
            return damaged_summary(index, str(e))

    # -- writing -----------------------------------------------------------------
    def new_session(self, info: SessionInfo) -> SessionWriter:
        if self.read_only:
            raise SpecVizError(f"cannot write the recording: {self.path} is open read-only")
        return SessionWriter(self, info)


def new_session_id() -> str:
    return uuid.uuid4().hex[:12]

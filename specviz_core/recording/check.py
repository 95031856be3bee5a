"""``specviz check``: the integrity of a recording file, judged without changing it.

SQLite's own integrity check, then the record contract on every session and every cycle (what reading them
checks), then what only a whole session shows: the stored summary agrees with its cycle, each cycle starts where
the last one left the KV cache, the session's counters match its cycles.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from specviz_core.analysis.cycle_summary import summarize
from specviz_core.cycle_state import EngineFacts
from specviz_core.errors import DamagedRecording, SpecVizError
from specviz_core.recording.contract import RowError, parse, summary_parts
from specviz_core.recording.rows import cycle_from_row
from specviz_core.recording.store import Recording
from specviz_core.records import CycleRecord, SessionInfo

#: Lines of SQLite's integrity report kept (it can list thousands of broken pages).
MAX_SQLITE_LINES = 20


@dataclass
class SessionCheck:
    """One session: how many cycles were read back whole, and what is wrong with the others."""

    id: str
    info: SessionInfo | None = None
    """None when the session's own row is damaged."""
    n_cycles: int = 0
    """Cycle rows found."""
    damaged: list[tuple[int | None, str]] = field(default_factory=list)
    """(cycle index, or None for the session itself; what is wrong)."""

    @property
    def damaged_cycles(self) -> list[int]:
        return sorted({i for i, _ in self.damaged if i is not None})


@dataclass
class FileCheck:
    """The verdict on a file: SQLite's report, and every session's."""

    path: Path
    quick: bool = False
    """Only SQLite's quick check (no index consistency) was run."""
    sqlite: list[str] = field(default_factory=list)
    """SQLite's integrity report: ``["ok"]`` for a sound file."""
    error: str = ""
    """Why the file could not be read as a recording at all ('' when it could)."""
    sessions: list[SessionCheck] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.error and self.sqlite == ["ok"] and not any(s.damaged for s in self.sessions)


def check_recording(path: str | os.PathLike, session_id: str | None = None, quick: bool = False) -> FileCheck:
    """Check ``path`` (one session with ``session_id``), opened read-only. Raises :class:`SpecVizError` only for
    what the user can fix in the command (no such file, a folder, no such session); damage is in the result."""
    report = FileCheck(Path(path), quick)
    try:
        rec = Recording(path, read_only=True)
    except DamagedRecording as e:
        report.error = str(e)
        return report
    with rec:
        conn = rec.db.conn
        conn.execute("BEGIN")  # one snapshot, even while another process records
        try:
            try:
                pragma = "quick_check" if quick else "integrity_check"
                report.sqlite = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}({MAX_SQLITE_LINES})")]
            except sqlite3.DatabaseError as e:
                report.sqlite = [str(e)]
            if session_id is not None:
                report.sessions.append(_check_session(rec, session_id))
            else:
                try:
                    damaged: list[DamagedRecording] = []
                    infos = rec.sessions(damaged=damaged)
                except DamagedRecording as e:
                    report.error = str(e)
                    return report
                report.sessions += [SessionCheck(str(d.session_id), damaged=[(None, d.reason)]) for d in damaged]
                report.sessions += [_check_session(rec, info.id, info) for info in infos]
        finally:
            conn.rollback()
    return report


def _check_session(rec: Recording, session_id: str, info: SessionInfo | None = None) -> SessionCheck:
    out = SessionCheck(session_id)
    try:
        out.info = info or rec.session(session_id, with_output=False)
    except DamagedRecording as e:
        out.damaged.append((None, e.reason))
        return out
    except SpecVizError:
        raise  # no such session: the command's mistake
    info = out.info
    prev: CycleRecord | None = None
    n_tokens = n_forward = 0
    try:
        for index, row in rec.cycle_rows(session_id):
            out.n_cycles += 1
            record = _check_cycle(out, index, row, rec.vocab_size)
            if record is None:
                prev = None
                continue
            n_tokens += len(record.committed_ids)
            n_forward += not EngineFacts.read(record.state).from_prefill
            if prev is not None and prev.index == index - 1 and record.cache_len != prev.cache_len + len(prev.kv_keep):
                out.damaged.append((index, f"cache_len {record.cache_len}, but cycle {index - 1} left "
                                           f"{prev.cache_len + len(prev.kv_keep)} positions in the KV cache"))
            prev = record
    except DamagedRecording as e:
        out.damaged.append((None, e.reason))
        return out
    for name, said, found in (("n_cycles", info.n_cycles, out.n_cycles), ("n_forward", info.n_forward, n_forward),
                              ("n_tokens", info.n_tokens, n_tokens)):
        if said != found and not out.damaged_cycles:
            out.damaged.append((None, f"{name} says {said}, but its cycles make {found}"))
    return out


def _check_cycle(out: SessionCheck, index: int, row: dict | str, vocab_size: int | None) -> CycleRecord | None:
    """The record in ``row``, or None with what is wrong added to ``out``."""
    if isinstance(row, str):
        out.damaged.append((index, row))
        return None
    try:
        record = cycle_from_row(row, index, vocab_size)
    except RowError as e:
        out.damaged.append((index, str(e)))
        return None
    if "summary" not in row:  # a version 1 file, read as it is: summaries come from the records
        return record
    try:
        stored = summary_parts([parse(row, "committed_ids", list), parse(row, "state", dict),
                                parse(row, "timings_ms", dict), parse(row, "summary", dict)])[3]
    except RowError as e:
        out.damaged.append((index, f"summary: {str(e).removeprefix('summary: ')} (the viewer summarises the cycle "
                                   "again)"))
        return record
    fresh = summarize(record).to_json()
    if "rows" not in stored:  # recorded before the accepted rows were stored
        fresh.pop("rows")
    if stored != fresh:
        out.damaged.append((index, "summary: disagrees with the cycle (the viewer shows the stored one)"))
    return record

"""The recording file's tables: created once, upgraded in place from older versions."""

from __future__ import annotations

import sqlite3
from typing import Any

import sqlite_utils

from specviz_core.analysis.cycle_summary import summarize
from specviz_core.recording.contract import RowError
from specviz_core.recording.rows import cycle_from_row, dumps

SCHEMA_VERSION = 4
"""2 added ``cycles.summary`` (see :mod:`specviz_core.analysis.cycle_summary`), 3 ``sessions.attention``, 4 ``sessions.parent_session``
and ``sessions.fork_cycle`` (forks); older files are upgraded in place when writable."""


def set_wal(db: sqlite_utils.Database) -> None:
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.DatabaseError:
        pass  # a read-only file still replays; a damaged one says so when read


def create_schema(db: sqlite_utils.Database) -> None:
    """The tables of an empty file (nothing, if another process created them first)."""
    conn = db.conn
    set_wal(db)
    # Take the write lock before looking again: another process may be creating this file right now.
    conn.execute("BEGIN IMMEDIATE")
    if db.table_names():
        conn.rollback()
        return
    with conn:
        db["sessions"].create(
            {
                "id": str, "created": str, "model": str, "tokenizer": str, "draft_model": str,
                "method": str, "params": str, "prompt_ids": str, "prompt_text": str,
                "chat_template": int, "temperature": float, "seed": int, "device": str, "dtype": str,
                "attention": str, "max_new_tokens": int, "group_id": str, "status": str, "stop_reason": str,
                "n_cycles": int, "n_forward": int, "n_tokens": int, "decode_ms": float,
                "prefill_ms": float, "stats": str, "parent_session": str, "fork_cycle": int,
                "writer_pid": int, "writer_started": float, "writer_host": str,
            },
            pk="id",
        )
        db["cycles"].create(
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


def upgrade(db: sqlite_utils.Database, version: int) -> None:
    """1 -> 2: add and fill ``cycles.summary``; 2 -> 3: add ``sessions.attention`` (empty: not recorded); 3 -> 4: add
    ``sessions.parent_session`` and ``sessions.fork_cycle`` (NULL: not a fork). Raises ``sqlite3.DatabaseError`` (nothing changed) where the file cannot be written."""
    with db.conn:
        if version < 2:
            db.execute("ALTER TABLE cycles ADD COLUMN summary TEXT")
            cur = db.execute("SELECT * FROM cycles")
            cols = [d[0] for d in cur.description]
            rows = [dict(zip(cols, r)) for r in cur.fetchall()]
            db.conn.executemany("UPDATE cycles SET summary = ? WHERE session_id = ? AND idx = ?",
                                [(_stored_summary(r), r["session_id"], r["idx"]) for r in rows])
        have = {c.name for c in db["sessions"].columns}
        for col, kind in (("attention", "TEXT"), ("parent_session", "TEXT"), ("fork_cycle", "INTEGER")):
            if col not in have:
                db.execute(f"ALTER TABLE sessions ADD COLUMN {col} {kind}")
        db.execute("UPDATE specviz_meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])


def _stored_summary(row: dict[str, Any]) -> str | None:
    """The summary an upgrade stores for an old row; none for a damaged row (reading it says why)."""
    try:
        return dumps(summarize(cycle_from_row(row)).to_json())
    except RowError:
        return None

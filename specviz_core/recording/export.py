"""``specviz export``: a session as JSON lines, the stable public format (docs/record-format.md)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import IO, Any

import numpy as np

from specviz_core.analysis.metrics import SessionMetrics, session_metrics
from specviz_core.analysis.stop_cause import stop_cause
from specviz_core.errors import DamagedCycle
from specviz_core.recording.store import Recording
from specviz_core.records import CycleRecord, SessionInfo

FORMAT_VERSION = 1


def session_line(info: SessionInfo, metrics: SessionMetrics | None = None) -> dict[str, Any]:
    d = asdict(info)
    d["prompt_ids"] = list(info.prompt_ids)
    d["output_ids"] = list(info.output_ids)
    d["mean_accepted"] = info.tokens_per_forward  # the export's name for it since format 1: kept for its readers
    d["tokens_per_s"] = info.tokens_per_s
    for key in ("parent_session", "fork_cycle"):  # a fork's only: other sessions' lines are as before forks existed
        if d[key] is None:
            del d[key]
    if metrics is not None:
        d["metrics"] = metrics.to_json()
    return {"type": "session", "format_version": FORMAT_VERSION, **d}


def cycle_line(session_id: str, c: CycleRecord) -> dict[str, Any]:
    return {
        "type": "cycle",
        "session": session_id,
        "index": c.index,
        "mode": c.mode,
        "cache_len": c.cache_len,
        "nodes": [n.as_dict() for n in c.nodes],
        "verify_order": list(c.verify_order),
        "mask": [r.tobytes().decode("ascii") for r in c.mask.view(np.uint8) + ord("0")],  # '0'/'1' per column
        "positions": list(c.positions),
        "accepted_path": list(c.accepted_path),
        "bonus_token": c.bonus_token,
        "committed_ids": list(c.committed_ids),
        "kv_keep": list(c.kv_keep),
        "target_topk": [[list(tp) for tp in row] for row in c.target_topk],
        "state": c.state,
        "timings_ms": c.timings_ms,
        "stop_cause": stop_cause(c).to_json(),  # derived from the fields above: why the cycle stopped, its headroom
    }


def export_jsonl(rec: Recording, session_id: str | None, out: IO[str],
                 damaged: list[DamagedCycle] | None = None) -> int:
    """Write one session line then one line per cycle; returns the number of cycles written.

    A damaged cycle raises :class:`~specviz_core.errors.DamagedCycle` (after the lines before it), or with
    ``damaged`` given, is added to it and skipped: its line is missing, and the session's ``output_ids`` leave out
    its tokens where they cannot be read. Everything is read in one transaction: a session being recorded meanwhile
    is exported as one snapshot (its counts match its cycle lines)."""
    conn = rec.db.conn
    in_tx = conn.in_transaction
    if not in_tx:
        conn.execute("BEGIN")
    try:
        info = rec.session(session_id)
        metrics = session_metrics(rec.cycle_summaries(info.id))
        out.write(json.dumps(session_line(info, metrics), allow_nan=False) + "\n")
        n = 0
        for c in rec.cycles(info.id, damaged=damaged):
            out.write(json.dumps(cycle_line(info.id, c), allow_nan=False) + "\n")
            n += 1
    finally:
        if not in_tx:
            conn.rollback()  # nothing was written: end the read transaction
    return n

"""``specviz check --salvage OUT``: every readable session and cycle of a damaged recording, into a new file.

A recording cut short (a copy that stopped, a full disk) or with damaged pages is often unreadable as a whole:
SQLite refuses the file at its first bad page, so every cycle in it is lost to the viewer. But each row is stored
whole inside its table's leaf pages (or in a chain of overflow pages), in the SQLite file format
(https://www.sqlite.org/fileformat.html). This module reads the file page by page, without SQLite: the tables'
columns from the schema on page 1, then every table leaf page that is still there, each cell decoded into a row.
A row is a cycle when it reads as one (a session id, an index and a mode, in that order), a session when it reads
as a session row; each is checked against the record contract as ``check`` checks it, and written to a new
recording with what could not be read said by session and cycle. Nothing of the damaged file is changed.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specviz_core.errors import SpecVizError
from specviz_core.records import MODES

HEADER = b"SQLite format 3\x00"
LEAF_TABLE = 0x0D


@dataclass
class Salvaged:
    """What a salvage kept and what it could not."""

    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Session rows by id, as stored (column -> value)."""
    cycles: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    """Cycle rows by (session id, index)."""
    pages: int = 0
    """Pages in the damaged file (whole ones)."""
    unreadable: int = 0
    """Cells that could not be decoded (their bytes, or an overflow page, are gone)."""


def read_varint(buf: bytes, i: int) -> tuple[int, int]:
    """SQLite's big-endian variable-length integer at ``buf[i]``: (value, the offset after it)."""
    v = 0
    for k in range(9):
        b = buf[i + k]
        if k == 8:
            return (v << 8) | b, i + 9
        v = (v << 7) | (b & 0x7F)
        if b < 0x80:
            return v, i + k + 1
    raise IndexError(i)


def decode_record(payload: bytes) -> list[Any]:
    """A record's values: NULL, integers, floats, text and blobs, by their serial types."""
    n, i = read_varint(payload, 0)
    types = []
    while i < n:
        t, i = read_varint(payload, i)
        types.append(t)
    values: list[Any] = []
    p = n
    for t in types:
        if t == 0:
            values.append(None)
        elif 1 <= t <= 6:
            size = (1, 2, 3, 4, 6, 8)[t - 1]
            values.append(int.from_bytes(payload[p:p + size], "big", signed=True))
            p += size
        elif t == 7:
            values.append(struct.unpack(">d", payload[p:p + 8])[0])
            p += 8
        elif t in (8, 9):
            values.append(t - 8)
        elif t >= 12:
            size = (t - 12) // 2 if t % 2 == 0 else (t - 13) // 2
            raw = payload[p:p + size]
            if len(raw) < size:
                raise IndexError("a value runs past the record")
            values.append(bytes(raw) if t % 2 == 0 else raw.decode("utf-8"))
            p += size
        else:
            raise ValueError(f"serial type {t}")
    return values


class PageFile:
    """A SQLite database file read as pages, however much of it is left."""

    def __init__(self, data: bytes) -> None:
        if not data.startswith(HEADER) or len(data) < 100:
            raise SpecVizError("not a SQLite file (its header is gone): nothing can be salvaged")
        size = struct.unpack(">H", data[16:18])[0]
        self.page_size = 65536 if size == 1 else size
        self.usable = self.page_size - data[20]
        self.data = data
        self.n_pages = len(data) // self.page_size

    def page(self, number: int) -> bytes | None:
        """Page ``number`` (from 1), or None where the file no longer has it whole."""
        if not 1 <= number <= self.n_pages:
            return None
        return self.data[(number - 1) * self.page_size: number * self.page_size]

    def leaf_cells(self, number: int) -> Iterator[bytes | None]:
        """The payloads of a table leaf page's cells (None for a cell whose overflow chain is gone)."""
        page = self.page(number)
        if page is None:
            return
        head = 100 if number == 1 else 0
        if page[head] != LEAF_TABLE:
            return
        n_cells = struct.unpack(">H", page[head + 3:head + 5])[0]
        for k in range(n_cells):
            try:
                at = struct.unpack(">H", page[head + 8 + 2 * k: head + 10 + 2 * k])[0]
                yield self._payload(page, at)
            except (IndexError, struct.error, ValueError):
                yield None

    def _payload(self, page: bytes, at: int) -> bytes | None:
        total, i = read_varint(page, at)
        _, i = read_varint(page, i)  # the rowid
        u = self.usable
        x = u - 35
        if total <= x:
            return page[i:i + total]
        m = ((u - 12) * 32 // 255) - 23
        k = m + (total - m) % (u - 4)
        local = k if k <= x else m
        out = bytearray(page[i:i + local])
        nxt = struct.unpack(">I", page[i + local:i + local + 4])[0]
        seen = set()
        while len(out) < total:
            over = self.page(nxt)
            if over is None or nxt in seen:
                return None  # the chain runs into the part of the file that is gone
            seen.add(nxt)
            out += over[4:u][: total - len(out)]
            nxt = struct.unpack(">I", over[:4])[0]
        return bytes(out)


def table_columns(pf: PageFile) -> dict[str, list[str]]:
    """Each table's column names in order, from the ``CREATE TABLE`` statements (and ``ALTER TABLE``'s added columns,
    which SQLite writes into them) stored on page 1."""
    out: dict[str, list[str]] = {}
    for payload in pf.leaf_cells(1):
        if payload is None:
            continue
        try:
            kind, name, _, _, sql = decode_record(payload)[:5]
        except (IndexError, ValueError, UnicodeDecodeError):
            continue
        if kind == "table" and isinstance(sql, str):
            out[str(name)] = _columns(sql)
    return out


def _columns(sql: str) -> list[str]:
    body = sql[sql.index("(") + 1: sql.rindex(")")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    names = []
    for part in parts:
        part = part.strip()
        if not part or re.match(r"(PRIMARY|FOREIGN|UNIQUE|CHECK|CONSTRAINT)\b", part, re.I):
            continue
        m = re.match(r'[\["`]?([^\]"`\s]+)', part)
        if m:
            names.append(m.group(1))
    return names


def salvage(path: Path) -> Salvaged:
    """Every session and cycle row still readable in ``path`` (however damaged), by scanning its pages."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise SpecVizError(f"cannot read {path}: {e.strerror}") from None
    pf = PageFile(data)
    cols = table_columns(pf)
    if "sessions" not in cols or "cycles" not in cols:
        raise SpecVizError(f"{path}: its schema (page 1) is gone or it is not a SpecViz recording: nothing can be "
                           "salvaged")
    out = Salvaged(pages=pf.n_pages)
    for number in range(2, pf.n_pages + 1):
        for payload in pf.leaf_cells(number):
            if payload is None:
                out.unreadable += 1
                continue
            try:
                values = decode_record(payload)
            except (IndexError, ValueError, UnicodeDecodeError):
                out.unreadable += 1
                continue
            _classify(values, cols, out)
    return out


def _classify(values: list[Any], cols: dict[str, list[str]], out: Salvaged) -> None:
    """Keep a row as a cycle or a session by its shape (a leaf's table is known only from the tree above it, which
    may be gone); anything else (the metadata table, an index) is not ours to keep."""
    c, s = cols["cycles"], cols["sessions"]
    if len(values) >= 3 and len(values) <= len(c) and isinstance(values[0], str) and isinstance(values[1], int) \
            and values[2] in MODES:
        row = dict(zip(c, values))
        out.cycles.setdefault((row["session_id"], row["idx"]), row)
    elif 2 <= len(values) <= len(s) and isinstance(values[0], str) and isinstance(values[1], str) \
            and re.match(r"\d{4}-\d\d-\d\dT", values[1]):
        row = dict(zip(s, values))
        out.sessions.setdefault(row["id"], row)


def write_salvaged(found: Salvaged, out: Path) -> list[str]:
    """Write the readable sessions and the cycles that pass the record contract to a new recording at ``out``;
    returns one line per session saying what was kept."""
    from specviz_core.cycle_state import EngineFacts
    from specviz_core.recording.contract import RowError
    from specviz_core.recording.rows import cycle_from_row
    from specviz_core.recording.store import Recording

    lines = []
    with Recording(out, create=True) as rec:
        have_s = {c.name for c in rec.db["sessions"].columns}
        have_c = {c.name for c in rec.db["cycles"].columns}
        for sid, row in sorted(found.sessions.items(), key=lambda kv: str(kv[1].get("created"))):
            row = {k: v for k, v in row.items() if k in have_s}
            if row.get("status") == "running":  # its writer is gone with the damaged file
                row["status"], row["stop_reason"] = "interrupted", "salvaged from a damaged recording"
            cycles = sorted((k[1], r) for k, r in found.cycles.items() if k[0] == sid)
            kept, bad, records = [], [], []
            for idx, crow in cycles:
                try:
                    records.append(cycle_from_row(crow, idx))
                except (RowError, SpecVizError, KeyError, TypeError, ValueError):
                    bad.append(idx)
                    continue
                kept.append({k: v for k, v in crow.items() if k in have_c})
            recorded = row.get("n_cycles")
            missing = sorted(set(range(int(recorded))) - {int(r["idx"]) for r in kept}) \
                if isinstance(recorded, int) else []
            if missing or bad:
                row["status"] = "interrupted"
                row["stop_reason"] = (f"salvaged from a damaged recording: cycles {_ranges(sorted(missing + bad))} "
                                      "lost")
            # The session's counters say what the new file holds (a session that kept no cycle lists no tokens).
            row.update(n_cycles=len(records), n_tokens=sum(len(r.committed_ids) for r in records),
                       n_forward=sum(not EngineFacts.read(r.state).from_prefill for r in records),
                       decode_ms=float(sum(sum(r.timings_ms.values()) for r in records)))
            with rec.db.conn:
                rec.db["sessions"].insert(row)
                if kept:
                    rec.db["cycles"].insert_all(kept)
            line = f"session {sid} ({row.get('method', '?')}): {len(kept)} cycles kept"
            if missing:
                line += f", {len(missing)} lost ({_ranges(missing)})"
            if bad:
                line += f", {len(bad)} unreadable ({_ranges(bad)})"
            lines.append(line)
        orphans = {k[0] for k in found.cycles} - set(found.sessions)
        for sid in sorted(orphans):
            n = sum(1 for k in found.cycles if k[0] == sid)
            lines.append(f"session {sid}: its own row is gone, so its {n} readable cycles cannot be replayed")
    return lines


def _ranges(xs: list[int]) -> str:
    out, start = [], None
    for i, x in enumerate(xs):
        if start is None:
            start = x
        if i + 1 == len(xs) or xs[i + 1] != x + 1:
            out.append(f"{start}" if start == x else f"{start}-{x}")
            start = None
    return ", ".join(out[:6]) + (", ..." if len(out) > 6 else "")

"""The record contract (docs/record-format.md), checked on every row read back from a recording.

A recording is read defensively: a row that breaks the contract (bad JSON, a missing key, a wrong type, text that
is not UTF-8, a node source nobody writes, a mask that does not match the tree, a path that leaves it...) raises
:class:`RowError` naming the column and what is wrong. The store adds the file, the session and the cycle. The
checks cost a few tens of microseconds per cycle, a small part of decoding the row.
"""

from __future__ import annotations

import json
import math
from itertools import chain
from typing import Any

from specviz_core.analysis.stop_cause import CAUSES
from specviz_core.records import FATES, SOURCES, STATUSES

#: Token ids, positions and counts fit in 32 bits; anything larger is damage, not data.
MAX_INT = 2**31 - 1

_SOURCES = frozenset(SOURCES)
_NUMBER = (int, float)


def _not_finite(name: str) -> float:
    raise ValueError(f"{name} is not a number a recording holds")


loads = json.JSONDecoder(parse_constant=_not_finite).decode
"""``json.loads`` refusing NaN and Infinity (which ``json.dumps`` writes, and the JSON export cannot hold)."""


class RowError(ValueError):
    """A row breaks the record contract. The message says which column and what is wrong."""


def show(value: Any, limit: int = 40) -> str:
    """A value from a damaged row, short and printable."""
    r = ascii(value) if isinstance(value, str) else repr(value)
    return r if len(r) <= limit else r[: limit - 3] + "..."


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", bytes: "bytes", type(None): "null"}.get(type(value), type(value).__name__)


def utf8(s: str, col: str) -> str:
    """``s`` decoded from valid UTF-8 (the store reads text with ``surrogateescape``: bad bytes become surrogates)."""
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise RowError(f"{col}: not valid UTF-8") from None
    return s


# -- columns ------------------------------------------------------------------------------------------------------
def text(row: dict[str, Any], col: str, optional: bool = False) -> str | None:
    v = row.get(col)
    if v is None and optional:
        return None
    if type(v) is not str:
        raise RowError(f"{col}: {_kind(v)}, not text")
    return utf8(v, col)


def integer(row: dict[str, Any], col: str, lo: int = 0, hi: int = MAX_INT) -> int:
    v = row.get(col)
    if type(v) is not int:
        raise RowError(f"{col}: {show(v)} is not a whole number")
    if not lo <= v <= hi:
        raise RowError(f"{col}: {v} is out of range ({lo} to {hi})")
    return v


def number(row: dict[str, Any], col: str, lo: float = 0.0) -> float:
    v = row.get(col)
    if type(v) not in _NUMBER or not math.isfinite(v) or v < lo:
        raise RowError(f"{col}: {show(v)} is not a finite number from {lo:g}")
    return float(v)


def choice(row: dict[str, Any], col: str, allowed: tuple[str, ...]) -> str:
    v = row.get(col)
    if v not in allowed or type(v) is not str:
        raise RowError(f"{col}: {show(v)} is not one of {', '.join(allowed)}")
    return v


def parse(row: dict[str, Any], col: str, kind: type, empty: Any = None) -> Any:
    """A JSON column holding a ``kind`` (list or dict); NULL or '' is ``empty`` where that is allowed."""
    s = row.get(col)
    if (s is None or s == "") and empty is not None:
        return empty
    if type(s) is not str:
        raise RowError(f"{col}: {_kind(s)}, not JSON text")
    if not s.isascii():
        utf8(s, col)
    try:
        v = loads(s)
    except (ValueError, RecursionError) as e:
        raise RowError(f"{col}: not valid JSON ({str(e).split(':')[0]})") from None
    if type(v) is not kind:
        raise RowError(f"{col}: {_kind(v)}, not {'a list' if kind is list else 'an object'}")
    return v


def int_list(v: Any, col: str, lo: int = 0, hi: int = MAX_INT) -> list[int]:
    """``v`` is a list of whole numbers from ``lo`` to ``hi``."""
    if type(v) is not list:
        raise RowError(f"{col}: {_kind(v)}, not a list of whole numbers")
    if v and (set(map(type, v)) != {int} or min(v) < lo or max(v) > hi):
        for i, x in enumerate(v):
            if type(x) is not int:
                raise RowError(f"{col}: item {i} is not a whole number ({show(x)})")
            if not lo <= x <= hi:
                raise RowError(f"{col}: item {i} is {x}, out of range ({lo} to {hi})")
    return v


def json_ints(row: dict[str, Any], col: str, lo: int = 0, hi: int = MAX_INT) -> list[int]:
    return int_list(parse(row, col, list), col, lo, hi)


# -- a session ----------------------------------------------------------------------------------------------------
_SESSION_TEXT = ("created", "model", "tokenizer", "method", "prompt_text", "device", "dtype")
_SESSION_OPTIONAL_TEXT = ("draft_model", "attention", "group_id", "stop_reason", "parent_session")
_SESSION_COUNTS = ("max_new_tokens", "n_cycles", "n_forward", "n_tokens")


def session_label(row: dict[str, Any]) -> str:
    """A session's id for a message, even when the id itself is damaged (then its row number)."""
    sid = row.get("id")
    if type(sid) is str and sid and sid.isprintable() and sid.isascii():
        return sid
    return f"in row {row.get('_rowid')}"


def session_fields(row: dict[str, Any]) -> dict[str, Any]:
    """The :class:`~specviz_core.records.SessionInfo` fields of a ``sessions`` row, checked (no output ids)."""
    out: dict[str, Any] = {"id": text(row, "id")}
    for col in _SESSION_TEXT:
        out[col] = text(row, col)
    for col in _SESSION_OPTIONAL_TEXT:
        out[col] = text(row, col, optional=True)
    out["attention"] = out["attention"] or ""
    out["stop_reason"] = out["stop_reason"] or ""
    out["status"] = choice(row, "status", STATUSES)
    for col in _SESSION_COUNTS:
        out[col] = integer(row, col)
    out["seed"] = integer(row, "seed", 0, 2**64)
    out["chat_template"] = bool(integer(row, "chat_template", 0, 1))
    out["temperature"] = number(row, "temperature")
    out["decode_ms"] = number(row, "decode_ms")
    out["prefill_ms"] = number(row, "prefill_ms")
    out["params"] = parse(row, "params", dict, {})
    out["stats"] = parse(row, "stats", dict, {})
    out["prompt_ids"] = tuple(json_ints(row, "prompt_ids"))
    out["fork_cycle"] = None if row.get("fork_cycle") is None else integer(row, "fork_cycle")
    return out


# -- a cycle's summary --------------------------------------------------------------------------------------------
def summary_parts(parts: Any) -> tuple[list[int], dict[str, Any], dict[str, float], dict[str, Any]]:
    """``[committed_ids, state, timings_ms, summary]`` of a row, parsed in one document, checked: what a
    :class:`~specviz_core.analysis.cycle_summary.CycleSummary` is rebuilt from."""
    if type(parts) is not list or len(parts) != 4:
        raise RowError("committed_ids, state, timings_ms or summary is damaged")
    committed, state, timings, extra = parts
    int_list(committed, "committed_ids")
    check_state(state)
    check_timings(timings)
    if type(extra) is not dict:
        raise RowError(f"summary: {_kind(extra)}, not an object")
    check_summary(extra, len(committed))
    return committed, state, timings, extra


def check_summary(extra: dict[str, Any], n_committed: int) -> None:
    """The stored part of a summary (:meth:`CycleSummary.to_json`)."""
    for key in ("kinds", "broke", "cont", "src", "dr"):
        if key not in extra:
            raise RowError(f"summary: no {key!r}")
    kinds, broke, src, dr = extra["kinds"], extra["broke"], extra["src"], extra["dr"]
    if type(kinds) is not list or len(kinds) != n_committed or (kinds and set(map(type, kinds)) != {str}):
        raise RowError(f"summary: kinds is not one name per committed token ({show(kinds)})")
    if not (broke is None or type(broke) is int) or type(extra["cont"]) is not bool:
        raise RowError(f"summary: broke {show(broke)} or cont {show(extra['cont'])} has the wrong type")
    if type(src) is not dict or not _int_rows(src.values(), 2):
        raise RowError(f"summary: src is not per-source [verified, accepted] counts ({show(src)})")
    if type(dr) is not list or not _int_rows(dr, 4):
        raise RowError(f"summary: dr is not [depth, rank, verified, accepted] rows ({show(dr)})")
    ca, hr = extra.get("ca", ""), extra.get("hr", {})
    if ca not in CAUSES and ca != "":
        raise RowError(f"summary: ca {show(ca)} is not a stop cause ({', '.join(CAUSES)})")
    if type(hr) is not dict or any(type(v) is not int for v in hr.values()):
        raise RowError(f"summary: hr is not per-source token counts ({show(hr)})")


def _int_rows(rows: Any, width: int) -> bool:
    """``rows`` are lists of ``width`` whole numbers (a pass per check over all of them: opening a long session
    reads hundreds of thousands)."""
    rows = list(rows)
    return not rows or (set(map(type, rows)) == {list} and set(map(len, rows)) == {width}
                        and set(map(type, chain.from_iterable(rows))) == {int})


def check_state(state: Any) -> dict[str, Any]:
    """A cycle's method state: an object; its context ``match``, which the spine views read, well formed."""
    if type(state) is not dict:
        raise RowError(f"state: {_kind(state)}, not an object")
    m = state.get("match")
    if m:
        try:
            ok = type(m["ngram"]) is int and all(
                type(span) is list and len(span) == 2 and set(map(type, span)) == {int}
                for span in (m["match_span"], m["copy_span"]))
        except (KeyError, TypeError):
            ok = False
        if not ok:
            raise RowError(f"state: match is not {{ngram, match_span, copy_span}} ({show(m)})")
    offers = state.get("offers")
    if offers is not None and not _offers_ok(offers):
        raise RowError(f"state: offers is not node -> [{{source, tokens, scores, fates}}] ({show(offers)})")
    return state


def _offers_ok(offers: Any) -> bool:
    """``state["offers"]`` as :meth:`DraftTree.offer` writes it (what "why did it stop" reads)."""
    if type(offers) is not dict:
        return False
    for node, lists in offers.items():
        if not node.isdigit() or type(lists) is not list:
            return False
        for o in lists:
            if type(o) is not dict or type(o.get("source")) is not str:
                return False
            toks, scores, fates = o.get("tokens"), o.get("scores"), o.get("fates")
            if not (type(toks) is list and type(scores) is list and type(fates) is list
                    and len(toks) == len(scores) == len(fates)):
                return False
            if any(type(t) is not int for t in toks) or any(f not in FATES for f in fates) \
                    or any(type(x) not in (int, float) for x in scores):
                return False
    return True


def check_timings(t: Any) -> dict[str, float]:
    if type(t) is not dict:
        raise RowError(f"timings_ms: {_kind(t)}, not an object")
    for k, v in t.items():
        if type(v) not in _NUMBER or not math.isfinite(v):
            raise RowError(f"timings_ms: {show(k)} is {show(v)}, not a finite number of ms")
    return t

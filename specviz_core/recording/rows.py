"""A cycle record as a row of the ``cycles`` table, and back: nodes column-wise, the mask packed, the rest JSON.

Reading a row checks it against the record contract (:mod:`.contract`): a damaged row raises
:class:`~specviz_core.recording.contract.RowError` instead of giving a record that is silently wrong.
"""

from __future__ import annotations

import json
import math
import re
from itertools import chain, islice, repeat
from operator import and_
from typing import Any

import numpy as np
import orjson

from specviz_core.analysis.cycle_summary import CycleSummary, summarize
from specviz_core.recording.contract import (
    MAX_INT,
    RowError,
    check_state,
    check_timings,
    choice,
    int_list,
    integer,
    json_ints,
    parse,
    show,
)
from specviz_core.records import MODES, SOURCES, CycleRecord, Node

_NODE_FIELDS = list(Node._fields)
_SOURCES = frozenset(SOURCES)
_PROB = frozenset({float, int, type(None)})
_NUMBER = (float, int)


def pack_mask(mask: np.ndarray) -> bytes:
    """[n, n] bool -> ceil(n*n/8) bytes (a 60 x 60 mask is 450 bytes)."""
    return np.packbits(mask.reshape(-1)).tobytes()


def unpack_mask(blob: bytes, n: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(blob, dtype=np.uint8), count=n * n).astype(bool).reshape(n, n)


def dumps(value: Any) -> str:
    """Compact JSON, as ``json.dumps(value, separators=(",", ":"))`` reads back, ten times faster (orjson formats a
    cycle's floats: the record's probabilities and scores were a third of a small model's host work a cycle). A value
    orjson refuses (a numpy scalar, a key that is not a string) takes the standard library's path. NaN and infinity,
    which the record contract refuses either way, are written as null."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, separators=(",", ":"))


def cycle_to_row(session_id: str, r: CycleRecord, summary: CycleSummary | None = None) -> dict[str, Any]:
    # Nodes column-wise: one short list per field instead of a dict per node.
    nodes = dict(zip(_NODE_FIELDS, map(list, zip(*r.nodes))))  # a node is its fields' tuple
    return {
        "session_id": session_id, "idx": r.index, "mode": r.mode, "cache_len": r.cache_len,
        "n_verified": r.n_verified, "n_accepted": r.n_accepted, "nodes": dumps(nodes),
        "verify_order": dumps(r.verify_order), "mask": pack_mask(r.mask), "positions": dumps(r.positions),
        "accepted_path": dumps(r.accepted_path), "bonus_token": r.bonus_token,
        "committed_ids": dumps(r.committed_ids), "kv_keep": dumps(r.kv_keep),
        "target_topk": dumps(r.target_topk), "state": dumps(r.state), "timings_ms": dumps(r.timings_ms),
        "summary": dumps((summary or summarize(r)).to_json()),
    }


def cycle_from_row(row: dict[str, Any], index: int | None = None, vocab_size: int | None = None) -> CycleRecord:
    """The record a row holds, checked against the contract: cycle ``index`` if given, token ids below
    ``vocab_size`` when it is known. Raises :class:`RowError` naming the column and what is wrong."""
    tok_hi = vocab_size - 1 if vocab_size else MAX_INT
    idx = integer(row, "idx")
    if index is not None and idx != index:
        raise RowError(f"idx: the row says it is cycle {idx}")
    mode = choice(row, "mode", MODES)
    cache_len = integer(row, "cache_len")
    cols = parse(row, "nodes", dict)
    nodes, pos = _nodes(cols, tok_hi)
    parent, depth, verified = cols["parent"], cols["depth"], cols["verified"]

    # Verify order: the verified nodes, root first, each after its parent.
    order = json_ints(row, "verify_order")
    nv = len(order)
    if not order or order[0] != 0:
        raise RowError(f"verify_order: does not start with the root ({show(order)})")
    if integer(row, "n_verified") != nv:
        raise RowError(f"n_verified: {row['n_verified']}, but verify_order has {nv} nodes")
    row_of = dict(zip(order, range(nv)))
    if len(row_of) != nv or row_of.keys() != {nid for nid, v in zip(cols["id"], verified) if v}:
        raise RowError("verify_order: not the verified nodes, each once")
    prow = [row_of.get(parent[pos[nid]], nv) for nid in order[1:]]
    late = next((r for r, pr in enumerate(prow, 1) if pr >= r), None)
    if late is not None:
        raise RowError(f"verify_order: node {order[late]} comes before its parent")
    _check_mask(row.get("mask"), nv, prow)
    positions = json_ints(row, "positions")
    if positions != [cache_len + depth[pos[nid]] for nid in order]:
        raise RowError("positions: not cache_len + depth of each verify row")

    # The accepted path: a chain of verified nodes from the root; the bonus and the commit follow it.
    path = json_ints(row, "accepted_path")
    if integer(row, "n_accepted") != len(path):
        raise RowError(f"n_accepted: {row['n_accepted']}, but accepted_path has {len(path)} nodes")
    prev = 0
    for nid in path:
        if nid not in pos:
            raise RowError(f"accepted_path: {nid} is not a node")
        if parent[pos[nid]] != prev or nid not in row_of:
            raise RowError(f"accepted_path: node {nid} is not a verified child of node {prev}")
        prev = nid
    if {nid for nid, a in zip(cols["id"], cols["accepted"]) if a} != {0, *path}:
        raise RowError("nodes: the accepted flags disagree with accepted_path")
    bonus = integer(row, "bonus_token", 0, tok_hi)
    committed = json_ints(row, "committed_ids", 0, tok_hi)
    tokens = cols["token"]
    if committed != ([tokens[pos[nid]] for nid in path] + [bonus])[: len(committed)] or len(committed) > len(path) + 1:
        raise RowError("committed_ids: not the accepted tokens and the bonus token")
    kv_keep = json_ints(row, "kv_keep")
    if kv_keep != [0] + [row_of[nid] for nid in path]:
        raise RowError(f"kv_keep: {show(kv_keep)} is not the rows of the root and the accepted path")

    return CycleRecord(
        index=idx, mode=mode, cache_len=cache_len, nodes=nodes, verify_order=tuple(order),
        mask=unpack_mask(row["mask"], nv), positions=tuple(positions), accepted_path=tuple(path), bonus_token=bonus,
        committed_ids=tuple(committed), kv_keep=tuple(kv_keep), target_topk=_topk(row, nv, tok_hi),
        state=check_state(parse(row, "state", dict)), timings_ms=check_timings(parse(row, "timings_ms", dict)),
    )


def _nodes(cols: dict[str, Any], tok_hi: int) -> tuple[tuple[Node, ...], dict[int, int]]:
    """The nodes column (one list per field), checked; and each node id's position."""
    for f in _NODE_FIELDS:
        if f not in cols:
            raise RowError(f"nodes: no {f!r}")
    ids = cols["id"]
    n = len(ids) if type(ids) is list else -1
    for f in _NODE_FIELDS:
        c = cols[f]
        if type(c) is not list or len(c) != n or not n:
            raise RowError(f"nodes: {f} is {show(c)}, not one value per node")
    int_list(ids, "nodes: id")
    parent = int_list(cols["parent"], "nodes: parent", -1)
    int_list(cols["token"], "nodes: token", 0, tok_hi)
    depth = int_list(cols["depth"], "nodes: depth")
    int_list(cols["target_token"], "nodes: target_token", -1, tok_hi)
    source = cols["source"]
    try:
        known = _SOURCES.issuperset(source)
    except TypeError:  # an unhashable value
        known = False
    if not known:
        i = next(i for i, s in enumerate(source) if type(s) is not str or s not in _SOURCES)
        raise RowError(f"node {ids[i]}: source {show(source[i])} is not one of {', '.join(SOURCES)}")
    for f in ("verified", "gated", "accepted"):
        if set(map(type, cols[f])) != {bool}:
            raise RowError(f"nodes: {f} is {show(cols[f])}, not true or false for each node")
    score, prob = cols["score"], cols["target_prob"]
    if not set(map(type, score)) <= {float, int} or not all(map(math.isfinite, score)):
        raise RowError(f"nodes: score is {show(score)}, not a finite number for each node")
    if not set(map(type, prob)) <= _PROB or not all(0.0 <= p <= 1.0 for p in prob if p is not None):
        raise RowError(f"nodes: target_prob is {show(prob)}, not a probability or null for each node")
    if ids[0] != 0 or parent[0] != -1 or depth[0] != 0 or source[0] != "root":
        raise RowError("nodes: the first node is not the root (id 0, parent -1, depth 0, source 'root')")
    if any(map(and_, cols["verified"], cols["gated"])):
        raise RowError("nodes: a node is both verified and gated")

    # Each parent an earlier node with a smaller id, each depth its parent's + 1.
    if ids == list(range(n)):  # the engine's numbering: a node's position is its id
        pos = dict(zip(ids, ids))
        if min(parent[1:], default=0) >= 0 and all(map(int.__lt__, parent[1:], ids[1:])) and \
                depth[1:] == [depth[p] + 1 for p in parent[1:]]:
            return tuple(map(Node, *(cols[f] for f in _NODE_FIELDS))), pos
    pos = dict(zip(ids, range(n)))
    if len(pos) != n:
        raise RowError("nodes: two nodes share an id")
    for i in range(1, n):
        p = parent[i]
        if pos.get(p, n) >= i or p >= ids[i]:
            raise RowError(f"node {ids[i]}: parent {p} is not an earlier node")
        if depth[i] != depth[pos[p]] + 1:
            raise RowError(f"node {ids[i]}: depth {depth[i]}, its parent's is {depth[pos[p]]}")
    return tuple(map(Node, *(cols[f] for f in _NODE_FIELDS))), pos


def _check_mask(blob: Any, n: int, prow: list[int]) -> None:
    """The packed mask is exactly the tree's: each verify row attends to its ancestors and itself."""
    if type(blob) is not bytes:
        raise RowError(f"mask: {type(blob).__name__}, not bytes")
    need = (n * n + 7) // 8
    if len(blob) != need:
        raise RowError(f"mask: {len(blob)} bytes, a {n} x {n} mask needs {need}")
    # Row r's bits as an int, column 0 the highest bit; the rows end to end are the packed bits (MSB first).
    rows = [1 << (n - 1)]
    full = rows[0]
    for r, pr in enumerate(prow, 1):
        bits = rows[pr] | (1 << (n - 1 - r))
        rows.append(bits)
        full = (full << n) | bits
    if int.from_bytes(blob, "big") != full << (8 * need - n * n):
        got = unpack_mask(blob, n)
        for r in range(n):
            if int("".join("1" if b else "0" for b in got[r]), 2) != rows[r]:
                raise RowError(f"mask: row {r} does not attend to exactly its ancestors and itself")
        raise RowError("mask: padding bits are set")


_TOPK_TEXT = re.compile(r"\[(?:\[(?:\[\d{1,9}+,(?:0\.\d++|1\.0|\d(?:\.\d++)?+e-\d++)\],?+)*+\],?+)*+\]")
"""``target_topk`` as the recorder writes it: rows of [token, probability] pairs, tokens below 10^9, probabilities
from 0 to 1 as ``json.dumps`` writes floats. Text like this needs no more check than its JSON and its row count.
(Possessive quantifiers: no backtracking, linear time on any text.)"""


def _topk(row: dict[str, Any], nv: int, tok_hi: int) -> tuple[tuple[tuple[int, float], ...], ...]:
    """Per verify row, the target's top (token, probability) pairs (or none at all)."""
    text = row.get("target_topk")
    fast = tok_hi >= 10**9 and type(text) is str and _TOPK_TEXT.fullmatch(text) is not None
    raw = parse(row, "target_topk", list)
    if not raw:
        return ()
    if len(raw) != nv:
        raise RowError(f"target_topk: {len(raw)} rows for {nv} verify rows")
    if fast:
        return tuple(map(tuple, map(map, repeat(tuple), raw)))
    # Checked all at once, a pass per check rather than a test per pair; min/max/sum refuse text and null.
    try:
        lens = list(map(len, raw))
        flat = list(chain.from_iterable(raw))
        tokens, probs = zip(*flat) if flat and set(map(len, flat)) == {2} else ((None,), (None,))
        ok = set(map(type, tokens)) == {int} and 0 <= min(tokens) and max(tokens) <= tok_hi \
            and 0.0 <= min(probs) and max(probs) <= 1.0 and math.isfinite(sum(probs))  # NaN slips past min
    except (TypeError, ValueError):
        ok = False
    if not ok:
        r = next((r for r, pairs in enumerate(raw) if not _pairs_ok(pairs, tok_hi)), 0)
        raise RowError(f"target_topk: row {r} is {show(raw[r])}, not [token, probability] pairs")
    pairs = zip(tokens, map(float, probs))
    return tuple(tuple(islice(pairs, k)) for k in lens)


def _pairs_ok(pairs: Any, tok_hi: int) -> bool:
    try:
        return type(pairs) is list and all(type(t) is int and type(p) in _NUMBER and 0 <= t <= tok_hi
                                           and 0.0 <= p <= 1.0 for t, p in pairs)
    except (TypeError, ValueError):  # not pairs
        return False

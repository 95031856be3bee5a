"""A cycle record as a row of the ``cycles`` table, and back: nodes column-wise, the mask packed, the rest JSON."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

import numpy as np

from specviz_core.records import CycleRecord, Node
from specviz_core.summary import CycleSummary, summarize

_NODE_FIELDS = [f.name for f in fields(Node)]


def pack_mask(mask: np.ndarray) -> bytes:
    """[n, n] bool -> ceil(n*n/8) bytes (a 60 x 60 mask is 450 bytes)."""
    return np.packbits(mask.reshape(-1)).tobytes()


def unpack_mask(blob: bytes, n: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(blob, dtype=np.uint8), count=n * n).astype(bool).reshape(n, n)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def cycle_to_row(session_id: str, r: CycleRecord, summary: CycleSummary | None = None) -> dict[str, Any]:
    # Nodes column-wise: one short list per field instead of a dict per node.
    nodes = {name: [getattr(n, name) for n in r.nodes] for name in _NODE_FIELDS}
    return {
        "session_id": session_id, "idx": r.index, "mode": r.mode, "cache_len": r.cache_len,
        "n_verified": r.n_verified, "n_accepted": r.n_accepted, "nodes": dumps(nodes),
        "verify_order": dumps(r.verify_order), "mask": pack_mask(r.mask), "positions": dumps(r.positions),
        "accepted_path": dumps(r.accepted_path), "bonus_token": r.bonus_token,
        "committed_ids": dumps(r.committed_ids), "kv_keep": dumps(r.kv_keep),
        "target_topk": dumps(r.target_topk), "state": dumps(r.state), "timings_ms": dumps(r.timings_ms),
        "summary": dumps((summary or summarize(r)).to_json()),
    }


def cycle_from_row(row: dict[str, Any]) -> CycleRecord:
    cols = json.loads(row["nodes"])
    nodes = tuple(Node(**dict(zip(_NODE_FIELDS, vals))) for vals in zip(*(cols[f] for f in _NODE_FIELDS)))
    verify_order = tuple(json.loads(row["verify_order"]))
    return CycleRecord(
        index=row["idx"], mode=row["mode"], cache_len=row["cache_len"], nodes=nodes, verify_order=verify_order,
        mask=unpack_mask(row["mask"], len(verify_order)), positions=tuple(json.loads(row["positions"])),
        accepted_path=tuple(json.loads(row["accepted_path"])), bonus_token=row["bonus_token"],
        committed_ids=tuple(json.loads(row["committed_ids"])), kv_keep=tuple(json.loads(row["kv_keep"])),
        target_topk=tuple(tuple((int(t), float(p)) for t, p in row_) for row_ in json.loads(row["target_topk"])),
        state=json.loads(row["state"]), timings_ms=json.loads(row["timings_ms"]),
    )

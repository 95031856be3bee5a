"""A cycle's record, from what the cycle did: the tree, its verify block, the target's rows and the walk.

One function builds every :class:`~specviz_core.records.CycleRecord`: the engine's cycles and the cycles
``specviz.record`` captures from transformers' own ``generate`` (a chain it drafted, verified in one forward).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from specviz_core.records import CycleRecord, Node
from specviz_core.target_rows import TargetRows
from specviz_core.tree import DraftTree, VerifyBlock


def cycle_record(index: int, tree: DraftTree, block: VerifyBlock, rows: TargetRows, accepted_rows: Sequence[int],
                 bonus: int, committed: Sequence[int], kv_keep: Sequence[int], state: dict[str, Any], cache_len: int,
                 timings_ms: dict[str, float]) -> CycleRecord:
    """``accepted_rows``: the verify rows the walk accepted (root excluded); ``kv_keep``: the rows the cache kept;
    ``timings_ms``: kept as given (the engine adds the record's own building time to it afterwards)."""
    row_of = {int(nid): r for r, nid in enumerate(block.order)}
    argmax, tp = rows.argmax.tolist(), rows.token_prob.tolist()
    accepted = {0} | {int(block.order[r]) for r in accepted_rows}
    nodes = []
    for i in range(len(tree)):
        row = row_of.get(i)
        nodes.append(Node(
            id=i, parent=tree.parents[i], token=tree.tokens[i], source=tree.sources[i],
            depth=tree.depths[i], score=float(tree.scores[i]), verified=row is not None,
            gated=tree.gated[i], accepted=i in accepted,
            target_token=argmax[row] if row is not None else -1,
            target_prob=tp[row] if row is not None and row > 0 else None,
        ))
    return CycleRecord(
        index=index,
        mode=tree.mode,
        cache_len=cache_len,
        nodes=tuple(nodes),
        verify_order=tuple(int(i) for i in block.order),
        mask=block.mask,
        positions=tuple(int(p) for p in block.positions(cache_len)),
        accepted_path=tuple(int(block.order[r]) for r in accepted_rows),
        bonus_token=int(bonus),
        committed_ids=tuple(int(t) for t in committed),
        kv_keep=tuple(int(r) for r in kv_keep),
        target_topk=tuple(tuple(zip(ids, ps)) for ids, ps in zip(rows.shown_ids.tolist(), rows.shown_probs.tolist())),
        state=plain(state),
        timings_ms=timings_ms,
    )


def plain(value: Any) -> Any:
    """State as plain JSON-able Python values (no numpy or torch scalars, no tuples)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # a tensor or an array
        return value.tolist()
    return value

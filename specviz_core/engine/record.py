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
    order = block.order.tolist()
    row_of = {nid: r for r, nid in enumerate(order)}
    argmax, tp = rows.argmax.tolist(), rows.token_prob.tolist()
    accepted = {0} | {order[r] for r in accepted_rows}
    parents, tokens, sources, depths, scores, gated = (tree.parents, tree.tokens, tree.sources, tree.depths,
                                                       tree.scores, tree.gated)
    nodes = []
    for i in range(len(tree)):
        row = row_of.get(i)
        if row is None:
            nodes.append(Node(i, parents[i], tokens[i], sources[i], depths[i], float(scores[i]), False, gated[i],
                              i in accepted, -1, None))
        else:
            nodes.append(Node(i, parents[i], tokens[i], sources[i], depths[i], float(scores[i]), True, gated[i],
                              i in accepted, argmax[row], tp[row] if row > 0 else None))
    return CycleRecord(
        index=index,
        mode=tree.mode,
        cache_len=cache_len,
        nodes=tuple(nodes),
        verify_order=tuple(order),
        mask=block.mask,
        positions=tuple(block.positions(cache_len).tolist()),
        accepted_path=tuple(order[r] for r in accepted_rows),
        bonus_token=int(bonus),
        committed_ids=tuple(int(t) for t in committed),
        kv_keep=tuple(int(r) for r in kv_keep),
        target_topk=tuple(map(tuple, map(zip, rows.shown_ids.tolist(), rows.shown_probs.tolist()))),
        state=plain(state),
        timings_ms=timings_ms,
    )


_LEAVES = (int, float, str, bool, type(None))


def plain(value: Any) -> Any:
    """State as plain JSON-able Python values (no numpy or torch scalars, no tuples)."""
    if type(value) in _LEAVES:  # most of a state: answered first
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # a tensor or an array
        return value.tolist()
    return value

"""Which node stands for which committed token: what lets a click in the output select a node, and a selected
node light its token in the output.

A cycle commits its accepted path's tokens, then the bonus token (``committed_ids``). The bonus token is no
node of the record; a selection names it :data:`BONUS`. The root is the token committed just before the cycle.
"""

from __future__ import annotations

from specviz_core.records import CycleRecord

BONUS = -1
"""The node id that stands for the cycle's bonus token in a selection (and in the tree drawing)."""


def committed_node(record: CycleRecord, k: int) -> int | None:
    """The node that committed ``record``'s ``k``-th token: an accepted node, or :data:`BONUS` for the last."""
    if not 0 <= k < len(record.committed_ids):
        return None
    return record.accepted_path[k] if k < len(record.accepted_path) else BONUS


def committed_index(record: CycleRecord, node_id: int | None) -> int | None:
    """Which of ``record``'s committed tokens node ``node_id`` is: 0.. for the accepted path, the last for
    :data:`BONUS`, -1 for the root (the token before the cycle); None for a node that committed nothing."""
    if node_id is None:
        return None
    if node_id == 0:
        return -1
    if node_id == BONUS:
        k = len(record.accepted_path)
    elif node_id in record.accepted_path:
        k = record.accepted_path.index(node_id)
    else:
        return None
    return k if k < len(record.committed_ids) else None

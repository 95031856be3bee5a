"""Walking the verified tree: which draft nodes the target accepts, and the bonus token.

Greedy: from the root, move to a child whose token is the target's argmax at the
current node; several matches are broken by the method's source priority.

Sampling (temperature > 0): multi-candidate speculative sampling (SpecInfer,
Sequoia). At a node whose target distribution is p, try the children in order;
accept child x with probability min(1, p(x) / q(x)), q being the distribution x
was drawn from (one-hot for deterministic drafts). On rejection
p <- normalize(max(p - q, 0)). Children that carry a draft distribution were
drawn from it without replacement, in the order they are tried (Sequoia): a
later child's q is q with the earlier, rejected siblings' tokens removed and
renormalized. If no child is accepted the bonus token is drawn from what is
left of p, so the output follows the target's own distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from specviz_core.tree import DraftTree, VerifyBlock


@dataclass(frozen=True)
class WalkResult:
    accepted_rows: list[int]
    """Verify-block rows of the accepted draft nodes, root excluded, in depth order."""
    bonus_token: int


def children_rows(block: VerifyBlock, sources: Sequence[str], priority: Sequence[str]) -> list[list[int]]:
    """Each row's child rows, in the order the walk tries them (source priority, then verify order)."""
    rank = {s: i for i, s in enumerate(priority)}
    parents = block.parent_rows.tolist()
    kids: list[list[int]] = [[] for _ in parents]
    ranks = [rank.get(s, len(rank)) for s in sources]
    # One sort of the rows by (priority, row), then each row appended to its parent's list: every list comes out
    # in that order (rows of one source: verify order, no sort at all).
    rows = range(len(parents)) if len(set(ranks)) < 2 else sorted(range(len(parents)), key=ranks.__getitem__)
    for row in rows:  # sorted() is stable: equal priorities stay in verify order
        pr = parents[row]
        if pr >= 0:
            kids[pr].append(row)
    return kids


def greedy_walk(block: VerifyBlock, target_tokens: np.ndarray, kids: list[list[int]]) -> WalkResult:
    """``target_tokens`` [n]: the target's argmax after each row."""
    row, path = 0, []
    while True:
        want = target_tokens[row]
        nxt = next((c for c in kids[row] if block.tokens[c] == want), None)
        if nxt is None:
            return WalkResult(path, int(want))
        path.append(nxt)
        row = nxt


def sampling_walk(
    block: VerifyBlock,
    probs: torch.Tensor,
    kids: list[list[int]],
    tree: DraftTree,
    generator: torch.Generator,
) -> WalkResult:
    """``probs`` [n, V]: the target's tempered distribution after each row (on the CPU)."""
    row, path = 0, []
    while True:
        p = probs[row].clone()  # [V]
        chosen = None
        tried: list[int] = []  # tokens of the children rejected so far at this row
        for c in kids[row]:
            x = int(block.tokens[c])
            q = tree.draft_q.get(int(block.order[c]))  # [V] or None (one-hot)
            if q is not None and tried:
                # Drawn without replacement: the rejected siblings' tokens could not come up again.
                q = q.clone()
                q[tried] = 0.0
                q = q / q.sum() if float(q.sum()) > 0 else q
            qx = 1.0 if q is None else float(q[x])
            px = float(p[x])
            u = float(torch.rand((), generator=generator))
            if qx > 0 and u < min(1.0, px / qx):
                chosen = c
                break
            tried.append(x)
            residual = p.clone() if q is None else torch.clamp(p - q, min=0.0)
            if q is None:
                residual[x] = 0.0
            total = float(residual.sum())
            if total <= 0.0:  # p <= q everywhere, so p == q and x was accepted but for rounding: keep p
                break
            p = residual / total
        if chosen is None:
            bonus = int(torch.multinomial(p, 1, generator=generator))
            return WalkResult(path, bonus)
        path.append(chosen)
        row = chosen

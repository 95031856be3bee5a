"""Prompt lookup decoding: copy what followed the last n-gram earlier in the context."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from specviz_core.drafters.base import DraftContext, Drafter
from specviz_core.methods.pld import CARD, PLDParams
from specviz_core.tree import DraftTree


@dataclass(frozen=True)
class Match:
    """Where the copied tokens came from, as token spans of the context (end exclusive)."""

    ngram: int
    match_start: int
    match_end: int
    copy_start: int
    copy_end: int


def match_ngram(ids: np.ndarray, n: int, k: int, last: bool = True) -> Match | None:
    """An earlier occurrence of the last ``n`` tokens of ``ids``, and up to ``k`` tokens that followed it."""
    n_ids = len(ids)
    if n < 1 or n > n_ids - 1:
        return None
    # Windows starting at 0 .. n_ids - n - 1: each is followed by at least one token.
    windows = sliding_window_view(ids[: n_ids - 1], n)
    hits = np.flatnonzero((windows == ids[n_ids - n:]).all(axis=1))
    if not len(hits):
        return None
    start = int(hits[-1] if last else hits[0])
    return Match(n, start, start + n, start + n, min(start + n + k, n_ids))


def find_match(ids: np.ndarray, max_ngram: int, min_ngram: int, k: int, last: bool = True) -> Match | None:
    """The longest suffix n-gram of ``ids`` that occurs earlier, and what followed it."""
    for n in range(max_ngram, min_ngram - 1, -1):
        m = match_ngram(ids, n, k, last)
        if m is not None:
            return m
    return None


class PLDDrafter(Drafter):
    card = CARD

    def draft(self, ctx: DraftContext) -> DraftTree:
        p: PLDParams = self.params
        ids = np.asarray(ctx.ids, dtype=np.int64)
        k = min(p.num_pred_tokens, ctx.max_depth)
        m = find_match(ids, p.max_ngram, p.min_ngram, k, last=p.occurrence == "last") if k > 0 else None
        if m is None:
            tree = DraftTree(root_token=int(ids[-1]), mode="ar")
            tree.state = {"match": None}
            return tree
        tree = DraftTree(root_token=int(ids[-1]), mode="chain")
        nodes = [0] + tree.add_chain([int(t) for t in ids[m.copy_start:m.copy_end]], source="ngram")
        # The copy offers one token per node; past its end, the next context token was left out by the length cap.
        for i, nid in enumerate(nodes):
            j = m.copy_start + i
            if j < len(ids):
                tree.offer(nid, "ngram", [int(ids[j])], [1.0], ["drafted" if i < len(nodes) - 1 else "budget"])
            else:  # the copy reached the end of the context: nothing more to offer
                tree.offer(nid, "ngram", [], [], [])
        tree.state = {
            "match": {"ngram": m.ngram, "match_span": [m.match_start, m.match_end], "copy_span": [m.copy_start, m.copy_end]},
        }
        return tree

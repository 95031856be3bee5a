"""Prompt lookup decoding: copy what followed an earlier occurrence of the context's last n-gram (the first
occurrence by default, as the method's authors and transformers copy)."""

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


def match_ngram(ids: np.ndarray, n: int, k: int, last: bool = False) -> Match | None:
    """The first (``last``: the latest) earlier occurrence of the last ``n`` tokens of ``ids``, and up to ``k`` tokens
    that followed it."""
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


def find_match(ids: np.ndarray, max_ngram: int, min_ngram: int, k: int, last: bool = False) -> Match | None:
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
        last = len(tree.add_chain(ids[m.copy_start:m.copy_end].tolist(), source="ngram"))  # node i: ids[start + i]
        tree.lazy_offers = lambda path: _offer_copy(tree, ids, m.copy_start, last, path)  # only the path's are recorded
        tree.state = {
            "match": {"ngram": m.ngram, "match_span": [m.match_start, m.match_end], "copy_span": [m.copy_start, m.copy_end]},
        }
        return tree


def _offer_copy(tree: DraftTree, ids: np.ndarray, copy_start: int, last: int, nodes: list[int]) -> None:
    """The copy's offer at each of ``nodes`` (chain node i, the root 0): the next context token, ``drafted`` below
    every node but the last, where the length cap left it out; nothing where the copy reached the context's end."""
    for i in nodes:
        j = copy_start + i
        if j < len(ids):
            tree.offer(i, "ngram", [int(ids[j])], [1.0], ["drafted" if i < last else "budget"])
        else:
            tree.offer(i, "ngram", [], [], [])

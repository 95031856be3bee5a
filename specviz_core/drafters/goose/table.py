"""Goose's branch source: the two-tier adjacency table, harvested from every forward's logits.

For each harvested row: the top-K logits and their softmax **over those K alone** (scores
renormalised over the top K, so ``min_score`` prunes relative to the best K, not to the whole
vocabulary). Tier 1 (unigram) keeps, per token, the last row harvested for it: ids ``[V, K]`` and
scores ``[V, K]`` stored in float16 as the official implementation stores them (a token seen at
several rows of one harvest keeps its last row). Tier 2 (bigram) maps ``(prev, token)`` to its
row; a lookup with a known previous token tries it first. The table lives on the host (numpy): a lookup is
then a slice with no device round-trip, and a harvest reads the top-K the cycle's one copy brought over.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Successors = list[tuple[int, float]]


class GooseTable:
    def __init__(self, vocab_size: int, k: int) -> None:
        self.k = k
        self.ids = np.full((vocab_size, k), -1, dtype=np.int64)  # [V, K]
        self.scores = np.zeros((vocab_size, k), dtype=np.float16)  # [V, K]
        self.observed = np.zeros(vocab_size, dtype=bool)  # [V]
        self.bigram: dict[tuple[int, int], int] = {}
        """``(prev, token)`` -> its row in the bigram tier's arrays (one row a pair, overwritten by a later harvest)."""
        self._big_ids = np.full((64, k), -1, dtype=np.int64)  # [rows, K], grown by doubling
        self._big_scores = np.zeros((64, k), dtype=np.float64)  # [rows, K]: scores as computed, not float16

    def harvest(self, tokens: Sequence[int], ids: np.ndarray, probs: np.ndarray,
                prev: Sequence[int | None] | None = None) -> None:
        """``tokens`` [n]; ``ids``, ``probs`` [n, K]: the target's top-K after each (row i: what followed
        tokens[i]) and their probabilities, renormalised here over the K; ``prev`` [n]: the token before each
        (None or a negative id: no bigram entry for that row)."""
        n = min(len(tokens), len(ids))
        if n == 0:
            return
        ids, probs = ids[:n, :self.k], probs[:n, :self.k]
        total = probs.sum(axis=1, keepdims=True)
        scores = np.divide(probs, total, out=np.zeros_like(probs), where=total > 0)  # softmax over the top K
        toks = [int(t) for t in tokens[:n]]
        # One row per token, its last (a later row of the same token overwrites the earlier one).
        last = dict(zip(toks, range(n)))
        seen, rows = list(last), list(last.values())
        self.ids[seen] = ids[rows]
        self.scores[seen] = scores[rows].astype(np.float16)
        self.observed[seen] = True
        if prev is None:
            return
        pairs = {(p, t): i for i, (p, t) in enumerate(zip(prev[:n], toks)) if p is not None and p >= 0}  # its last
        if not pairs:
            return
        slot_of = self.bigram
        slots = [slot_of.setdefault((int(p), t), len(slot_of)) for p, t in pairs]
        if len(slot_of) > len(self._big_ids):
            size = max(2 * len(self._big_ids), len(slot_of))
            self._big_ids = np.concatenate([self._big_ids, np.full((size - len(self._big_ids), self.k), -1)])
            self._big_scores = np.concatenate([self._big_scores, np.zeros((size - len(self._big_scores), self.k))])
        at = list(pairs.values())
        self._big_ids[slots] = ids[at]
        self._big_scores[slots] = scores[at]

    def successors(self, token: int, prev: int | None = None) -> Successors:
        """(token, score) pairs, best first: the bigram row for ``(prev, token)`` if there is one, else the unigram row."""
        if prev is not None:
            slot = self.bigram.get((prev, token))
            if slot is not None:
                return list(zip(self._big_ids[slot].tolist(), self._big_scores[slot].tolist()))
        if not self.observed[token]:
            return []
        # float16's tolist gives each score's exact value, as a float32 copy would
        return [(i, s) for i, s in zip(self.ids[token].tolist(), self.scores[token].tolist()) if i >= 0]

    def has_successors(self, token: int, prev: int | None = None) -> bool:
        return (prev is not None and (prev, token) in self.bigram) or bool(self.observed[token])

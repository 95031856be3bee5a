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
        self.bigram: dict[tuple[int, int], tuple[list[int], list[float]]] = {}

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
        last = sorted({t: i for i, t in enumerate(toks)}.values())
        rows = [toks[i] for i in last]
        self.ids[rows] = ids[last]
        self.scores[rows] = scores[last].astype(np.float16)
        self.observed[rows] = True
        if prev is not None:
            id_rows, score_rows = ids.tolist(), scores.tolist()
            for i, p in enumerate(prev[:n]):
                if p is not None and p >= 0:
                    self.bigram[(int(p), toks[i])] = (id_rows[i], score_rows[i])

    def successors(self, token: int, prev: int | None = None) -> Successors:
        """(token, score) pairs, best first: the bigram row for ``(prev, token)`` if there is one, else the unigram row."""
        if prev is not None:
            entry = self.bigram.get((prev, token))
            if entry is not None:
                return list(zip(entry[0], entry[1]))
        if not self.observed[token]:
            return []
        # float16's tolist gives each score's exact value, as a float32 copy would
        return [(i, s) for i, s in zip(self.ids[token].tolist(), self.scores[token].tolist()) if i >= 0]

    def has_successors(self, token: int, prev: int | None = None) -> bool:
        return (prev is not None and (prev, token) in self.bigram) or bool(self.observed[token])

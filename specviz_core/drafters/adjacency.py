"""The adjacency table: the target's recent top-K successors of each token, from its own logits.

Tier 1 (unigram) is two dense ``[V, K]`` arrays on the host (successor ids and their
probabilities, filled from the one copy of the target's top-K a cycle makes); tier 2 (bigram, optional) maps the last two tokens
``(prev, token)`` to their top-K successors, which sharpens predictions (what
follows ``f`` after ``def`` is more predictable than after ``f`` alone). Every
harvested row overwrites its entries: the table holds the most recent view.
"""

from __future__ import annotations

import numpy as np


class AdjacencyTable:
    def __init__(self, vocab_size: int, k: int, bigram: bool = False) -> None:
        self.k = k
        self.ids = np.zeros((vocab_size, k), dtype=np.int64)  # [V, K]
        self.probs = np.zeros((vocab_size, k), dtype=np.float32)  # [V, K]
        self.filled = np.zeros(vocab_size, dtype=bool)  # [V]
        self.bigram: dict[tuple[int, int], tuple[list[int], list[float]]] | None = {} if bigram else None

    def update(self, tokens: np.ndarray, ids: np.ndarray, probs: np.ndarray, prev: np.ndarray | None = None) -> None:
        """``tokens`` [n]; ``ids``, ``probs`` [n, K]: the target's top-K after each and their probabilities;
        ``prev`` [n] (the token before each, -1 if none). A token seen at several rows keeps its last."""
        self.ids[tokens] = ids[:, :self.k]
        self.probs[tokens] = probs[:, :self.k]
        self.filled[tokens] = True
        if self.bigram is not None and prev is not None:
            for p, t, i, s in zip(prev.tolist(), tokens.tolist(), ids[:, :self.k].tolist(), probs[:, :self.k].tolist()):
                if p >= 0:
                    self.bigram[(p, t)] = (i, s)

    def lookup(self, token: int, prev: int = -1) -> tuple[list[int], list[float], str]:
        """Top-K successors of ``token`` (after ``prev``): ids, probabilities, and which tier answered."""
        if self.bigram is not None and (prev, token) in self.bigram:
            ids, ps = self.bigram[(prev, token)]
            return ids, ps, "bigram"
        if self.filled[token]:
            return self.ids[token].tolist(), self.probs[token].tolist(), "unigram"
        return [], [], "none"

"""The adjacency table: the target's recent top-K successors of each token, from its own logits.

Tier 1 (unigram) is two dense ``[V, K]`` tensors on the model's device (successor
ids and their probabilities); tier 2 (bigram, optional) maps the last two tokens
``(prev, token)`` to their top-K successors, which sharpens predictions (what
follows ``f`` after ``def`` is more predictable than after ``f`` alone). Every
harvested row overwrites its entries: the table holds the most recent view.
"""

from __future__ import annotations

import torch


class AdjacencyTable:
    def __init__(self, vocab_size: int, k: int, device: torch.device, bigram: bool = False) -> None:
        self.k = k
        self.ids = torch.zeros((vocab_size, k), dtype=torch.long, device=device)  # [V, K]
        self.probs = torch.zeros((vocab_size, k), dtype=torch.float32, device=device)  # [V, K]
        self.filled = torch.zeros(vocab_size, dtype=torch.bool, device=device)  # [V]
        self.bigram: dict[tuple[int, int], tuple[list[int], list[float]]] | None = {} if bigram else None

    def update(self, tokens: torch.Tensor, logits: torch.Tensor, prev: torch.Tensor | None = None) -> None:
        """``tokens`` [n], ``logits`` [n, V], ``prev`` [n] (the token before each, -1 if none)."""
        # One batched top-k for every harvested row.
        top = torch.softmax(logits.float(), dim=-1).topk(self.k, dim=-1)
        tokens = tokens.to(self.ids.device)
        self.ids[tokens] = top.indices
        self.probs[tokens] = top.values
        self.filled[tokens] = True
        if self.bigram is not None and prev is not None:
            ids, ps = top.indices.tolist(), top.values.tolist()
            for p, t, i, s in zip(prev.tolist(), tokens.tolist(), ids, ps):
                if p >= 0:
                    self.bigram[(p, t)] = (i, s)

    def lookup(self, token: int, prev: int = -1) -> tuple[list[int], list[float], str]:
        """Top-K successors of ``token`` (after ``prev``): ids, probabilities, and which tier answered."""
        if self.bigram is not None and (prev, token) in self.bigram:
            ids, ps = self.bigram[(prev, token)]
            return ids, ps, "bigram"
        if bool(self.filled[token]):
            return self.ids[token].tolist(), self.probs[token].tolist(), "unigram"
        return [], [], "none"

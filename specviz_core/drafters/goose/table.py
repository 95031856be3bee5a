"""Goose's branch source: the two-tier adjacency table, harvested from every forward's logits.

For each harvested row: the top-K logits and their softmax **over those K alone** (scores
renormalised over the top K, so ``min_score`` prunes relative to the best K, not to the whole
vocabulary). Tier 1 (unigram) keeps, per token, the last row harvested for it: ids ``[V, K]`` and
scores ``[V, K]`` stored in float16 as the official implementation stores them (a token seen at
several rows of one harvest keeps its last row). Tier 2 (bigram) maps ``(prev, token)`` to its
row; a lookup with a known previous token tries it first. The table lives on the CPU: a lookup is
then a slice with no device round-trip, and each harvest moves its ``[n, K]`` top-K across once.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

Successors = list[tuple[int, float]]


class GooseTable:
    def __init__(self, vocab_size: int, k: int) -> None:
        self.k = k
        self.ids = torch.full((vocab_size, k), -1, dtype=torch.long)  # [V, K]
        self.scores = torch.zeros((vocab_size, k), dtype=torch.float16)  # [V, K]
        self.observed = torch.zeros(vocab_size, dtype=torch.bool)  # [V]
        self.bigram: dict[tuple[int, int], tuple[list[int], list[float]]] = {}

    def harvest(self, tokens: Sequence[int], logits: torch.Tensor, prev: Sequence[int | None] | None = None) -> None:
        """``tokens`` [n], ``logits`` [n, V] (row i: what followed tokens[i]), ``prev`` [n]: the token before each
        (None or a negative id: no bigram entry for that row)."""
        n = min(len(tokens), logits.shape[0])
        if n == 0:
            return
        values, ids = torch.topk(logits[:n], self.k, dim=-1)  # [n, K]
        scores = torch.nan_to_num(torch.softmax(values, dim=-1), nan=0.0, posinf=1.0, neginf=0.0)
        ids, scores = ids.cpu(), scores.cpu()
        toks = [int(t) for t in tokens[:n]]
        # One row per token, its last: index_put with repeated rows keeps an unspecified one.
        last = sorted({t: i for i, t in enumerate(toks)}.values())
        keep = torch.tensor(last, dtype=torch.long)
        rows = torch.tensor([toks[i] for i in last], dtype=torch.long)
        self.ids[rows] = ids[keep]
        self.scores[rows] = scores[keep].to(torch.float16)
        self.observed[rows] = True
        if prev is not None:
            id_rows, score_rows = ids.tolist(), scores.float().tolist()
            for i, p in enumerate(prev[:n]):
                if p is not None and p >= 0:
                    self.bigram[(int(p), toks[i])] = (id_rows[i], score_rows[i])

    def successors(self, token: int, prev: int | None = None) -> Successors:
        """(token, score) pairs, best first: the bigram row for ``(prev, token)`` if there is one, else the unigram row."""
        if prev is not None:
            entry = self.bigram.get((prev, token))
            if entry is not None:
                return list(zip(entry[0], entry[1]))
        if not bool(self.observed[token]):
            return []
        return [(i, s) for i, s in zip(self.ids[token].tolist(), self.scores[token].float().tolist()) if i >= 0]

    def has_successors(self, token: int, prev: int | None = None) -> bool:
        return (prev is not None and (prev, token) in self.bigram) or bool(self.observed[token])

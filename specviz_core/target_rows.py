"""What the target said after each row it ran, reduced on the device and copied to the host once.

A verify forward (or a prefill chunk) leaves logits [n, V] on the device. The walk needs each row's argmax, the
record five probabilities a row and the probability of each row's own token, and a drafter that learns from the
target (Goose's and Token Recycling's tables, TALON's n-grams) each row's top-k successors. All of them are read
from one top-k and one softmax over the vocabulary (the argmax is the top-k's first), packed into one array and copied
to the host in one transfer: no second top-k in a harvest, no softmax of its own, and on a GPU one wait a cycle
instead of one a drafter's lookup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

#: Top probabilities a row's record shows.
TOPK_SHOWN = 5


class Verified(NamedTuple):
    """What one target forward gave for the rows it ran (a verify block's real rows, or a prefill's last row)."""

    logits: torch.Tensor
    """[n, V] fp32, on the device."""
    features: torch.Tensor | None
    """[n, F] what a draft head reads of the same rows (the feature tap's), None where no head taps them."""


@dataclass(frozen=True)
class TargetRows:
    """Per row (n rows, K = the widest top-k asked for), on the host but ``logits``."""

    tokens: np.ndarray
    """[n] the token each row ran."""
    prev: np.ndarray
    """[n] the token before each on its path (-1: none), for bigram tables."""
    logits: torch.Tensor
    """[n, V] fp32, on the device: for a drafter that needs the whole distribution."""
    argmax: np.ndarray
    """[n] the target's argmax after each row."""
    token_prob: np.ndarray
    """[n] the target's (tempered) probability, at the parent row, of each row's token (row 0: 0, a root has none)."""
    top_ids: np.ndarray
    """[n, K] the target's most probable next tokens, best first."""
    top_probs: np.ndarray
    """[n, K] their probabilities under the target's own (untempered) distribution."""
    shown_ids: np.ndarray
    """[n, TOPK_SHOWN] what the record shows: the top tokens under the session's (tempered) distribution."""
    shown_probs: np.ndarray
    features: torch.Tensor | None = None
    """[n, F] on the device: the draft head's features of the same rows (:class:`Verified`), or None."""

    def __len__(self) -> int:
        return len(self.tokens)

    def top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The top ``k`` successors of every row, ids [n, k] and probabilities [n, k] (the target's own softmax).
        Within the width the engine reduced (a drafter's ``harvest_k``) this reads the host copy; beyond it, it
        runs another top-k and copy."""
        if k <= self.top_ids.shape[1]:
            return self.top_ids[:, :k], self.top_probs[:, :k]
        ids, probs = top_probs(self.logits, k)
        return ids.cpu().numpy(), probs.cpu().numpy()

    def select(self, rows: list[int] | np.ndarray) -> TargetRows:
        """These rows only (host arrays indexed; the logits too, on the device)."""
        idx = np.asarray(rows, dtype=np.int64)
        dev = torch.as_tensor(idx, device=self.logits.device)
        return TargetRows(self.tokens[idx], self.prev[idx], self.logits[dev], self.argmax[idx], self.token_prob[idx],
                          self.top_ids[idx], self.top_probs[idx], self.shown_ids[idx], self.shown_probs[idx],
                          None if self.features is None else self.features[dev])


def host_copy(*parts: torch.Tensor) -> list[np.ndarray]:
    """Several [n, k_i] tensors of one device brought to the host in one transfer (as float64, which holds token
    ids and float32 probabilities exactly), split back: one wait on a GPU instead of one a tensor."""
    widths = [p.shape[1] for p in parts]
    packed = torch.cat([p.double() for p in parts], dim=1).cpu().numpy()
    out, at = [], 0
    for w in widths:
        out.append(packed[:, at:at + w])
        at += w
    return out


def host_candidates(ids: torch.Tensor, probs: torch.Tensor) -> list[tuple[list[int], list[float]]]:
    """A draft step's top-m ids [r, m] and probabilities [r, m], one copy: each row's (ids, probabilities)."""
    i, p = host_copy(ids, probs)
    return list(zip(i.astype(np.int64).tolist(), p.tolist()))


def _first_max(top_ids: np.ndarray, top_values: np.ndarray, logits: torch.Tensor) -> np.ndarray:
    """Each row's argmax as ``argmax`` gives it (the lowest index among equal maxima), from its top-k: the first
    unless the first two tie, then the lowest tied index; where all k tie, the row's own argmax (another pass)."""
    argmax = top_ids[:, 0].copy()
    if top_ids.shape[1] < 2:
        return argmax
    tied_rows = np.flatnonzero(top_values[:, 1] == top_values[:, 0])
    if not len(tied_rows):  # the usual case, in one comparison
        return argmax
    for r in tied_rows:
        tied = top_values[r] == top_values[r, 0]
        argmax[r] = top_ids[r][tied].min() if not tied.all() else int(logits[r].argmax())
    return argmax


def top_probs(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` most probable next tokens of each row [n, V] (at most V): ids [n, k] (by logit, best first) and
    their softmax probabilities [n, k]; what ``softmax(logits).topk(k)`` gives, with :func:`top_k`'s cheaper top-k."""
    ids = top_k(logits, min(k, logits.shape[-1]))[1]  # [n, k]
    return ids, torch.softmax(logits, dim=-1).gather(1, ids)


#: Block width of :func:`top_k`'s first pass, and the vocabulary from which a CPU takes it.
TOPK_BLOCK, BLOCKED_FROM = 256, 16384


def top_k(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``logits.topk(k, dim=-1)`` (values, ids [n, k], best first), on a CPU over a large vocabulary in two passes.

    A CPU's top-k over 49,152 logits a row costs as much as a softmax; a row's maximum costs a tenth of it. So each
    row is cut into blocks of :data:`TOPK_BLOCK`, and the top-k is taken among the k blocks with the largest maxima
    (a row's k best logits lie in them: a logit in any other block has k blocks' maxima above or equal to it) and the
    tail past the last whole block. The same values; among equal logits the ids may come in another order, as
    ``topk`` promises none."""
    n, vocab = logits.shape
    nb = vocab // TOPK_BLOCK
    if logits.device.type != "cpu" or vocab < BLOCKED_FROM or k > nb // 4:
        return logits.topk(k, dim=-1)
    blocks = logits[:, :nb * TOPK_BLOCK].view(n, nb, TOPK_BLOCK)  # a view, no copy
    best = blocks.amax(dim=-1).topk(k, dim=-1).indices  # [n, k] the blocks with the largest maxima
    values = blocks[torch.arange(n, device=logits.device)[:, None], best].view(n, k * TOPK_BLOCK)  # their logits
    whole = k * TOPK_BLOCK
    if nb * TOPK_BLOCK < vocab:  # the tail's logits are candidates as they are
        values = torch.cat([values, logits[:, nb * TOPK_BLOCK:]], dim=1)
    top, at = values.topk(k, dim=-1)
    # a candidate's id: its block's start and its place in the block, or its place in the tail
    in_blocks = best.gather(1, (at // TOPK_BLOCK).clamp(max=k - 1)) * TOPK_BLOCK + at % TOPK_BLOCK
    return top, torch.where(at < whole, in_blocks, at - whole + nb * TOPK_BLOCK)


def target_rows(logits: torch.Tensor, tokens: np.ndarray, parent_rows: np.ndarray | None, prev: np.ndarray,
                k: int = 0, temperature: float = 0.0, probs: torch.Tensor | None = None,
                features: torch.Tensor | None = None) -> TargetRows:
    """Reduce ``logits`` [n, V] (fp32) for the rows that ran ``tokens`` [n]; ``parent_rows`` [n] (-1 for a root;
    None: each row's parent is the row before, as in a prefill chunk). ``k``: the widest top-k a drafter reads
    (:attr:`~specviz_core.drafters.base.Drafter.harvest_k`). With a ``temperature`` the record's probabilities are
    the tempered ones (``probs``: the tempered softmax when the caller has it already). ``features`` [n, F]: a draft
    head's features of the same rows, passed along."""
    n, vocab = logits.shape
    dev = logits.device
    kk = min(max(k, TOPK_SHOWN), vocab)
    values, ids = top_k(logits, kk)  # [n, K], most probable first
    probs_own = torch.softmax(logits, dim=-1)  # one fused pass: cheaper than a log-sum-exp on a CPU
    tempered = None
    if temperature > 0:
        tempered = probs if probs is not None else torch.softmax(logits / temperature, dim=-1)
    parts = [ids, probs_own.gather(1, ids), values]
    if n > 1:  # each row's token at its parent row, as one flat index (row 0 reads its own first: a root has none)
        parents = np.arange(-1, n - 1) if parent_rows is None else np.asarray(parent_rows)
        flat = parents.clip(min=0) * vocab + np.asarray(tokens, dtype=np.int64)
        own = (tempered if tempered is not None else probs_own).reshape(-1)[torch.from_numpy(flat).to(dev)]
        parts.append(own[:, None])
    if tempered is not None:
        shown = tempered.topk(min(TOPK_SHOWN, vocab), dim=-1)
        parts += [shown.indices, shown.values]
    # float32 holds token ids exactly (below 2**24) and the probabilities and logits as they are: one transfer.
    packed = torch.cat([p.float() for p in parts], dim=1).cpu().numpy().astype(np.float64)
    top_ids = packed[:, :kk].astype(np.int64)
    top_probs = packed[:, kk:2 * kk]
    argmax = _first_max(top_ids, packed[:, 2 * kk:3 * kk], logits)
    at = 3 * kk
    if n > 1:
        token_prob, at = packed[:, at].copy(), at + 1
        token_prob[0] = 0.0
    else:
        token_prob = np.zeros(1)
    if tempered is not None:
        s = min(TOPK_SHOWN, vocab)
        shown_ids = packed[:, at:at + s].astype(np.int64)
        shown_probs = packed[:, at + s:at + 2 * s]
    else:
        s = min(TOPK_SHOWN, kk)
        shown_ids, shown_probs = top_ids[:, :s], top_probs[:, :s]
    return TargetRows(np.asarray(tokens, dtype=np.int64), np.asarray(prev, dtype=np.int64), logits, argmax,
                      token_prob, top_ids, top_probs, shown_ids, shown_probs, features)

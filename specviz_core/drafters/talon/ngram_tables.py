"""Logit n-gram tables (STAND, seed 002, Section 4.1): the target's next-token distributions by context.

One table per n-gram length (1 to 4 by default). An entry maps the last n tokens
of a context to the top-k (k=10) next-token probabilities the target gave after
them, and how many times it was seen. Seeing the n-gram again merges the new
distribution as a running mean, ``k/(k+1) * old + 1/(k+1) * new`` (tokens not
stored count as probability 0), then keeps the top-k again, so memory stays
constant. Lookup tries the longest n-gram first.

Used by STAND and by the table drafter behind TALON and the EAGLE-style tree.
"""

from __future__ import annotations

from dataclasses import dataclass

Tail = tuple[int, ...]
"""The last tokens of a context (at most ``n_max``), oldest first."""


@dataclass
class Entry:
    ids: list[int]
    """Next-token ids, most probable first (at most k)."""
    probs: list[float]
    """Their running-mean probabilities (sum <= 1: the rest was truncated)."""
    count: int
    """Distributions merged into this entry so far."""


def merge_entry(old: Entry | None, ids: list[int], probs: list[float], k: int) -> Entry:
    """The running mean of ``old`` (seen ``old.count`` times) and one new distribution, re-truncated to top-k."""
    # Ordered by probability, then id: sorting (-p, id) pairs compares in C, with no key function called per item
    # (a TALON cycle merges a few hundred entries).
    if old is None:
        top = sorted(zip([-float(p) for p in probs], ids))[:k]
        return Entry([t for _, t in top], [-q for q, _ in top], 1)
    n = old.count
    acc = {t: p * n / (n + 1) for t, p in zip(old.ids, old.probs)}
    for t, p in zip(ids, probs):
        acc[t] = acc.get(t, 0.0) + p / (n + 1)
    top = sorted([(-p, t) for t, p in acc.items()])[:k]
    return Entry([t for _, t in top], [-q for q, _ in top], n + 1)


class NGramTables:
    def __init__(self, n_max: int = 4, k: int = 10) -> None:
        self.n_max = n_max
        self.k = k
        self.tables: list[dict[Tail, Entry]] = [{} for _ in range(n_max)]  # [n - 1]: n-gram -> entry
        self.merges = 0

    def __len__(self) -> int:
        return sum(len(t) for t in self.tables)

    def tail(self, ids: list[int] | Tail) -> Tail:
        return tuple(int(t) for t in ids[-self.n_max:])

    def update(self, tail: Tail, ids: list[int], probs: list[float]) -> None:
        """Merge one observed next-token distribution into every n-gram ending the context ``tail``."""
        for n in range(1, min(self.n_max, len(tail)) + 1):
            key = tail[-n:]
            table = self.tables[n - 1]
            table[key] = merge_entry(table.get(key), ids, probs, self.k)
        self.merges += 1

    def lookup(self, tail: Tail) -> tuple[Entry | None, int]:
        """The entry of the longest stored n-gram ending ``tail``, and its n (0 when none matches)."""
        for n in range(min(self.n_max, len(tail)), 0, -1):
            e = self.tables[n - 1].get(tail[-n:])
            if e is not None:
                return e, n
        return None, 0

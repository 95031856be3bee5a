"""Goose's spine source: context matching over the prompt and every committed token.

An index of n-gram start positions (lengths longest first, 5, 4, 3 by default) over the pool of
committed tokens, grown as tokens are committed. Only occurrences followed by at least one token are
indexed, so the context's own suffix is never its own match. A lookup takes the longest length
whose suffix n-gram occurred before and copies what followed its **first** occurrence (the official
implementation's choice; ``occurrence="last"`` copies the most recent one).

Consensus, two readings:

- ``occurrences`` (the official code): the longest length with an occurrence has two or more of
  them, and every one is followed by the same token;
- ``ngram_lengths`` (the paper's Section 4.3 and Appendix B.2): two or more lengths return
  continuations that agree on the first token. Nested n-grams at one position always agree, so
  under this reading nearly every match is consensual.

Confidence (Section 4.3, the official schedule) turns the match length and consensus into [0, 1];
above 0.6 the chain is grown by matching again from the end of what is drafted so far.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

#: Above this confidence a context match is grown by repeated matching (Section 4.3).
CHAIN_EXTENSION_CONFIDENCE = 0.6


@dataclass(frozen=True)
class Match:
    """One lookup: where the suffix n-gram occurred and what was copied (token spans of the pool, end exclusive)."""

    ngram: int
    match_start: int
    copy_start: int
    copy_end: int
    tokens: tuple[int, ...]

    @property
    def match_end(self) -> int:
        return self.match_start + self.ngram

    def as_state(self) -> dict[str, object]:
        return {"ngram": self.ngram, "match_span": [self.match_start, self.match_end],
                "copy_span": [self.copy_start, self.copy_end]}


def match_confidence(chain_len: int, consensus: bool, long_match: int) -> float:
    """The confidence schedule: 0 without a chain; 1 with consensus; a long chain 0.7 rising to 0.9 at
    ``long_match + 12`` tokens; a shorter one ``0.6 * len / long_match``."""
    if chain_len == 0:
        return 0.0
    if consensus:
        return 1.0
    if chain_len >= long_match:
        return min(0.9, 0.7 + 0.2 * (chain_len - long_match) / 12.0)
    return 0.6 * chain_len / long_match


@dataclass
class ContextIndex:
    """Start positions of every n-gram of the committed pool, per length (longest first)."""

    lengths: tuple[int, ...]
    occurrence: str = "first"
    consensus_rule: str = "occurrences"
    pool: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._index: dict[int, dict[tuple[int, ...], list[int]]] = {n: defaultdict(list) for n in self.lengths}

    @property
    def window(self) -> int:
        """Tokens of the suffix a lookup reads."""
        return self.lengths[0]

    def reset(self) -> None:
        self.pool = []
        self.__post_init__()

    def sync(self, ids: Sequence[int]) -> None:
        """Catch up with the committed tokens ``ids`` (the pool only ever grows; anything else starts over)."""
        n = len(self.pool)
        if len(ids) < n or (n and ids[n - 1] != self.pool[-1]):
            self.reset()
            n = 0
        self.extend([int(t) for t in ids[n:]])

    def extend(self, tokens: Sequence[int]) -> None:
        if not tokens:
            return
        start = len(self.pool)
        self.pool.extend(tokens)
        for n, index in self._index.items():
            # Starts from start - n on: the n-grams that now have a token after them.
            for i in range(max(0, start - n), len(self.pool) - n):
                index[tuple(self.pool[i:i + n])].append(i)

    def _hits(self, suffix: Sequence[int]) -> list[tuple[int, list[int]]]:
        """(n, positions) for every length whose suffix n-gram occurred, longest first."""
        out = []
        for n in self.lengths:
            if len(suffix) >= n:
                positions = self._index[n].get(tuple(suffix[-n:]))
                if positions:
                    out.append((n, positions))
        return out

    def match(self, suffix: Sequence[int], max_chain: int) -> Match | None:
        """What followed the longest suffix n-gram that occurred before, up to ``max_chain`` tokens."""
        hits = self._hits(suffix)
        if not hits:
            return None
        n, positions = hits[0]
        start = positions[0] if self.occurrence == "first" else positions[-1]
        copy = tuple(self.pool[start + n:start + n + max_chain])
        return Match(n, start, start + n, start + n + len(copy), copy)

    def consensus(self, suffix: Sequence[int]) -> bool:
        hits = self._hits(suffix)
        if not hits:
            return False
        if self.consensus_rule == "occurrences":
            n, positions = hits[0]
            return len(positions) >= 2 and len({self.pool[p + n] for p in positions}) == 1
        # The paper's reading: two or more lengths agree on the first continuation token.
        firsts = [self.pool[(ps[0] if self.occurrence == "first" else ps[-1]) + n] for n, ps in hits]
        return max(firsts.count(t) for t in set(firsts)) >= 2


@dataclass
class Extension:
    """A chain grown by repeated matching."""

    chain: list[int]
    """The first match's tokens followed by every extension's."""
    pieces: list[Match]
    """The extra lookups, in order (their spans index the pool)."""


def extend_chain(index: ContextIndex, ids_tail: Sequence[int], chain: Sequence[int], confidence: float,
                 max_extended_chain: int, max_chain: int, long_match: int) -> Extension:
    """Grow a confident chain by matching again from the end of the drafted text (Section 4.3).

    Up to ``int(max_extended_chain * confidence)`` tokens: each lookup's suffix is the committed
    context followed by what is drafted so far, matched against the committed pool only, and its whole
    continuation is appended (so the chain may overshoot by up to ``max_chain - 1``). A saturated cycle
    (confidence 1) keeps growing only while each further lookup is itself consensual (judged at the
    position it was made from, before appending); any other cycle grows until the limit or no match.
    """
    limit = int(max_extended_chain * confidence)
    saturated = confidence >= 1.0
    out = Extension(list(chain), [])
    drafted = list(ids_tail[-index.window:]) + list(chain)
    while len(out.chain) < limit:
        m = index.match(drafted, max_chain)
        if m is None or not m.tokens:
            break
        keep_going = not saturated or match_confidence(len(m.tokens), index.consensus(drafted), long_match) >= 1.0
        out.chain.extend(m.tokens)
        out.pieces.append(m)
        drafted = drafted[-index.window:] + list(m.tokens)
        if not keep_going:
            break
    return out

"""The draft tree a drafter builds, and its flattening into a verify block.

A drafter appends nodes to a :class:`DraftTree` (parents before children); the
engine flattens the verified ones into a verify order, builds the tree attention
mask and the position ids, and later turns the tree into immutable
:class:`~specviz_core.records.Node` values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

#: Candidates kept in an offer beyond the last drafted one.
OFFER_EXTRA = 6


@dataclass
class DraftTree:
    """A draft tree under construction. Node 0 is the root (the anchor token)."""

    root_token: int
    mode: str = "tree"
    """``ar``, ``chain``, ``tree`` or ``bypass``; the drafter says which."""
    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    gated: list[bool] = field(default_factory=list)
    draft_q: dict[int, torch.Tensor] = field(default_factory=dict)
    """Optional draft distribution a node was sampled from ([V] probs), keyed by node id.
    Nodes without an entry are deterministic drafts (q is one-hot). Siblings with an entry
    were drawn without replacement in child order: each from q with its earlier siblings'
    tokens removed (the sampling walk removes them again when it tries the next child)."""
    state: dict[str, Any] = field(default_factory=dict)
    """Method state worth recording for this cycle (match span, draft forwards, ...)."""
    offers: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    """What each source offered below a node, keyed by node id: see :meth:`offer`. The engine records the offers
    at the nodes of the accepted path, so "why did this cycle stop" is decided from recorded data."""
    lazy_offers: Callable[[list[int]], None] | None = None
    """Optional: fills :attr:`offers` for the given node ids. The engine calls it with the accepted path right
    after the walk, before the target's rows are harvested, so a drafter whose lists are table rows reads them as
    they were when it drafted, and pays only for the nodes that are recorded."""

    def __post_init__(self) -> None:
        if not self.tokens:
            self.tokens.append(int(self.root_token))
            self.parents.append(-1)
            self.depths.append(0)
            self.sources.append("root")
            self.scores.append(1.0)
            self.gated.append(False)

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, parent: int, token: int, source: str, score: float = 1.0, gated: bool = False) -> int:
        """Append a child of ``parent`` and return its node id."""
        if not 0 <= parent < len(self.tokens):
            raise ValueError(f"parent {parent} does not exist")
        if self.gated[parent] and not gated:
            raise ValueError("a verified node cannot hang under a gated one")
        self.tokens.append(int(token))
        self.parents.append(parent)
        self.depths.append(self.depths[parent] + 1)
        self.sources.append(source)
        self.scores.append(float(score))
        self.gated.append(bool(gated))
        return len(self.tokens) - 1

    def add_chain(self, tokens: list[int], source: str, parent: int = 0, scores: list[float] | None = None) -> list[int]:
        """Append a linear chain below ``parent``; returns the new node ids."""
        ids = []
        for i, t in enumerate(tokens):
            parent = self.add(parent, t, source, 1.0 if scores is None else scores[i])
            ids.append(parent)
        return ids

    def offer(self, node: int, source: str, tokens: list[int], scores: list[float], fates: list[str],
              threshold: float | None = None, note: str = "") -> None:
        """Record a source's candidate list below ``node``, best first, and the fate of each candidate
        (``records.FATES``): ``drafted`` (a verified child), ``gate`` (cut by a confidence gate: ``threshold`` is what
        its score was compared with), ``budget`` (cut by the node budget or a depth limit), ``width`` (not drafted:
        the tree's width at this node was smaller). Kept: every drafted candidate and up to
        :data:`OFFER_EXTRA` more."""
        if not (len(tokens) == len(scores) == len(fates)):
            raise ValueError("an offer's tokens, scores and fates differ in length")
        last = max((i for i, f in enumerate(fates) if f == "drafted"), default=-1)
        n = max(last + 1, 0) + OFFER_EXTRA
        entry: dict[str, Any] = {"source": source, "tokens": [int(t) for t in tokens[:n]],
                                 "scores": [round(float(x), 6) for x in scores[:n]], "fates": list(fates[:n])}
        if threshold is not None:
            entry["threshold"] = round(float(threshold), 6)
        if note:
            entry["note"] = note
        self.offers.setdefault(node, []).append(entry)

    def children(self, node: int) -> list[int]:
        return [i for i, p in enumerate(self.parents) if p == node]

    @property
    def n_verified(self) -> int:
        return len(self.gated) - sum(self.gated)

    @property
    def max_depth(self) -> int:
        return max(d for d, g in zip(self.depths, self.gated) if not g)


@dataclass(frozen=True)
class VerifyBlock:
    """A flattened tree, ready for one target forward. n = verified nodes, root first."""

    order: np.ndarray  # [n] node ids in verify order
    tokens: np.ndarray  # [n] token ids
    depths: np.ndarray  # [n] depth of each row
    parent_rows: np.ndarray  # [n] row index of each row's parent, -1 for the root
    mask: np.ndarray  # [n, n] bool: row i may attend to row j (ancestors and itself)

    def positions(self, cache_len: int) -> np.ndarray:
        """Position ids [n]: ``cache_len + depth``; siblings share a position."""
        return cache_len + self.depths


def flatten(tree: DraftTree) -> VerifyBlock:
    """Lay the verified nodes out root first, each after its parent, with their mask."""
    # Node ids are created parent-first, so id order is already a valid verify order; a verified node's parent is
    # verified (``DraftTree.add``), so every row but the root's has a parent row.
    order = [i for i, g in enumerate(tree.gated) if not g]
    n = len(order)
    if n == 1:  # a plain cycle: the root alone
        return VerifyBlock(order=np.zeros(1, dtype=np.int64), tokens=np.array(tree.tokens[:1], dtype=np.int64),
                           depths=np.zeros(1, dtype=np.int64), parent_rows=np.full(1, -1, dtype=np.int64),
                           mask=np.ones((1, 1), dtype=bool))
    if n == len(tree):  # nothing gated: each node is its own row
        parent_rows = tree.parents
    else:
        row_of = {node: row for row, node in enumerate(order)}
        parents = tree.parents
        parent_rows = [row_of[parents[i]] if i else -1 for i in order]
    rows = np.array(order, dtype=np.int64)
    pr = np.array(parent_rows, dtype=np.int64)
    depths = np.array(tree.depths, dtype=np.int64)[rows]
    return VerifyBlock(order=rows, tokens=np.array(tree.tokens, dtype=np.int64)[rows], depths=depths, parent_rows=pr,
                       mask=ancestor_mask(pr))


def ancestor_mask(parent_rows: np.ndarray) -> np.ndarray:
    """[n, n] bool: each row sees its ancestors and itself (parents before children). A chain is the lower triangle;
    a tree's rows are bit sets in plain integers (a row's is its parent's and its own bit), unpacked in one pass:
    a deep, narrow tree such as Goose's 20-token spine took a few array operations a depth before, about ten times
    as long."""
    n = len(parent_rows)
    at = np.arange(n)
    if n == 0 or (parent_rows == at - 1).all():
        return at[:, None] >= at
    bits = [0] * n
    for row, parent in enumerate(parent_rows.tolist()):
        bits[row] = (bits[parent] if parent >= 0 else 0) | (1 << row)
    width = (n + 7) // 8
    packed = np.frombuffer(b"".join(b.to_bytes(width, "little") for b in bits), dtype=np.uint8).reshape(n, width)
    return np.unpackbits(packed, axis=1, count=n, bitorder="little").view(bool)

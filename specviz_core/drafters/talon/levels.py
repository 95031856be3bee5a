"""A level-by-level draft tree drafted on the device and read back once (EAGLE's dynamic tree, the static tree).

Where a head or a draft model drafts (:attr:`NextTokenSource.on_device`), each level's top candidates stay tensors,
and the choice of the frontier to expand next (the best paths, by a stable sort) is made there too, as EAGLE's
official code drafts: nothing is read back while the levels are drafted. Then one copy brings every level to the host
(:func:`read_back`), and the method's own tree builder runs over them as it runs over the n-gram tables' lists
(:class:`Replay`): the same builder, the same record, whichever way the levels came. The builder's choices are
checked against the device's as it asks for each level (the frontier's tokens), so a disagreement is an error, never
a record of a tree that was not drafted.

The methods whose widths depend on the values (TALON's confidence gate) draft on the host a level at a time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from specviz_core.drafters.talon.next_token import Candidates, NextTokenSource
from specviz_core.errors import SpecVizError
from specviz_core.target_rows import host_copy
from specviz_core.tree import DraftTree


@dataclass
class Level:
    """One level's candidates on the device: the top ids [f, s] and probabilities [f, s] after each of the ``f`` rows
    it expanded, the path log-probabilities the device ranked them by (or None where the builder multiplies
    probabilities, exactly as the device does), and the tokens of the rows expanded ([f]; None for the root's)."""

    ids: torch.Tensor
    q: torch.Tensor
    logp: torch.Tensor | None = None
    tokens: torch.Tensor | None = None


def read_back(source: NextTokenSource, levels: list[Level], t0: float) -> Replay:
    """Every level brought to the host in one copy; the drafting's time since ``t0`` (``perf_counter``), the copy's
    wait included, is added to the source's step time."""
    parts = [t.reshape(1, -1) for lv in levels for t in (lv.ids, lv.q, lv.logp, lv.tokens) if t is not None]
    flat = iter(a[0] for a in host_copy(*parts))
    host = []
    for lv in levels:
        ids, q = next(flat), next(flat)
        logp = next(flat) if lv.logp is not None else None
        tokens = next(flat).astype(np.int64).tolist() if lv.tokens is not None else None
        f = len(tokens) if tokens is not None else 1
        rows = [(i.tolist(), p.tolist()) + ((lp.tolist(),) if logp is not None else ())
                for i, p, lp in zip(ids.astype(np.int64).reshape(f, -1), q.reshape(f, -1),
                                    logp.reshape(f, -1) if logp is not None else [None] * f)]
        host.append((tokens, rows))
    source.step_ms += (time.perf_counter() - t0) * 1000.0
    return Replay(source, host)


class Replay(NextTokenSource):
    """The levels read back, handed to a tree builder as a source: ``root`` gives the first, each ``expand`` the
    next, after checking that the builder expands the rows the device drafted below, in the same order. Each row's
    candidates are (ids, probabilities) or, where the device ranked by them, (ids, probabilities, path
    log-probabilities). ``run`` lists the nodes expanded, in the order their rows were run."""

    def __init__(self, source: NextTokenSource, levels: list[tuple[list[int] | None, list[Candidates]]]) -> None:
        super().__init__()
        self.kind, self.node_source = source.kind, source.node_source  # type: ignore[misc]
        self.levels = levels
        self.at = 0
        self.run: list[int] = []

    def root(self, ctx, m: int) -> Candidates:
        self.at = 1
        return self.levels[0][1][0]

    def expand(self, tree: DraftTree, nodes: list[int], m: int) -> list[Candidates]:
        if self.at >= len(self.levels):
            raise SpecVizError(f"the tree builder asked for level {self.at + 1}, past the {len(self.levels)} drafted")
        tokens, rows = self.levels[self.at]
        if [tree.tokens[n] for n in nodes] != tokens:
            raise SpecVizError(f"the tree builder expanded other nodes at level {self.at + 1} than were drafted on "
                               f"the device ({[tree.tokens[n] for n in nodes]} against {tokens})")
        self.at += 1
        self.run += nodes
        return rows

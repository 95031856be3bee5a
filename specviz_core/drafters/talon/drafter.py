"""TALON: budget-driven adaptive draft trees (seed 001; Section 5, Algorithm 2).

The tree grows layer by layer until it holds N draft nodes (the token budget):

- layer 1 (robust initialization): the top-K (K=10) children of the root,
  whatever their probabilities, because a small drafter is often over-confident
  at the root and a wrong root collapses the whole draft;
- every deeper layer (confidence gating): the candidate pool is every child of
  every node of the previous layer, each with its cumulative path probability
  p(u) = p(parent) * P(token | parent); a candidate is kept when
  p(u) >= mu * max p over the pool (mu = 0.03), and if more are kept than the
  budget has room for, only the highest path scores stay.

On a near-deterministic context the best path dominates every pool and the gate
lets one child through: a deep, narrow chain. On an uncertain one many
candidates sit near the best: a shallow, wide tree. Candidates cut by the gate
or the budget are recorded as gated nodes (the best ``gated_shown`` per layer,
score = path probability). Draft efficiency delta = draft steps (draft forwards
for a model) per target forward is recorded in every cycle's state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from specviz_core.drafters.base import DraftContext
from specviz_core.drafters.talon.next_token import Candidates, NextTokenSource, SourcedDrafter
from specviz_core.methods.talon import CARD, TalonParams
from specviz_core.tree import DraftTree


def pool_of(frontier: list[int], cands: list[Candidates], score: dict[int, float]) -> list[tuple[float, int, int]]:
    """Every child of every frontier node as (path probability, parent, token), best first (stable)."""
    pool = [(score[v] * q, v, w) for v, (ws, qs) in zip(frontier, cands) for w, q in zip(ws, qs)]
    pool.sort(key=lambda c: -c[0])
    return pool


def add_layer(tree: DraftTree, kept: list[tuple[float, int, int]], cut: list[tuple[float, int, int]], source: str,
              score: dict[int, float], gated_shown: int) -> list[int]:
    """Append a layer's kept candidates (verified) and its best cut ones (gated); returns the kept node ids."""
    new = []
    for s, parent, tok in kept:
        nid = tree.add(parent, tok, source, s)
        score[nid] = s
        new.append(nid)
    for s, parent, tok in cut[:gated_shown]:
        tree.add(parent, tok, source, s, gated=True)
    return new


def offer_layer(tree: DraftTree, source: str, frontier: list[int], cands: list[Candidates], score: dict[int, float],
                fate: dict[tuple[int, int], str], threshold: float | None) -> None:
    """Record each frontier node's candidate list (path scores) and what became of each candidate."""
    for v, (ws, qs) in zip(frontier, cands):
        tree.offer(v, source, list(ws), [score[v] * q for q in qs], [fate.get((v, w), "width") for w in ws],
                   threshold=threshold)


def fates_of(kept: list[tuple[float, int, int]], gated: list[tuple[float, int, int]],
             budget_cut: list[tuple[float, int, int]]) -> dict[tuple[int, int], str]:
    """(parent, token) -> fate for a layer's pool: kept, cut by the gate, cut by the budget (the rest: width)."""
    fate = {(v, w): "gate" for _, v, w in gated}
    fate.update({(v, w): "budget" for _, v, w in budget_cut})
    fate.update({(v, w): "drafted" for _, v, w in kept})
    return fate


def grow_talon(tree: DraftTree, source: NextTokenSource, root: Candidates, p: TalonParams, max_depth: int
               ) -> dict[str, Any]:
    """Algorithm 2 on ``tree`` (root only); ``root`` is the root's next-token candidates. Returns shape stats."""
    score = {0: 1.0}
    frontier, cands = [0], [root]
    used, depth, widths, gated, passed = 0, 0, [], 0, []
    ended = "budget"
    m_d = 1.0
    while used < p.budget and depth < max_depth:
        pool = pool_of(frontier, cands, score)
        if not pool:
            ended = "empty"
            break
        if depth == 0:  # robust initialization: the root's width is K
            kept, cut, gate_cut, threshold = pool[: p.top_k], pool[p.top_k:], [], None
        else:  # confidence gating, relative to the layer's anchor m_d
            m_d = pool[0][0]
            threshold = p.mu * m_d
            n_pass = sum(1 for c in pool if c[0] >= threshold)
            kept, cut = pool[:n_pass], pool[n_pass:]
            gate_cut = cut
        room = p.budget - used
        passed.append(len(kept))
        budget_cut = kept[room:]
        if len(kept) > room:  # the budget cut, by path score
            kept, cut = kept[:room], kept[room:] + cut
        offer_layer(tree, source.node_source, frontier, cands, score, fates_of(kept, gate_cut, budget_cut), threshold)
        frontier = add_layer(tree, kept, cut, source.node_source, score, p.gated_shown)
        gated += len(gate_cut)
        used += len(frontier)
        widths.append(len(frontier))
        depth += 1
        if used >= p.budget or depth >= max_depth:
            ended = "budget" if used >= p.budget else "depth"
            break
        # Children of the next layer: one draft step. A parent can pass at most `room` children.
        cands = source.expand(tree, frontier, max(p.top_k, p.budget - used))
    return {"depth": depth, "layer_widths": widths, "layer_passed": passed, "width": max(widths, default=0),
            "nodes": used, "gated": gated, "ended_by": ended, "mu": p.mu, "anchor": m_d}


class TalonDrafter(SourcedDrafter):
    card = CARD

    def draft(self, ctx: DraftContext) -> DraftTree:
        p: TalonParams = self.params
        steps0 = self.begin(ctx)
        tree = DraftTree(root_token=ctx.ids[-1], mode="tree")
        p = replace(p, budget=self.cycle_budget(ctx))  # budget=auto may lower it this cycle
        root = self.source.root(ctx, max(p.top_k, p.budget))
        tree.state = grow_talon(tree, self.source, root, p, ctx.max_depth)
        if tree.n_verified == 1:
            tree.mode = "ar"
        self.finish(tree, steps0)
        return tree

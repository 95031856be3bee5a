"""EAGLE-2's dynamic draft tree, as the official code drafts it (``topK_genrate`` in SafeAILab/EAGLE's ``cnets.py``).

- The root's top-k children are the first level; each candidate's score is its path's summed log-probability.
- Then ``depth`` times: every node of the frontier (the k chosen at the last level) drafts its top-k children
  (k x k candidates, one draft step), and the k most probable of them by path become the next frontier. The
  others stay candidates, never expanded.
- Reranking: of every candidate drafted (k + depth x k x k), the ``budget`` most probable by path are verified
  (the official total_token counts the root: 60 = root + 59). A child never outscores its parent, so they form a
  tree.
- SpecViz stops drafting early where the official code drafts on: once the frontier's most probable path is no
  better than the ``budget``-th candidate so far, no deeper candidate could be verified, so the verified tree is the
  official one with fewer draft steps (recorded as ``stopped_early``, the level it stopped at).
- With a head or a draft model the levels are drafted on the device and read back once (:mod:`..levels`), as the
  official code drafts; where a read waits for the device (a GPU) the early stop is not read either: the levels past
  it are drafted and not written down, so the record is the same.

In the record, every node's score is its path probability; the candidates the reranking cut are gated nodes (the
most probable ``gated_shown`` per level); each expanded node's offer gives its k children with their fate
(``drafted``, or ``budget`` with the cut line as its threshold and the note ``rerank``); a verified node left
unexpanded has an empty offer whose note says why (not among the k most probable of its level, or the depth limit),
which is what "why did this cycle stop" reads.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from specviz_core.drafters.base import DraftContext
from specviz_core.drafters.draft_tree import TreeRows
from specviz_core.drafters.talon.levels import Level, Replay, read_back
from specviz_core.drafters.talon.next_token import Candidates, NextTokenSource, SourcedDrafter
from specviz_core.methods.eagle import CARD, EagleParams
from specviz_core.tree import DraftTree

RERANK = "rerank"
"""The note on an offer whose ``budget`` fates are the reranking's cut (the threshold is the cut line)."""


@dataclass
class _Cand:
    """One drafted candidate: its path's log-probability, parent node, token, level, and order of drafting."""

    logp: float
    parent: int
    token: int
    level: int
    order: int
    node: int = -1
    """Its node id once it is in the tree."""


def _ranked(cands: list[_Cand]) -> list[_Cand]:
    """Most probable path first; on a tie the one drafted first (shallower, then its parent's rank, then its own)."""
    return sorted(cands, key=lambda c: (-c.logp, c.order))


def _log(q: float) -> float:
    return math.log(q) if q > 0 else -math.inf


class EagleDrafter(SourcedDrafter):
    card = CARD

    def draft(self, ctx: DraftContext) -> DraftTree:
        p: EagleParams = self.params
        steps0 = self.begin(ctx)
        tree = DraftTree(root_token=ctx.ids[-1], mode="tree")
        src = self.source.node_source
        k = p.top_k
        depth = max(min(p.depth, ctx.max_depth - 1), 0)  # the tree has depth + 1 levels
        n_keep = self.cycle_budget(ctx)  # budget=auto may lower the budget this cycle
        source = self._on_device(ctx, k, depth, n_keep) if self.source.on_device else self.source
        cands: list[_Cand] = []
        by_parent: dict[int, list[_Cand]] = {}

        def draft_below(parents: list[int], lists: list[Candidates], level: int, base: dict[int, float]) -> None:
            for v, cand in zip(parents, lists):  # (ids, q), or (ids, q, path log-probabilities) from the device
                ws, qs = cand[0][:k], cand[1][:k]
                lps = cand[2][:k] if len(cand) > 2 else [base[v] + _log(q) for q in qs]  # type: ignore[misc]
                kids = [_Cand(lp, v, int(w), level, len(cands) + i) for i, (w, lp) in enumerate(zip(ws, lps))]
                cands.extend(kids)
                by_parent[v] = kids

        logp = {0: 0.0}
        draft_below([0], [source.root(ctx, k)], 1, logp)
        frontier_c = _ranked(cands)[:k]  # level 1: the root's k children, all expanded
        expanded = [0]
        stopped = None  # the level whose frontier was not expanded: nothing below it could be kept
        for level in range(2, depth + 2):
            if not frontier_c:
                break
            # A child's path is never more probable than its parent's, and a tie goes to the one drafted first: once
            # the frontier's best is no better than the budget's last kept candidate so far, no deeper step can
            # change the verified tree. Stop there (the reranking keeps the same nodes; fewer head steps).
            if len(cands) >= n_keep > 0 and frontier_c[0].logp <= _ranked(cands)[n_keep - 1].logp:
                stopped = level - 1
                break
            frontier = []
            for c in frontier_c:  # an expanded node is in the tree now (its children's draft step reads it)
                c.node = tree.add(c.parent, c.token, src, math.exp(c.logp))
                logp[c.node] = c.logp
                frontier.append(c.node)
            expanded += frontier
            level_start = len(cands)
            draft_below(frontier, source.expand(tree, frontier, k), level, logp)
            frontier_c = _ranked(cands[level_start:])[:k] if level <= depth else []
        ranked = _ranked(cands)
        kept, cut = ranked[:n_keep], ranked[n_keep:]
        cut_line = kept[-1].logp if kept and cut else None
        kept_set = {id(c) for c in kept}
        # The verified nodes: expanded ones stay, the others join (parents precede children: a parent outranks).
        for c in sorted(kept, key=lambda c: c.order):
            if c.node < 0:
                c.node = tree.add(c.parent, c.token, src, math.exp(c.logp))
        for c in cands:  # an expanded node the reranking cut is gated (and so its subtree)
            if c.node >= 0 and id(c) not in kept_set:
                tree.gated[c.node] = True
        shown: dict[int, int] = {}
        for c in cut:  # the reranking's cut, the most probable first, a few per level
            if c.node < 0 and shown.get(c.level, 0) < p.gated_shown and not tree.gated[c.parent]:
                c.node = tree.add(c.parent, c.token, src, math.exp(c.logp), gated=True)
                shown[c.level] = shown.get(c.level, 0) + 1
        for i in range(1, len(tree)):
            if tree.gated[tree.parents[i]]:
                tree.gated[i] = True
        threshold = math.exp(cut_line) if cut_line is not None else None
        for v, kids in by_parent.items():
            tree.offer(v, src, [c.token for c in kids], [math.exp(c.logp) for c in kids],
                       ["drafted" if id(c) in kept_set else "budget" for c in kids], threshold=threshold, note=RERANK)
        _note_leaves(tree, src, cands, kept, set(expanded), depth, k, stopped, n_keep)
        verified = [n for n in range(1, len(tree)) if not tree.gated[n]]  # a kept child of a cut parent is not
        tree.state = {"depth": max((tree.depths[n] for n in verified), default=0), "nodes": len(verified),
                      "candidates": len(cands), "expanded": len(expanded), "pruned": len(cut),
                      "rerank_cut": threshold, **({"stopped_early": stopped} if stopped is not None else {})}
        if tree.n_verified == 1:
            tree.mode = "ar"
        if isinstance(source, Replay):
            self.source.ran(source.run)
        self.finish(tree, steps0)
        return tree

    def _on_device(self, ctx: DraftContext, k: int, depth: int, n_keep: int) -> NextTokenSource:
        """The levels :meth:`draft` asks for, drafted on the device as the official ``topK_genrate`` drafts them
        (each level's k best paths by a stable sort, the same order as :func:`_ranked`) and read back once. Where a
        read costs nothing (a CPU) drafting stops where :meth:`draft` will find it could (the same test, on the same
        float64 path log-probabilities)."""
        t0 = time.perf_counter()
        source: NextTokenSource = self.source
        ids, q = source.top_root(ctx, k)  # [1, s]
        logp = torch.log(q.double())  # [1, s] path log-probabilities
        levels = [Level(ids, q, logp)]
        rows = TreeRows(ids.device)
        parents = rows.root  # the rows of this level's parents ([f])
        every = logp.reshape(-1)  # every candidate's, in drafting order
        for level in range(2, depth + 2):
            flat = logp.reshape(-1)
            if not self.reads_wait and 0 < n_keep <= len(every) and bool(flat.max() <= every.topk(n_keep).values[-1]):
                break  # no deeper candidate could be kept (draft's own early stop)
            pick = torch.sort(flat, descending=True, stable=True).indices[:k]  # the next frontier, best first
            parent_rows = parents[torch.div(pick, ids.shape[1], rounding_mode="floor")]
            tokens = ids.reshape(-1)[pick]
            ids, q = source.top_level(parent_rows, tokens, level - 1, rows.add(parent_rows), k)
            logp = flat[pick][:, None] + torch.log(q.double())
            parents = rows.last(len(pick))
            every = torch.cat([every, logp.reshape(-1)])
            levels.append(Level(ids, q, logp, tokens))
        return read_back(source, levels, t0)


def _note_leaves(tree: DraftTree, src: str, cands: list[_Cand], kept: list[_Cand], expanded: set[int], depth: int,
                 k: int, stopped: int | None = None, n_keep: int = 0) -> None:
    """An empty offer on each verified node nothing was drafted below, saying why (``stopped``: the level whose
    frontier drafting stopped at, nothing below it able to enter the ``n_keep`` verified)."""
    rank_at: dict[int, dict[int, int]] = {}
    for c in cands:
        rank_at.setdefault(c.level, {})
    for level in rank_at:
        for r, c in enumerate(_ranked([c for c in cands if c.level == level]), 1):
            rank_at[level][id(c)] = r
    for c in kept:
        if c.node in expanded or tree.gated[c.node]:
            continue
        if stopped is not None and c.level >= stopped:
            why = (f"drafting stopped at level {stopped}: the best path there was no more probable than the last of "
                   f"the {n_keep} the budget keeps, so no deeper node could be verified")
        elif c.level > depth:
            why = f"the depth limit: depth={depth} expansions after the root's"
        else:
            why = (f"not expanded: its path ranked {rank_at[c.level][id(c)]} at its level, and only the top_k={k} "
                   "most probable are drafted below")
        tree.offer(c.node, src, [], [], [], note=why)

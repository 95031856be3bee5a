"""The EAGLE-style static tree: TALON's baseline (seed 001, Algorithm 1).

Expand-then-shrink, layer by layer to a fixed depth D (8): every parent of the
layer expands its top-K (10) children, scored by cumulative path probability;
the best K of those K x K become the next layer's parents. At the end the whole
tree is pruned to the N (60) nodes with the highest path scores. The shape is
fixed (K nodes a layer, D layers) whatever the context: that is the point of
comparison with TALON. Nodes pruned at the end, and the best cut candidates of
each shrink, are recorded as gated.

Which nodes the final pruning chooses from: the seed's Algorithm 1 adds only
each layer's K survivors to the tree and prunes those (``rerank=survivors``, the
default); EAGLE-2's released code reranks over every candidate it expanded, the
layers' cut candidates included (``rerank=all``). A candidate's parent was a
survivor with a higher path score, so either choice is a tree.

With a head or a draft model the layers are drafted on the device and read back once (:mod:`..levels`): each
layer's K best by a stable sort of the same float64 products the host ranks by.
"""

from __future__ import annotations

import time

import torch

from specviz_core.drafters.base import DraftContext
from specviz_core.drafters.draft_tree import TreeRows
from specviz_core.drafters.talon.drafter import add_layer, fates_of, offer_layer, pool_of
from specviz_core.drafters.talon.levels import Level, Replay, read_back
from specviz_core.drafters.talon.next_token import NextTokenSource, SourcedDrafter
from specviz_core.methods.eagle_static import CARD, EagleStaticParams
from specviz_core.tree import DraftTree


class EagleStaticDrafter(SourcedDrafter):
    card = CARD

    def draft(self, ctx: DraftContext) -> DraftTree:
        p: EagleStaticParams = self.params
        steps0 = self.begin(ctx)
        tree = DraftTree(root_token=ctx.ids[-1], mode="tree")
        depth = min(p.depth, ctx.max_depth)
        source = self._on_device(ctx, p.top_k, depth) if self.source.on_device else self.source
        score = {0: 1.0}
        frontier, cands = [0], [source.root(ctx, p.top_k)]
        layered: list[int] = []  # every node that made a layer, in layer order
        candidates: list[int] = []  # rerank=all: the layers' cut candidates, which the final pruning may choose too
        for d in range(1, depth + 1):
            pool = pool_of(frontier, [(ws[: p.top_k], qs[: p.top_k]) for ws, qs in cands], score)
            if not pool:
                break
            # A parent offers its top-K (the rest: width); the layer keeps the K best of them (the rest: budget).
            offer_layer(tree, self.source.node_source, frontier, cands, score,
                        fates_of(pool[: p.top_k], [], pool[p.top_k:]), None)
            cut = pool[p.top_k:]
            shown = len(cut) if p.rerank == "all" else p.gated_shown  # all: every candidate may still be chosen
            first_cut = len(tree) + len(pool[: p.top_k])
            frontier = add_layer(tree, pool[: p.top_k], cut, self.source.node_source, score, shown)
            layered += frontier
            if p.rerank == "all":
                for nid, (s_, _, _) in zip(range(first_cut, len(tree)), cut):
                    score[nid] = s_
                    candidates.append(nid)
            if d < depth:
                cands = source.expand(tree, frontier, p.top_k)
        # Final pruning to the N best path scores. A child never outscores its parent; on a tie
        # the shallower node wins, so the kept nodes form a tree.
        ranked = sorted(layered + candidates, key=lambda n: (-score[n], tree.depths[n], n))
        n_keep = self.cycle_budget(ctx)  # budget=auto may lower the budget this cycle
        pruned = set(ranked[n_keep:])
        for n in ranked[:n_keep]:
            tree.gated[n] = False
        for n in pruned:
            tree.gated[n] = True
        for i in range(1, len(tree)):  # a gated node's subtree is gated too
            if tree.gated[tree.parents[i]]:
                tree.gated[i] = True
        tree.state = {"depth": max((tree.depths[n] for n in ranked[:n_keep]), default=0),
                      "nodes": tree.n_verified - 1, "pruned": sum(1 for n in layered if tree.gated[n])}
        if p.rerank == "all":
            tree.state["chosen_from_cut"] = sum(1 for n in candidates if not tree.gated[n])
        if tree.n_verified == 1:
            tree.mode = "ar"
        if isinstance(source, Replay):
            self.source.ran(source.run)
        self.finish(tree, steps0)
        return tree

    def _on_device(self, ctx: DraftContext, top_k: int, depth: int) -> NextTokenSource:
        """The layers :meth:`draft` asks for, drafted on the device and read back once: a layer's path scores are
        its parents' times q (float64, as the host multiplies them), its K best by a stable sort, as :func:`pool_of`
        orders the pool."""
        t0 = time.perf_counter()
        source: NextTokenSource = self.source
        ids, q = source.top_root(ctx, top_k)  # [1, s]
        levels = [Level(ids, q)]
        rows = TreeRows(ids.device)
        parents, scores = rows.root, torch.ones(1, dtype=torch.float64, device=ids.device)
        for d in range(1, depth):
            w = min(top_k, ids.shape[1])
            path = (scores[:, None] * q[:, :w].double()).reshape(-1)  # [f * w], frontier-major
            pick = torch.sort(path, descending=True, stable=True).indices[:top_k]  # the layer, best first
            i = torch.div(pick, w, rounding_mode="floor")
            parent_rows, tokens = parents[i], ids[i, pick % w]
            ids, q = source.top_level(parent_rows, tokens, d, rows.add(parent_rows), top_k)
            parents, scores = rows.last(len(pick)), path[pick]
            levels.append(Level(ids, q, None, tokens))
        return read_back(source, levels, t0)

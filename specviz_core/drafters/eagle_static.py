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
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz_core.drafters.base import DraftContext, param
from specviz_core.drafters.next_token import SourcedDrafter
from specviz_core.drafters.talon import DRAFTER_HELP, add_layer, fates_of, offer_layer, pool_of
from specviz_core.tree import DraftTree


@dataclass(frozen=True)
class EagleStaticParams:
    budget: int = param(60, "N: draft nodes kept after the final pruning by path score (root excluded).", minimum=1, maximum=1024)
    top_k: int = param(10, "K: children expanded per parent, and parents kept per layer.", minimum=1, maximum=64)
    depth: int = param(8, "D: layers of the tree.", minimum=1, maximum=64)
    drafter: str = param("auto", DRAFTER_HELP, choices=("auto", "head", "table", "model"))
    gated_shown: int = param(10, "Cut candidates recorded per layer as gated nodes (the best by path score).", minimum=0, maximum=1000)
    rerank: str = param("survivors", "What the final pruning to N chooses from: 'survivors' (the K kept per layer, "
                        "the seed's Algorithm 1) or 'all' (every expanded candidate, as EAGLE-2's released code "
                        "reranks).", choices=("survivors", "all"))


class EagleStaticDrafter(SourcedDrafter):
    method_id = "eagle_static"
    description = ("EAGLE-style static tree (TALON's baseline): top-K children per parent, top-K per layer by "
                   "path score, depth D, pruned to the N best; from a draft model or the n-gram tables.")
    params_cls = EagleStaticParams

    def draft(self, ctx: DraftContext) -> DraftTree:
        p: EagleStaticParams = self.params
        steps0 = self.begin(ctx)
        tree = DraftTree(root_token=ctx.ids[-1], mode="tree")
        score = {0: 1.0}
        frontier, cands = [0], [self.source.root(ctx, p.top_k)]
        layered: list[int] = []  # every node that made a layer, in layer order
        candidates: list[int] = []  # rerank=all: the layers' cut candidates, which the final pruning may choose too
        depth = min(p.depth, ctx.max_depth)
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
                cands = self.source.expand(tree, frontier, p.top_k)
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
        self.finish(tree, steps0)
        return tree

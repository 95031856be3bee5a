"""Token Recycling: an adjacency table of recent top-k successors fills a static tree.

Every verified position's logits overwrite the table row of the token at that
position (``table[token] = topk(logits, k)``), so candidates the target
considered but did not pick are "recycled" as drafts. Each cycle a static tree
template of rank paths is filled level by level: the node at rank path
``[r1, ..., rd]`` holds ``table[parent_token][rd]``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import torch

from ..tree import DraftTree
from .adjacency import AdjacencyTable
from .base import DraftContext, Drafter, param

# Rough acceptance rate of the target's rank-r successor; only the ordering of
# path products matters: it decides which ~80 rank paths the template keeps.
_RANK_WEIGHT = (0.55, 0.15, 0.07, 0.045, 0.03, 0.02, 0.015, 0.01, 0.008, 0.006)


def rank_template(size: int, max_depth: int, k: int) -> list[tuple[int, ...]]:
    """The ``size`` rank paths with the highest product of rank weights, parents first.

    Best-first growth keeps the result a tree: a path's weight never exceeds its
    parent's, so a parent is always chosen before its children.
    """
    weights = [_RANK_WEIGHT[r] if r < len(_RANK_WEIGHT) else _RANK_WEIGHT[-1] / (r + 1) for r in range(k)]
    heap: list[tuple[float, tuple[int, ...]]] = [(-weights[r], (r,)) for r in range(k)]
    heapq.heapify(heap)
    chosen: list[tuple[int, ...]] = []
    while heap and len(chosen) < size:
        neg_w, path = heapq.heappop(heap)
        chosen.append(path)
        if len(path) < max_depth:
            for r in range(k):
                heapq.heappush(heap, (neg_w * weights[r], path + (r,)))
    return sorted(chosen, key=lambda p: (len(p), p))


@dataclass(frozen=True)
class TRParams:
    k: int = param(8, "Successors kept per token in the adjacency table.", minimum=1, maximum=64)
    budget: int = param(80, "Nodes in the static tree template (draft tokens verified per cycle, at most).", minimum=1, maximum=1024)
    max_depth: int = param(6, "Levels in the static tree template.", minimum=1, maximum=64)


class TokenRecyclingDrafter(Drafter):
    method_id = "tr"
    display_name = "Token Recycling"
    description = "Token Recycling: a static ~80-node tree filled from an adjacency table of the target's recent top-k successors."
    params_cls = TRParams

    def __init__(self, params: TRParams, target, draft_model=None) -> None:
        super().__init__(params, target, draft_model)
        self.template = rank_template(params.budget, params.max_depth, params.k)
        self.table = AdjacencyTable(target.vocab_size, params.k, target.device)
        self._smaller: dict[int, list[tuple[int, ...]]] = {}  # budget=auto's smaller templates, by size

    def harvest(self, tokens: torch.Tensor, logits: torch.Tensor, prev: torch.Tensor | None = None) -> None:
        self.table.update(tokens, logits)

    def draft(self, ctx: DraftContext) -> DraftTree:
        tree = DraftTree(root_token=ctx.ids[-1], mode="tree")
        node_of: dict[tuple[int, ...], int] = {(): 0}
        by_depth: dict[int, list[tuple[int, ...]]] = {}
        size, template = self.cycle_budget(ctx), self.template
        if size < len(template):
            if size not in self._smaller:
                self._smaller[size] = rank_template(size, self.params.max_depth, self.params.k)
            template = self._smaller[size]
        for path in template:
            if len(path) <= ctx.max_depth:
                by_depth.setdefault(len(path), []).append(path)
        for depth in sorted(by_depth):
            paths = [p for p in by_depth[depth] if p[:-1] in node_of]
            if not paths:
                break
            parents = [node_of[p[:-1]] for p in paths]
            parent_tokens = torch.tensor([tree.tokens[i] for i in parents], device=self.table.ids.device)
            ranks = torch.tensor([p[-1] for p in paths], device=self.table.ids.device)
            # One gather per level: [m] successor ids and probabilities.
            toks = self.table.ids[parent_tokens, ranks].tolist()
            probs = self.table.probs[parent_tokens, ranks].tolist()
            ok = self.table.filled[parent_tokens].tolist()
            for path, parent, tok, prob, filled in zip(paths, parents, toks, probs, ok):
                if filled:
                    node_of[path] = tree.add(parent, tok, "recycle", prob)
        if len(tree) == 1:
            tree.mode = "ar"
        tree.lazy_offers = lambda nodes: self._offer(tree, node_of, nodes)
        return tree

    def _offer(self, tree: DraftTree, node_of: dict[tuple[int, ...], int], nodes: list[int]) -> None:
        """Each node's table row, with the ranks the template drafted below it; the template's other ranks are
        its width, and below a leaf its size or depth ended the tree (the budget)."""
        ranks: dict[int, set[int]] = {}
        for path, nid in node_of.items():
            if path:
                ranks.setdefault(node_of[path[:-1]], set()).add(path[-1])
        toks = torch.tensor([tree.tokens[n] for n in nodes], device=self.table.ids.device)
        ids, probs, filled = self.table.ids[toks].tolist(), self.table.probs[toks].tolist(), self.table.filled[toks].tolist()
        for n, row_ids, row_p, ok in zip(nodes, ids, probs, filled):
            if not ok:
                continue
            used = ranks.get(n)
            fates = ["drafted" if r in used else "width" for r in range(len(row_ids))] if used else ["budget"] * len(row_ids)
            tree.offer(n, "recycle", row_ids, row_p, fates)

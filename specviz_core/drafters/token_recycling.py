"""Token Recycling: an adjacency table of recent top-k successors fills a static tree.

Every verified position's logits overwrite the table row of the token at that
position (``table[token] = topk(logits, k)``), so candidates the target
considered but did not pick are "recycled" as drafts. Each cycle a static tree
template of rank paths is filled level by level: the node at rank path
``[r1, ..., rd]`` holds ``table[parent_token][rd]``.

The template is, by default, the one the authors publish (version 2.2.2 of their
``tree_template_.py``: 80 nodes, level widths 8/21/25/15/8/3, shipped as
``resources/trees/token-recycling-2.2.2.json``); ``tree=heuristic`` is SpecViz's
earlier template (the ``budget`` rank paths with the best products of rough
per-rank acceptance rates), and a tree file from ``specviz optimize-tree`` can be
given. ``hot_start`` keeps the adjacency table from one session to the next in a
process (the paper's matrix is kept across queries rather than rebuilt).
"""

from __future__ import annotations

import heapq
import json
from pathlib import Path

import numpy as np

from specviz_core.drafters.adjacency import AdjacencyTable
from specviz_core.drafters.base import DraftContext, Drafter
from specviz_core.errors import SpecVizError
from specviz_core.methods.token_recycling import CARD, HEURISTIC, OFFICIAL, TRParams
from specviz_core.target_rows import TargetRows
from specviz_core.tree import DraftTree

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



def official_template() -> list[tuple[int, ...]]:
    """Token Recycling's published tree (version 2.2.2), as rank paths, parents first."""
    from specviz_resources import read_text

    return [tuple(p) for p in json.loads(read_text("trees", "token-recycling-2.2.2.json"))["paths"]]


def best_of(paths: list[tuple[int, ...]], size: int) -> list[tuple[int, ...]]:
    """The ``size`` paths of a template with the best rank-weight products, parents first. A path weighs less than
    its parent and than its lower-ranked sibling, so the result keeps every parent (a smaller tree for budget=auto,
    or a budget under the template's size)."""
    def weight(p: tuple[int, ...]) -> float:
        w = 1.0
        for r in p:
            w *= _RANK_WEIGHT[r] if r < len(_RANK_WEIGHT) else _RANK_WEIGHT[-1] / (r + 1)
        return w
    kept = sorted(paths, key=lambda p: (-weight(p), len(p), p))[:size]
    return sorted(kept, key=lambda p: (len(p), p))


def load_template(tree: str, size: int, max_depth: int, k: int) -> list[tuple[int, ...]]:
    """The rank paths of ``tree`` (official, heuristic or a tree file), at most ``size`` of them, ``max_depth`` deep."""
    if tree == HEURISTIC:
        return rank_template(size, max_depth, k)
    if tree == OFFICIAL:
        paths = official_template()
    else:
        try:
            data = json.loads(Path(tree).read_text(encoding="utf-8"))
            paths = [tuple(int(r) for r in p) for p in data["paths"]]
        except OSError as e:
            raise SpecVizError(f"cannot read the tree file: {e.strerror}: {tree}") from None
        except (ValueError, TypeError, KeyError):
            raise SpecVizError(f"{tree} is not a tree file (tree= takes official, heuristic or a file written by "
                               "specviz optimize-tree)") from None
    paths = [p for p in paths if len(p) <= max_depth and all(r < k for r in p)]
    kept = set(paths)
    paths = [p for p in paths if all(p[:i] in kept for i in range(1, len(p)))]  # parents kept too
    return best_of(paths, size)


#: hot_start's tables: one per loaded model (by identity) and table width, for the life of the process.
_HOT_TABLES: dict[tuple, AdjacencyTable] = {}


class TokenRecyclingDrafter(Drafter):
    card = CARD

    def __init__(self, params: TRParams, target, draft_model=None) -> None:
        super().__init__(params, target, draft_model)
        self.template = load_template(params.tree, params.budget, params.max_depth, params.k)
        if params.hot_start:
            key = (id(target), target.vocab_size, params.k)
            self.table = _HOT_TABLES.setdefault(key, AdjacencyTable(target.vocab_size, params.k))
        else:
            self.table = AdjacencyTable(target.vocab_size, params.k)
        self.harvest_k = params.k
        self._smaller: dict[int, list[tuple[int, ...]]] = {}  # budget=auto's smaller templates, by size

    def harvest(self, rows: TargetRows) -> None:
        self.table.update(rows.tokens, *rows.top(self.table.k))

    def draft(self, ctx: DraftContext) -> DraftTree:
        tree = DraftTree(root_token=ctx.ids[-1], mode="tree")
        node_of: dict[tuple[int, ...], int] = {(): 0}
        by_depth: dict[int, list[tuple[int, ...]]] = {}
        size, template = self.cycle_budget(ctx), self.template
        if size < len(template):
            if size not in self._smaller:
                self._smaller[size] = best_of(self.template, size)
            template = self._smaller[size]
        for path in template:
            if len(path) <= ctx.max_depth:
                by_depth.setdefault(len(path), []).append(path)
        for depth in sorted(by_depth):
            paths = [p for p in by_depth[depth] if p[:-1] in node_of]
            if not paths:
                break
            parents = [node_of[p[:-1]] for p in paths]
            parent_tokens = np.array([tree.tokens[i] for i in parents])
            ranks = np.array([p[-1] for p in paths])
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
        toks = np.array([tree.tokens[n] for n in nodes])
        ids, probs, filled = self.table.ids[toks].tolist(), self.table.probs[toks].tolist(), self.table.filled[toks].tolist()
        for n, row_ids, row_p, ok in zip(nodes, ids, probs, filled):
            if not ok:
                continue
            used = ranks.get(n)
            fates = ["drafted" if r in used else "width" for r in range(len(row_ids))] if used else ["budget"] * len(row_ids)
            tree.offer(n, "recycle", row_ids, row_p, fates)

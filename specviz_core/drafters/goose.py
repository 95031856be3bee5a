"""Goose: anisotropic spine trees (seed 004, Algorithms 1-3, Section 4, Table 5).

A deep chain of context-matched tokens (the spine) with wide branches of
adjacency-table successors forking from every spine node. Each cycle:

- context matching with n-gram lengths {3, 4, 5} gives the spine (at most 20
  tokens) and a consensus flag (two or more lengths agree on the first token);
- a long match (>= 8 tokens) or consensus: verify the spine linearly (bypass);
- else, if any source has candidates: BuildSpineTree (Algorithm 1);
- else: AR fallback.

The spine ratio r follows tiers of an EMA of spine acceptance. The walk tries
spine children before branch children; a branch's children are branches, so once
on a branch the walk never returns to the spine. ``isotropic`` is the paper's
baseline: a balanced k-ary tree with the same budget and the same sources.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..tree import DraftTree
from .adjacency import AdjacencyTable
from .base import DraftContext, Drafter, param
from .pld import Match, match_ngram


@dataclass(frozen=True)
class GooseParams:
    budget: int = param(60, "Node budget B: draft nodes verified per cycle, at most (root excluded).", minimum=1, maximum=1024)
    max_spine: int = param(20, "Longest spine copied from a context match (tokens).", minimum=1, maximum=256)
    ngram_min: int = param(3, "Shortest n-gram used for context matching.", minimum=1, maximum=16)
    ngram_max: int = param(5, "Longest n-gram used for context matching.", minimum=1, maximum=16)
    bypass_threshold: int = param(8, "A match this long (tokens) is verified linearly, without branches (bypass).", minimum=1, maximum=256)
    spine_branch_ratio: float = param(0.5, "rho: share of the branch budget given to spine branches (the rest goes to root branches).", minimum=0.0, maximum=1.0)
    max_depth: int = param(6, "D: deepest a branch grows, counted from the node it forks from.", minimum=1, maximum=64)
    top_k: int = param(10, "K: successors kept per token in the adjacency table.", minimum=1, maximum=64)
    prune_threshold: float = param(0.01, "Successors whose score is below this are pruned.", minimum=0.0, maximum=1.0)
    branch_width: int = param(3, "Children of the strongest branch node in BFS extension; weaker siblings get fewer (score-relative).", minimum=1, maximum=64)
    ema: float = param(0.3, "Smoothing coefficient of the EMA of spine acceptance.", minimum=0.0, maximum=1.0)
    ema_init: float = param(0.3, "Initial estimate of spine acceptance p_s.", minimum=0.0, maximum=1.0)
    bigram: bool = param(True, "Use the bigram tier of the adjacency table (keyed by the last two tokens).")


def spine_ratio_tier(p_s: float) -> float:
    """Table 5: p_s < 0.2 -> 0.15, < 0.4 -> 0.30, else 0.50."""
    return 0.15 if p_s < 0.2 else 0.30 if p_s < 0.4 else 0.50


def harmonic_allocation(total: int, n: int) -> list[int]:
    """Algorithm 1, line 10: a_i = floor(total * (1/i) / sum_j 1/j) for spine nodes i = 1..n."""
    if n <= 0:
        return []
    h = sum(1.0 / j for j in range(1, n + 1))
    return [int(total * (1.0 / i) / h) for i in range(1, n + 1)]


@dataclass(frozen=True)
class ContextMatch:
    spine: list[int]
    """The continuation copied as the spine (<= max_spine tokens)."""
    match: Match | None
    """The longest n-gram match and where its continuation came from."""
    consensus: bool
    """Two or more n-gram lengths agree on the first continuation token."""


def context_match(ids: np.ndarray, ngrams: range, max_spine: int) -> ContextMatch:
    found = [m for n in ngrams if (m := match_ngram(ids, n, max_spine)) is not None]
    if not found:
        return ContextMatch([], None, False)
    best = max(found, key=lambda m: m.ngram)
    firsts = [int(ids[m.copy_start]) for m in found]
    consensus = max(firsts.count(t) for t in set(firsts)) >= 2
    return ContextMatch([int(t) for t in ids[best.copy_start:best.copy_end]], best, consensus)


class SpineTreeBuilder:
    """Algorithm 1 (BuildSpineTree), with confidence-aware BFS extension of the branches."""

    def __init__(self, p: GooseParams, table: AdjacencyTable) -> None:
        self.p = p
        self.table = table

    def successors(self, tree: DraftTree, node: int, exclude: set[int]) -> list[tuple[int, float]]:
        prev = tree.tokens[tree.parents[node]] if node > 0 else self.root_prev
        ids, ps, _ = self.table.lookup(tree.tokens[node], prev)
        return [(t, s) for t, s in zip(ids, ps) if t not in exclude]

    def attach(self, tree: DraftTree, node: int, width: int, exclude: set[int], budget_left: int,
               fork_depth: int) -> list[int]:
        """Attach up to ``width`` branch children of ``node``; candidates pruned or over budget are kept as gated."""
        added = []
        for tok, score in self.successors(tree, node, exclude)[:width]:
            cut = score < self.p.prune_threshold or len(added) >= budget_left
            nid = tree.add(node, tok, "branch", score, gated=cut)
            self.fork[nid] = fork_depth
            if not cut:
                added.append(nid)
        return added

    def build(self, tree: DraftTree, spine: list[int], r: float, max_depth: int, root_prev: int) -> dict[str, Any]:
        p = self.p
        self.root_prev = root_prev
        self.fork: dict[int, int] = {}
        budget = p.budget
        # Step 1: lay the spine.
        b_s = min(len(spine), int(budget * r), max_depth)
        spine_ids = [0] + tree.add_chain(spine[:b_s], "spine") if b_s else [0]
        left = budget - b_s
        b_r = int(left * (1 - p.spine_branch_ratio))
        b_sb = left - b_r
        # Step 2: root branches (excluding the spine's own first token).
        nxt = {spine_ids[i]: (tree.tokens[spine_ids[i + 1]] if i + 1 < len(spine_ids) else -1)
               for i in range(len(spine_ids))}
        branches = self.attach(tree, 0, b_r, {nxt[0]}, b_r, 0)
        # Step 3: spine branches, wider near the root (the 1/i harmonic rule).
        alloc = harmonic_allocation(b_sb, b_s)
        for i, a in enumerate(alloc, start=1):
            node = spine_ids[i]
            if a > 0 and tree.depths[node] < max_depth:
                branches += self.attach(tree, node, a, {nxt[node]}, a, tree.depths[node])
        used = b_s + len(branches)
        # Step 4: BFS-extend the branches within the budget and max depth D from the fork.
        frontier = branches
        while frontier and used < budget:
            nxt_frontier = []
            best = {}
            for nid in frontier:
                par = tree.parents[nid]
                best[par] = max(best.get(par, 0.0), tree.scores[nid])
            for nid in frontier:
                if used >= budget:
                    break
                if tree.depths[nid] - self.fork[nid] >= p.max_depth or tree.depths[nid] >= max_depth:
                    continue
                rel = tree.scores[nid] / best[tree.parents[nid]] if best[tree.parents[nid]] > 0 else 0.0
                width = max(1, round(p.branch_width * rel))
                kids = self.attach(tree, nid, width, set(), budget - used, self.fork[nid])
                used += len(kids)
                nxt_frontier += kids
            frontier = nxt_frontier
        return {"spine_len": b_s, "root_branches": b_r, "spine_branch_budget": b_sb, "nodes": used}


class GooseDrafter(Drafter):
    method_id = "goose"
    display_name = "Goose"
    no_draft_reason = "Goose found no context match and no adjacency-table successor"
    no_match_note = "Goose found no context match, so the tree holds only adjacency-table branches"
    description = "Goose: a spine of context-matched tokens with adjacency-table branches at every spine node; linear bypass on confident matches."
    params_cls = GooseParams
    source_priority = ("spine", "branch")
    bypass = True

    def __init__(self, params: GooseParams, target, draft_model=None) -> None:
        super().__init__(params, target, draft_model)
        self.table = AdjacencyTable(target.vocab_size, params.top_k, target.device, bigram=params.bigram)
        self.p_s = params.ema_init
        self.counts = {"spine_verified": 0, "spine_accepted": 0, "branch_verified": 0, "branch_accepted": 0}
        self.shapes: list[tuple[int, list[int], int]] = []  # per tree cycle: (m, w_i, accepted tokens + 1)

    def start(self, prompt_ids: list[int]) -> None:
        self.p_s = self.params.ema_init

    def harvest(self, tokens, logits, prev=None) -> None:
        self.table.update(tokens, logits, prev)

    def shape(self, tree: DraftTree, ctx: DraftContext, cm: ContextMatch, r: float) -> dict[str, Any]:
        return SpineTreeBuilder(replace(self.params, budget=self.cycle_budget(ctx)), self.table).build(
            tree, cm.spine, r, ctx.max_depth, ctx.ids[-2] if len(ctx.ids) > 1 else -1)

    def draft(self, ctx: DraftContext) -> DraftTree:
        p: GooseParams = self.params
        ids = np.asarray(ctx.ids, dtype=np.int64)
        cm = context_match(ids, range(p.ngram_min, p.ngram_max + 1), p.max_spine)
        r = spine_ratio_tier(self.p_s)
        state: dict[str, Any] = {
            "spine_ratio": r, "ema_p_s": self.p_s, "consensus": cm.consensus, "match_len": len(cm.spine),
            "match": None if cm.match is None else {
                "ngram": cm.match.ngram, "match_span": [cm.match.match_start, cm.match.match_end],
                "copy_span": [cm.match.copy_start, cm.match.copy_end]},
        }
        root = int(ids[-1])
        if self.bypass and cm.spine and (len(cm.spine) >= p.bypass_threshold or cm.consensus) and ctx.max_depth > 0:
            tree = DraftTree(root_token=root, mode="bypass")
            tree.add_chain(cm.spine[: ctx.max_depth], "spine")
            state["spine_len"] = min(len(cm.spine), ctx.max_depth)
        elif (cm.spine or self.table.lookup(root, state_prev(ctx))[0]) and ctx.max_depth > 0:
            tree = DraftTree(root_token=root, mode="tree")
            state.update(self.shape(tree, ctx, cm, r))
            if len(tree) == 1 or tree.n_verified == 1:
                tree.mode = "ar"
        else:
            tree = DraftTree(root_token=root, mode="ar")
            state["spine_len"] = 0
        tree.state = state
        return tree

    def accepted(self, tree: DraftTree, accepted_nodes: list[int], committed: list[int]) -> dict[str, Any]:
        verified = [i for i in range(1, len(tree)) if not tree.gated[i]]
        spine = [i for i in verified if tree.sources[i] == "spine"]
        branch = [i for i in verified if tree.sources[i] == "branch"]
        acc_sources = [tree.sources[i] for i in accepted_nodes]
        n_spine_acc = acc_sources.count("spine")
        self.counts["spine_verified"] += len(spine)
        self.counts["spine_accepted"] += n_spine_acc
        self.counts["branch_verified"] += len(branch)
        self.counts["branch_accepted"] += acc_sources.count("branch")
        out: dict[str, Any] = {}
        if spine:
            self.p_s = (1 - self.params.ema) * self.p_s + self.params.ema * (n_spine_acc / len(spine))
            out["spine_broke_at"] = n_spine_acc + 1 if n_spine_acc < len(spine) else None
        if not accepted_nodes:
            category = "none"
        elif "branch" not in acc_sources:
            category = "pure_spine"
        elif "spine" in acc_sources:
            category = "spine_continuation"
        else:
            category = "pure_branch"
        out["path"] = category
        out["spine_continuation"] = category == "spine_continuation"
        out["ema_p_s_after"] = self.p_s
        if tree.mode == "tree":
            spine_nodes = [0] + spine
            widths = [sum(1 for c in tree.children(s) if not tree.gated[c] and tree.sources[c] == "branch")
                      for s in spine_nodes[:-1]] if len(spine_nodes) > 1 else [
                sum(1 for c in tree.children(0) if not tree.gated[c])]
            self.shapes.append((len(spine), widths, len(accepted_nodes) + 1))
        return out

    def stats(self) -> dict[str, Any]:
        c = self.counts
        p_s = c["spine_accepted"] / c["spine_verified"] if c["spine_verified"] else 0.0
        p_t = c["branch_accepted"] / c["branch_verified"] if c["branch_verified"] else 0.0
        out: dict[str, Any] = dict(c, p_s=p_s, p_t=p_t)
        if self.shapes:
            bounds = [yield_bound(p_s, p_t, m, w, self.params.max_depth) for m, w, _ in self.shapes]
            out["yield_bound"] = float(np.mean(bounds))
            out["measured_tree_tau"] = float(np.mean([t for _, _, t in self.shapes]))
            out["tree_cycles"] = len(self.shapes)
        return out


@dataclass(frozen=True)
class IsotropicParams(GooseParams):
    k: int = param(3, "Children per node of the balanced k-ary tree.", minimum=1, maximum=64)


class IsotropicDrafter(GooseDrafter):
    """The paper's Isotropic(k) baseline: the same budget and sources, a balanced k-ary shape, no bypass."""

    method_id = "isotropic"
    display_name = "Isotropic"
    description = "Isotropic(k): a balanced k-ary tree with Goose's budget and sources (spine token first where there is one), no bypass."
    params_cls = IsotropicParams
    bypass = False

    def shape(self, tree: DraftTree, ctx: DraftContext, cm: ContextMatch, r: float) -> dict[str, Any]:
        p: IsotropicParams = replace(self.params, budget=self.cycle_budget(ctx))
        prev_root = state_prev(ctx)
        spine_next = {0: 0}  # node -> index into the spine of its spine child
        frontier, used = [0], 0
        while frontier and used < p.budget:
            nxt = []
            for node in frontier:
                if tree.depths[node] >= min(p.max_depth, ctx.max_depth) or used >= p.budget:
                    continue
                kids, exclude = [], set()
                i = spine_next.get(node)
                if i is not None and i < len(cm.spine):
                    sid = tree.add(node, cm.spine[i], "spine", 1.0)
                    spine_next[sid] = i + 1
                    kids.append(sid)
                    exclude.add(cm.spine[i])
                    used += 1
                prev = tree.tokens[tree.parents[node]] if node > 0 else prev_root
                ids, ps, _ = self.table.lookup(tree.tokens[node], prev)
                for tok, score in zip(ids, ps):
                    if len(kids) >= p.k or used >= p.budget:
                        break
                    if tok in exclude or score < p.prune_threshold:
                        continue
                    kids.append(tree.add(node, tok, "branch", score))
                    used += 1
                nxt += kids
            frontier = nxt
        return {"spine_len": sum(1 for s in tree.sources if s == "spine"), "nodes": used}


def state_prev(ctx: DraftContext) -> int:
    return ctx.ids[-2] if len(ctx.ids) > 1 else -1


def yield_bound(p_s: float, p_t: float, m: int, widths: list[int], depth: int) -> float:
    """Proposition 1: E[tau] >= sum_{i=1..m} p_s^i + sum_{i=0..m-1} p_s^i (1 - p_s) phi_i (1 + l) + 1.

    phi_i = 1 - (1 - p_t)^{w_i}; l = sum_{k=1..D-1} p_t^k. With m = 0 (no spine) the tree is
    root branches only: the bound is phi_0 (1 + l) + 1.
    """
    ell = sum(p_t ** k for k in range(1, depth))
    if m == 0:
        w0 = widths[0] if widths else 0
        return (1 - (1 - p_t) ** w0) * (1 + ell) + 1
    spine = sum(p_s ** i for i in range(1, m + 1))
    synergy = sum(p_s ** i * (1 - p_s) * (1 - (1 - p_t) ** (widths[i] if i < len(widths) else 0)) * (1 + ell)
                  for i in range(m))
    return spine + synergy + 1

"""Goose: anisotropic spine trees (seed 004), as the authors' public implementation runs it.

The official implementation is ``2kinto/GOOSE_Speculative_Decoding`` (package ``goose/``); every
switch of its ``GooseConfig`` is a parameter here with the same name and default (``budget`` is its
``node_budget``: the name every SpecViz method uses, so ``--budget`` and ``budget=auto`` apply).
Where the paper's text and that code disagree, the code is the default and the paper's reading a
setting (docs/goose.md lists each one). Each cycle:

- cycle 0 is the official prefill's last position: it yields the first token with no draft (``prefill``);
- context matching of the longest suffix n-gram (5, 4, 3) gives the chain, copied from the first
  occurrence, and consensus (two or more occurrences, all followed by the same token);
- if the adjacency table has successors for the root: a tree (``spine_tree``, or ``branch_tree`` with
  no match). Its confidence (``goose_match.match_confidence``) grows the node budget to
  ``budget + int(confidence * (max_extended_chain - budget))``, shifts the spine ratio towards 1, and
  above 0.6 grows the chain by repeated matching up to ``int(max_extended_chain * confidence)``;
- else if there is a match: the chain verified as a chain (``chain``); else AR.

The walk tries spine children before branch children; a branch's children are branches, so once on a
branch the walk stays there. ``isotropic`` is Section 5.3's control: a balanced k-ary tree from the
table alone, at the same budget.
"""

from __future__ import annotations

from typing import Any

from specviz_core.drafters.base import DraftContext, Drafter
from specviz_core.drafters.goose.match import (
    CHAIN_EXTENSION_CONFIDENCE,
    ContextIndex,
    extend_chain,
    match_confidence,
)
from specviz_core.drafters.goose.offers import offer_goose
from specviz_core.drafters.goose.stats import GooseCounters, path_category, shape_sample
from specviz_core.drafters.goose.table import GooseTable
from specviz_core.drafters.goose.tree import BranchRules, build_isotropic_tree, build_spine_tree, spine_ratio_tier
from specviz_core.methods.goose import CARD, ISOTROPIC, GooseParams, parse_lengths, tiers_of
from specviz_core.target_rows import TargetRows
from specviz_core.tree import DraftTree

TREE_ROUTES = ("spine_tree", "branch_tree")



class GooseDrafter(Drafter):
    card = CARD
    source_priority = ("spine", "branch")

    def __init__(self, params: GooseParams, target, draft_model=None) -> None:
        super().__init__(params, target, draft_model)
        p = params
        self.tiers = tiers_of(p)
        self.rules = BranchRules(p.min_score, p.adjacency_top_k, p.max_branch_depth, p.spine_branch_ratio,
                                 p.branching_factor, p.branch_depth_from == "fork")
        self.index = ContextIndex(parse_lengths(p.ngram_lengths), p.occurrence, p.consensus)
        self.vocab_size = target.vocab_size
        self.harvest_k = p.adjacency_top_k if p.use_adjacency else 0
        self.start([])

    def start(self, prompt_ids: list[int]) -> None:
        p = self.params
        self.index.reset()
        self.table = GooseTable(self.vocab_size, p.adjacency_top_k) if p.use_adjacency else None
        self.ema = p.ema_init
        self.cycle = -1
        self.route = ""  # the current cycle's; "" during the prefill
        self.counts = GooseCounters(first_forward_is_prefill=not p.draft_first_cycle)

    def harvest(self, rows: TargetRows) -> None:
        p = self.params
        if self.table is None or (self.route in ("", "prefill") and not p.use_prefill_harvest):
            return
        prevs: list[int | None] | None = rows.prev.tolist() if p.use_bigram else None
        if prevs is not None and self.route in TREE_ROUTES:
            prevs[0] = None  # a tree cycle stores no bigram for its root, as the official decoder
        self.table.harvest(rows.tokens.tolist(), *rows.top(self.table.k), prevs)

    def lookup(self, token: int, prev: int | None) -> list[tuple[int, float]]:
        return self.table.successors(token, prev if self.params.use_bigram else None) if self.table else []

    def draft(self, ctx: DraftContext) -> DraftTree:
        p: GooseParams = self.params
        self.cycle += 1
        ids = ctx.ids
        self.index.sync(ids)
        root = int(ids[-1])
        prev = int(ids[-2]) if len(ids) > 1 else None
        state: dict[str, Any] = {"ema_p_s": self.ema}
        if ctx.max_depth <= 0 or (self.cycle == 0 and not p.draft_first_cycle):
            return self._finish(DraftTree(root_token=root, mode="ar"), "prefill" if ctx.max_depth > 0 else "ar", state)

        tail = ids[-self.index.window:]
        m = self.index.match(tail, p.max_chain) if p.use_context_match else None
        chain = list(m.tokens) if m else []
        consensus = bool(m) and self.index.consensus(tail)
        state.update(match=m.as_state() if m else None, match_len=len(chain), consensus=consensus)
        confidence = match_confidence(len(chain), consensus, p.long_match) if p.use_confidence else 0.0
        bigram_prev = prev if p.use_bigram else None

        self._offer_args = (chain, 0, bigram_prev)
        if p.confident_match == "bypass" and confidence > CHAIN_EXTENSION_CONFIDENCE:
            tree = DraftTree(root_token=root, mode="bypass")
            tree.add_chain(chain, "spine")
            state.update(confidence=confidence, spine_len=len(chain))
            return self._finish(tree, "bypass", state)
        if self.table is not None and self.table.has_successors(root, bigram_prev):
            if p.confident_match == "bypass":
                confidence = 0.0  # Algorithm 2: trees at the base budget and the tier's ratio
            return self._tree(ctx, root, bigram_prev, chain, confidence, state)
        if chain:
            tree = DraftTree(root_token=root, mode="chain")
            tree.add_chain(chain, "spine")
            state.update(confidence=0.0, spine_len=len(chain))
            return self._finish(tree, "chain", state)
        return self._finish(DraftTree(root_token=root, mode="ar"), "ar", state)

    def _tree(self, ctx: DraftContext, root: int, bigram_prev: int | None, chain: list[int], confidence: float,
              state: dict[str, Any]) -> DraftTree:
        p: GooseParams = self.params
        base = p.budget if ctx.budget is None else min(p.budget, ctx.budget + 1)
        budget = base + int(confidence * max(0, p.max_extended_chain - p.budget))
        tree = DraftTree(root_token=root, mode="tree")
        extended = confidence > CHAIN_EXTENSION_CONFIDENCE and p.topology == "spine"
        if extended:
            ext = extend_chain(self.index, ctx.ids, chain, confidence, p.max_extended_chain, p.max_chain, p.long_match)
            chain = ext.chain
            state["extension_spans"] = [[e.copy_start, e.copy_end] for e in ext.pieces]
        state.update(confidence=confidence, chain_extended=extended, chain_len=len(chain), node_budget=budget)
        self._offer_args = (chain, budget, bigram_prev)
        if p.topology == "isotropic":
            shape = build_isotropic_tree(tree, self.lookup, budget, self.rules, bigram_prev)
        else:
            tier = spine_ratio_tier(self.ema, self.tiers)
            ratio = tier + confidence * (1.0 - tier)
            shape = build_spine_tree(tree, self.lookup, chain, budget, ratio, self.rules, bigram_prev)
            state.update(spine_ratio=ratio, spine_ratio_tier=tier, ratio_binding=bool(chain) and int(budget * ratio) < len(chain),
                         spine_len=shape.spine_len, root_share=shape.root_share, spine_share=shape.spine_share)
        if tree.n_verified < 2:  # every candidate fell below min_score: one AR step
            tree.mode = "ar"
            return self._finish(tree, "ar", state)
        route = "spine_tree" if shape.spine_len else "branch_tree"
        if extended and tree.n_verified - 1 == shape.spine_len:
            tree.mode = "bypass"  # saturated confidence: the whole budget went to the chain
        return self._finish(tree, route, state)

    def _finish(self, tree: DraftTree, route: str, state: dict[str, Any]) -> DraftTree:
        self.route = route
        state["route"] = route
        tree.state = state
        args = getattr(self, "_offer_args", None)
        if args is not None and route != "prefill":
            chain, budget, prev = args
            lookup = self.lookup if self.table is not None else None
            tree.lazy_offers = lambda nodes: offer_goose(tree, nodes, chain, lookup, self.rules, budget, prev)
        self._offer_args = None
        return tree

    def accepted(self, tree: DraftTree, accepted_nodes: list[int], committed: list[int]) -> dict[str, Any]:
        c, p = self.counts, self.params
        verified = [i for i in range(1, len(tree)) if not tree.gated[i]]
        n_spine = sum(1 for i in verified if tree.sources[i] == "spine")
        n_branch = len(verified) - n_spine
        sources = [tree.sources[i] for i in accepted_nodes]
        s_acc = sources.count("spine")
        b_acc = len(sources) - s_acc
        route = self.route
        if route in TREE_ROUTES:  # budget=auto may have gated nodes after drafting
            route = "spine_tree" if n_spine else "branch_tree" if n_branch else "ar"
        elif route in ("chain", "bypass") and not verified:
            route = "ar"
        path = path_category(sources)
        out: dict[str, Any] = {"route": route, "path": path, "spine_nodes": n_spine, "branch_nodes": n_branch,
                               "spine_accepted": s_acc, "branch_accepted": b_acc,
                               "spine_continuation": path == "spine_continuation",
                               "continuation_tokens": b_acc if path == "spine_continuation" else 0,
                               "spine_broke_at": s_acc + 1 if s_acc < n_spine else None}
        if route == "spine_tree" or (route == "bypass" and p.confident_match == "bypass"):
            self.ema = p.ema_alpha * (s_acc / n_spine) + (1.0 - p.ema_alpha) * self.ema
        out["ema_p_s_after"] = self.ema

        c.routes[route] += 1
        c.tokens += len(committed)
        if self.cycle == 0:
            c.first_tokens = len(committed)
        if route in ("prefill", "ar"):
            return out
        c.draft_nodes += len(verified)
        c.spine_nodes += n_spine
        c.branch_nodes += n_branch
        c.spine_accepted += s_acc
        c.branch_accepted += b_acc
        c.bonus_tokens += 1
        c.accepted_by_path[path] += len(sources)
        if path == "spine_continuation":
            c.spine_continuations += 1
            c.spine_continuation_tokens += b_acc
        if route in TREE_ROUTES:
            c.extended_cycles += bool(tree.state.get("chain_extended"))
            c.tree_branch_nodes += n_branch
            c.tree_branch_accepted += b_acc
            sample = shape_sample(tree, len(accepted_nodes) + 1)
            if route == "spine_tree":
                c.tree_spine_nodes += n_spine
                c.tree_spine_accepted += s_acc
                c.ratio_binding_cycles += bool(tree.state.get("ratio_binding"))
                c.spine_shapes.append(sample)
            else:
                c.branch_shapes.append(sample)
        return out

    def stats(self) -> dict[str, Any]:
        return self.counts.as_stats()


class IsotropicDrafter(GooseDrafter):
    """Section 5.3's Isotropic(k): Goose with ``topology=isotropic`` (``branching_factor`` k)."""

    card = ISOTROPIC


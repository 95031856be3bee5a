"""Goose (seed 004) and its isotropic control: their cards and parameters."""

from __future__ import annotations

from dataclasses import dataclass

from specviz_core.errors import SpecVizError
from specviz_core.methods.card import MethodCard
from specviz_core.methods.params import param


def parse_lengths(text: str) -> tuple[int, ...]:
    """``"5,4,3"`` -> (5, 4, 3), longest first, duplicates dropped; ValueError if empty or not positive."""
    lengths = sorted({int(x) for x in text.replace(" ", "").split(",") if x}, reverse=True)
    if not lengths or lengths[-1] < 1:
        raise ValueError(text)
    return tuple(lengths)


def tiers_of(p: GooseParams) -> tuple[float, ...]:
    """The spine ratio tiers of ``p`` as numbers; () if they do not parse."""
    try:
        return tuple(float(x) for x in p.spine_ratio_tiers.replace(" ", "").split(",") if x)
    except ValueError:
        return ()


@dataclass(frozen=True)
class GooseParams:
    # The official GooseConfig, field for field (node_budget is budget).
    budget: int = param(60, "Node budget B of a tree, the root included (the official node_budget); a confident "
                        "cycle adds int(confidence x (max_extended_chain - budget)) nodes.", minimum=2, maximum=1024)
    max_branch_depth: int = param(6, "D: a branch node is extended only while its depth is below this (counted from the "
                                  "root; from the node it forks off with branch_depth_from=fork).", minimum=1, maximum=64)
    adjacency_top_k: int = param(10, "K: successors kept per token in the adjacency table; a branch node at depth d gets "
                                 "at most K // d children.", minimum=1, maximum=64)
    min_score: float = param(0.01, "Successors scoring below this (softmax over the top K) are not drafted.",
                             minimum=0.0, maximum=0.999)
    spine_branch_ratio: float = param(0.5, "rho: share of the branch budget for branches off spine nodes (at least one "
                                      "node); the rest goes to the root.", minimum=0.0, maximum=1.0)
    max_chain: int = param(20, "Longest continuation one context match copies (tokens).", minimum=1, maximum=256)
    max_extended_chain: int = param(100, "Longest chain a confident cycle grows by repeated matching; its excess over "
                                    "budget is what a fully confident cycle adds to the budget.", minimum=1, maximum=1024)
    long_match: int = param(8, "A match this long is confident (0.7, rising to 0.9 at 12 tokens more); a shorter one "
                            "scores 0.6 x length / long_match.", minimum=1, maximum=256)
    ema_alpha: float = param(0.3, "Weight of the newest rate in the EMA of spine acceptance p_s.", minimum=0.0, maximum=1.0)
    ngram_lengths: str = param("5,4,3", "n-gram lengths of the context match, comma-separated (the longest that "
                               "occurred before wins).")
    spine_ratio_tiers: str = param("0.15,0.30,0.50", "Spine ratio r for EMA p_s < 0.2, < 0.4 and above, comma-separated.")
    use_bigram: bool = param(True, "Key the adjacency table by the last two tokens as well (its bigram tier).")
    use_context_match: bool = param(True, "Draw a spine from context matching (off: Table 2's 'w/o context-match spine').")
    use_adjacency: bool = param(True, "Draw branches from the adjacency table (off: every match is verified as a chain).")
    use_prefill_harvest: bool = param(True, "Seed the adjacency table from the prompt's own logits.")
    use_confidence: bool = param(True, "Let match confidence extend the chain, grow the budget and shift the spine ratio "
                                 "(off: Table 2's 'w/o consensus bypass').")
    topology: str = param("spine", "spine: the anisotropic spine tree; isotropic: Section 5.3's balanced control.",
                          choices=("spine", "isotropic"))
    branching_factor: int = param(3, "k of the isotropic topology.", minimum=1, maximum=64)
    # Where the paper's text reads otherwise than the code, and SpecViz's own first cycle.
    confident_match: str = param("extend", "extend: the official code's confidence schedule; bypass: Algorithm 2, a "
                                 "match of long_match tokens or with consensus is verified as a chain, trees at the base "
                                 "budget.", choices=("extend", "bypass"))
    consensus: str = param("occurrences", "occurrences: the official code's; ngram_lengths: Section 4.3's, two n-gram "
                           "lengths agree on the next token.", choices=("occurrences", "ngram_lengths"))
    occurrence: str = param("first", "Which earlier occurrence a match copies from (first: the official code's).",
                            choices=("first", "last"))
    ema_init: float = param(0.5, "Starting EMA p_s (0.5 in the official code, 0.3 in Algorithm 2).", minimum=0.0, maximum=1.0)
    branch_depth_from: str = param("root", "Where max_branch_depth and K // depth count from: root (the official code) "
                                   "or fork (Proposition 1's D).", choices=("root", "fork"))
    draft_first_cycle: bool = param(False, "Draft a tree from the prompt's last token in cycle 0 (SpecViz's own first "
                                    "cycle) instead of the official prefill's token.")

    def __post_init__(self) -> None:
        try:
            parse_lengths(self.ngram_lengths)
        except ValueError:
            raise SpecVizError(f"ngram_lengths must be positive integers separated by commas, got {self.ngram_lengths!r}") from None
        if len(tiers_of(self)) != 3 or not all(0.0 <= t <= 1.0 for t in tiers_of(self)):
            raise SpecVizError(f"spine_ratio_tiers must be three shares in [0, 1], got {self.spine_ratio_tiers!r}")
        if self.max_extended_chain < self.max_chain:
            raise SpecVizError(f"max_extended_chain ({self.max_extended_chain}) cannot be shorter than max_chain ({self.max_chain})")
        if not (self.use_context_match or self.use_adjacency):
            raise SpecVizError("Goose needs a draft source: use_context_match or use_adjacency")


@dataclass(frozen=True)
class IsotropicParams(GooseParams):
    topology: str = param("isotropic", "isotropic: Section 5.3's balanced control; spine: Goose's own tree.",
                          choices=("spine", "isotropic"))


def max_budget(p: GooseParams) -> int:
    """The most draft nodes a Goose cycle verifies: a fully confident one's budget (its root is not charged)."""
    return max(p.budget, p.max_extended_chain) if p.use_confidence else p.budget - 1


CARD = MethodCard(
    method_id="goose",
    display_name="Goose",
    description="Goose (the official implementation): a spine of context-matched tokens with adjacency-table branches "
                "at every spine node; confident matches grow the chain and the budget.",
    drafter="specviz_core.drafters.goose.drafter:GooseDrafter",
    params_cls=GooseParams,
    no_draft_reason="Goose found no context match and no adjacency-table successor",
    no_match_note="Goose found no context match, so the tree holds only adjacency-table branches",
    budget_ceiling=max_budget,
)


ISOTROPIC = MethodCard(
    method_id="isotropic",
    display_name="Isotropic",
    description="Isotropic(k): a balanced k-ary tree (branching_factor) from Goose's adjacency table at Goose's "
                "budget, no spine.",
    drafter="specviz_core.drafters.goose.drafter:IsotropicDrafter",
    params_cls=IsotropicParams,
    budget_ceiling=max_budget,
)

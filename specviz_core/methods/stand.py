"""STAND (seed 002): its card and parameters."""

from __future__ import annotations

from dataclasses import dataclass

from specviz_core.methods.card import MethodCard
from specviz_core.methods.params import param


@dataclass(frozen=True)
class StandParams:
    budget: int = param(80, "Nodes in the static tree (the heuristic one is built to it, the shipped one is cut to it "
                        "breadth first; ignored for a tree file).", minimum=1, maximum=1024)
    max_depth: int = param(8, "Levels of the heuristic static tree.", minimum=1, maximum=64)
    top_k: int = param(10, "Next-token probabilities stored per n-gram (top-k).", minimum=1, maximum=64)
    ngram_max: int = param(4, "Longest n-gram in the tables (tables for 1..n are kept; lookup tries n first).", minimum=1, maximum=16)
    tree: str = param("auto", "The static tree: 'auto' (the shipped optimized tree on the default model, else the "
                      "heuristic one), 'optimized' (the shipped tree, made for the default model), a built-in suite's name "
                      "('code_editing', 'chat'...: the default model's tree calibrated on held-out prompts of that "
                      "kind), 'heuristic' (Token Recycling's heuristic, budget nodes: the paper's ablation) or a tree "
                      "file written by specviz optimize-tree.")
    stochastic: bool = param(True, "With temperature > 0, draw children by Gumbel-top-k from the stored distribution (else top-k).")
    noise_cache: int = param(4096, "Gumbel noise values drawn at once and cached until used up.", minimum=1, maximum=1000000)


CARD = MethodCard(
    method_id="stand",
    display_name="STAND",
    description="STAND: logit n-gram tables (1-4-grams, top-10 running means) fill a static tree; children are "
                "drawn by Gumbel-top-k when sampling; tables persist across samples (--samples N).",
    drafter="specviz_core.drafters.stand:StandDrafter",
    params_cls=StandParams,
)

"""EAGLE's static tree, TALON's baseline: its card and parameters."""

from __future__ import annotations

from dataclasses import dataclass

from specviz_core.methods.card import MethodCard
from specviz_core.methods.params import param
from specviz_core.methods.talon import DRAFTER_HELP, HEAD_HELP


@dataclass(frozen=True)
class EagleStaticParams:
    budget: int = param(60, "N: draft nodes kept after the final pruning by path score (root excluded).", minimum=1, maximum=1024)
    top_k: int = param(10, "K: children expanded per parent, and parents kept per layer.", minimum=1, maximum=64)
    depth: int = param(8, "D: layers of the tree.", minimum=1, maximum=64)
    drafter: str = param("auto", DRAFTER_HELP, choices=("auto", "head", "table", "model"))
    head: str = param("", HEAD_HELP)
    gated_shown: int = param(10, "Cut candidates recorded per layer as gated nodes (the best by path score).", minimum=0, maximum=1000)
    rerank: str = param("survivors", "What the final pruning to N chooses from: 'survivors' (the K kept per layer, "
                        "the seed's Algorithm 1) or 'all' (every expanded candidate, as EAGLE-2's released code "
                        "reranks).", choices=("survivors", "all"))


CARD = MethodCard(
    method_id="eagle_static",
    display_name="EAGLE's static tree",
    description="EAGLE-style static tree (TALON's baseline): top-K children per parent, top-K per layer by "
                "path score, depth D, pruned to the N best; from a draft model or the n-gram tables.",
    drafter="specviz_core.drafters.talon.eagle.static:EagleStaticDrafter",
    params_cls=EagleStaticParams,
)

"""EAGLE-2's dynamic draft tree (the tree EAGLE-2 and EAGLE-3 heads run by default): its card and parameters."""

from __future__ import annotations

from dataclasses import dataclass

from specviz_core.methods.card import MethodCard
from specviz_core.methods.params import param
from specviz_core.methods.talon import DRAFTER_HELP, HEAD_HELP


@dataclass(frozen=True)
class EagleParams:
    budget: int = param(59, "Draft nodes kept by the final reranking on path probability (root excluded): the "
                        "official total_token 60 counts the root.", minimum=1, maximum=1024)
    top_k: int = param(10, "Children drafted below each expanded node, and nodes expanded per depth (the most "
                       "probable by path).", minimum=1, maximum=64)
    depth: int = param(7, "Expansion steps after the root's (the official default; its evaluation scripts use 5): "
                       "the tree has depth + 1 levels.", minimum=0, maximum=63)
    drafter: str = param("auto", DRAFTER_HELP, choices=("auto", "head", "table", "model"))
    head: str = param("", HEAD_HELP)
    gated_shown: int = param(10, "Candidates the reranking cut recorded per level as gated nodes (the most probable).",
                             minimum=0, maximum=1000)


CARD = MethodCard(
    method_id="eagle",
    display_name="EAGLE-2's dynamic tree",
    description="EAGLE-2's dynamic draft tree: expand the top-k most probable nodes a depth at a time, then keep "
                "the budget's most probable nodes of everything drafted by path probability (the reranking); "
                "from an EAGLE head, a draft model or the n-gram tables.",
    drafter="specviz_core.drafters.talon.eagle.dynamic:EagleDrafter",
    params_cls=EagleParams,
)

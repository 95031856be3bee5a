"""Token Recycling (seed 003): its card and parameters."""

from __future__ import annotations

from dataclasses import dataclass

from specviz_core.methods.card import MethodCard
from specviz_core.methods.params import param

OFFICIAL = "official"
"""The authors' published tree template (2.2.2, 80 nodes)."""
HEURISTIC = "heuristic"


@dataclass(frozen=True)
class TRParams:
    k: int = param(8, "Successors kept per token in the adjacency table.", minimum=1, maximum=64)
    budget: int = param(80, "Nodes in the static tree template (draft tokens verified per cycle, at most); below the "
                        "template's size its best nodes are kept.", minimum=1, maximum=1024)
    max_depth: int = param(6, "Levels in the static tree template.", minimum=1, maximum=64)
    tree: str = param(OFFICIAL, "The static tree: 'official' (the authors' published template 2.2.2, 80 nodes, "
                      "levels 8/21/25/15/8/3), 'heuristic' (best products of rough per-rank acceptance, budget nodes) "
                      "or a tree file written by specviz optimize-tree.")
    hot_start: bool = param(False, "Keep the adjacency table across the sessions of this process (the paper keeps "
                            "its matrix across queries); off: every session starts from an empty table, so it "
                            "replays and forks on its own.")


CARD = MethodCard(
    method_id="tr",
    display_name="Token Recycling",
    description="Token Recycling: the authors' static 80-node tree filled from an adjacency table of the target's "
                "recent top-k successors.",
    drafter="specviz_core.drafters.token_recycling:TokenRecyclingDrafter",
    params_cls=TRParams,
)

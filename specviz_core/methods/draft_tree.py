"""Draft-model trees: its card and parameters."""

from __future__ import annotations

from dataclasses import dataclass

from specviz_core.methods.card import MethodCard
from specviz_core.methods.params import param


@dataclass(frozen=True)
class DraftTreeParams:
    width: int = param(2, "Children expanded per node (top-W of the draft model).", minimum=1, maximum=32)
    depth: int = param(4, "Tree depth D (levels below the root).", minimum=1, maximum=64)
    budget: int = param(60, "Most draft nodes verified per cycle; the lowest path scores are cut.", minimum=1, maximum=1024)


CARD = MethodCard(
    method_id="draft_tree",
    display_name="Draft-model tree",
    description="Draft-model tree: a draft model sharing the target's tokenizer expands the top-W children of each node to depth D.",
    drafter="specviz_core.drafters.draft_tree:DraftTreeDrafter",
    params_cls=DraftTreeParams,
    needs_draft_model=True,
)

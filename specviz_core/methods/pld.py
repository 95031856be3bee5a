"""Prompt lookup decoding (seed: prompt lookup): its card and parameters."""

from __future__ import annotations

from dataclasses import dataclass

from specviz_core.methods.card import MethodCard
from specviz_core.methods.params import param


@dataclass(frozen=True)
class PLDParams:
    max_ngram: int = param(3, "Longest suffix n-gram to look up in the context (tried first).", minimum=1, maximum=16)
    min_ngram: int = param(1, "Shortest suffix n-gram to look up before giving up.", minimum=1, maximum=16)
    num_pred_tokens: int = param(10, "Tokens copied after the match (chain length K).", minimum=1, maximum=256)
    occurrence: str = param("first", "Which earlier occurrence to copy from when several match: the first, as prompt "
                            "lookup's authors and transformers copy, or the last (the most recent).",
                            choices=("first", "last"))


CARD = MethodCard(
    method_id="pld",
    display_name="PLD",
    description="Prompt lookup: copy up to K tokens that followed the longest matching suffix n-gram earlier in the context, verified as a chain.",
    drafter="specviz_core.drafters.pld:PLDDrafter",
    params_cls=PLDParams,
    no_draft_reason="PLD found no earlier occurrence of the context's last n-gram",
)

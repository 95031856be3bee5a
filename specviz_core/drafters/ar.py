"""Plain autoregressive decoding: one token per forward, the baseline."""

from __future__ import annotations

from specviz_core.drafters.base import DraftContext, Drafter
from specviz_core.methods.ar import CARD
from specviz_core.tree import DraftTree


class ARDrafter(Drafter):
    card = CARD

    def draft(self, ctx: DraftContext) -> DraftTree:
        return DraftTree(root_token=ctx.ids[-1], mode="ar")

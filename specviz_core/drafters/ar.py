"""Plain autoregressive decoding: one token per forward, the baseline."""

from __future__ import annotations

from specviz_core.drafters.base import DraftContext, Drafter
from specviz_core.tree import DraftTree


class ARDrafter(Drafter):
    method_id = "ar"
    display_name = "AR"
    description = "Plain autoregressive decoding: one token per target forward (the baseline)."

    def draft(self, ctx: DraftContext) -> DraftTree:
        return DraftTree(root_token=ctx.ids[-1], mode="ar")

"""Plain autoregressive decoding: one token per forward, the baseline."""

from __future__ import annotations

from ..tree import DraftTree
from .base import DraftContext, Drafter


class ARDrafter(Drafter):
    method_id = "ar"
    display_name = "AR"
    description = "Plain autoregressive decoding: one token per target forward (the baseline)."

    def draft(self, ctx: DraftContext) -> DraftTree:
        return DraftTree(root_token=ctx.ids[-1], mode="ar")

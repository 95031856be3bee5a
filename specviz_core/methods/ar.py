"""Plain autoregressive decoding, the baseline: its card (no parameters)."""

from __future__ import annotations

from specviz_core.methods.card import MethodCard

CARD = MethodCard(
    method_id="ar",
    display_name="AR",
    description="Plain autoregressive decoding: one token per target forward (the baseline).",
    drafter="specviz_core.drafters.ar:ARDrafter",
)

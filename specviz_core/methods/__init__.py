"""The methods SpecViz runs, by id: what a person reads about each and the parameters it takes.

A :class:`MethodCard` is everything about a method that needs no model: its name, its one-line
description, its parameters, what a cycle without a draft means, whether it needs a draft model. The
window's method picker, the fork dialog, the "why did this cycle stop" panel and ``--help`` read the
cards, so a replay lists and explains methods without importing torch. The drafter that runs a method
(``specviz_core.drafters``) is loaded from the card only when a live session starts.

Adding a method: its card (and parameters) in a module here, listed in :data:`CARDS`; its drafter in
``specviz_core/drafters/``, whose class sets ``card``.
"""

from __future__ import annotations

from specviz_core.errors import SpecVizError
from specviz_core.methods import ar, draft_tree, eagle, eagle_static, goose, hf, pld, stand, talon, token_recycling
from specviz_core.methods.card import MethodCard
from specviz_core.methods.params import NoParams, param, param_specs, parse_kv, parse_params

CARDS: dict[str, MethodCard] = {
    c.method_id: c for c in (ar.CARD, pld.CARD, token_recycling.CARD, draft_tree.CARD, goose.CARD, goose.ISOTROPIC,
                             talon.CARD, eagle_static.CARD, eagle.CARD, stand.CARD, hf.PROMPT_LOOKUP, hf.ASSISTED, hf.UNIVERSAL)
}


def card(method: str) -> MethodCard:
    """The card of ``method``; a one-line error naming the known ones if there is none."""
    try:
        return CARDS[method]
    except KeyError:
        raise SpecVizError(f"unknown method {method!r} (known: {', '.join(CARDS)})") from None


__all__ = ["CARDS", "MethodCard", "NoParams", "card", "param", "param_specs", "parse_kv", "parse_params"]

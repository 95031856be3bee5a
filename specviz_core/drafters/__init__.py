"""Every method, by its id. A method is a drafter behind the one interface in ``base``."""

from __future__ import annotations

from ..errors import SpecVizError
from .ar import ARDrafter
from .base import DraftContext, Drafter, param_specs, parse_params
from .draft_tree import DraftTreeDrafter
from .eagle_static import EagleStaticDrafter
from .goose import GooseDrafter, IsotropicDrafter
from .hf_assisted import HFAssistedDrafter, HFUniversalDrafter
from .hf_prompt_lookup import HFPromptLookupDrafter
from .pld import PLDDrafter
from .stand import StandDrafter
from .talon import TalonDrafter
from .token_recycling import TokenRecyclingDrafter

METHODS: dict[str, type[Drafter]] = {
    d.method_id: d for d in (ARDrafter, PLDDrafter, TokenRecyclingDrafter, DraftTreeDrafter, GooseDrafter, IsotropicDrafter,
                             TalonDrafter, EagleStaticDrafter, StandDrafter, HFPromptLookupDrafter, HFAssistedDrafter,
                             HFUniversalDrafter)
}


def method_class(method: str) -> type[Drafter]:
    try:
        return METHODS[method]
    except KeyError:
        raise SpecVizError(f"unknown method {method!r} (known: {', '.join(METHODS)})") from None


__all__ = ["METHODS", "Drafter", "DraftContext", "method_class", "parse_params", "param_specs"]

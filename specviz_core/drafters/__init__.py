"""Every method, by its id. A method is a drafter behind the one interface in ``base``."""

from __future__ import annotations

from specviz_core.drafters.ar import ARDrafter
from specviz_core.drafters.base import DraftContext, Drafter, param_specs, parse_params
from specviz_core.drafters.draft_tree import DraftTreeDrafter
from specviz_core.drafters.eagle_static import EagleStaticDrafter
from specviz_core.drafters.goose.drafter import GooseDrafter, IsotropicDrafter
from specviz_core.drafters.hf.assisted import HFAssistedDrafter, HFUniversalDrafter
from specviz_core.drafters.hf.prompt_lookup import HFPromptLookupDrafter
from specviz_core.drafters.pld import PLDDrafter
from specviz_core.drafters.stand import StandDrafter
from specviz_core.drafters.talon import TalonDrafter
from specviz_core.drafters.token_recycling import TokenRecyclingDrafter
from specviz_core.errors import SpecVizError

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

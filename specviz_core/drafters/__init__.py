"""Every method's drafter, by its id. A method is a drafter behind the one interface in ``base``; what the
method is (its name, description, parameters) is its card in :mod:`specviz_core.methods`, which needs no torch."""

from __future__ import annotations

from specviz_core.drafters.base import DraftContext, Drafter
from specviz_core.methods import CARDS, card


def method_class(method: str) -> type[Drafter]:
    """The drafter class that runs ``method`` (an unknown id: a one-line error naming the known ones)."""
    return card(method).drafter_class()


#: Every method's drafter class, by id (importing this module imports every drafter, and torch).
METHODS: dict[str, type[Drafter]] = {mid: c.drafter_class() for mid, c in CARDS.items()}

__all__ = ["METHODS", "Drafter", "DraftContext", "method_class"]

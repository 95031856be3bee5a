"""A method's card: what the window, the command line and a replay need to know of a method, without torch."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specviz_core.methods.params import NoParams

#: A draft model in the words of every face that asks for one: the command line, the Python API, the Run panel.
DRAFT_MODEL = "a draft model (--draft-model; draft_model= in Python)"
#: How to draft with the target itself, where the draft model must share its tokenizer.
TARGET_AS_DRAFT = "the target itself works: --draft-model default, or the same model object in Python"


@dataclass(frozen=True)
class MethodCard:
    method_id: str
    description: str
    drafter: str
    """Where the drafter that runs it lives, ``"module:Class"`` (imported on the first live session)."""
    display_name: str = ""
    """The method's name in prose ("Token Recycling"); the id where none is given."""
    params_cls: type = NoParams
    no_draft_reason: str = "nothing was drafted"
    """Why a cycle of this method drafted nothing and fell back to one AR token."""
    no_match_note: str = ""
    """What a tree without a spine means for a spine method whose context match failed ("" if no spine method)."""
    needs_draft_model: bool = False
    draft_shares_tokenizer: bool = True
    """Whether the draft model must share the target's tokenizer (False: it brings its own, re-encoded each cycle)."""
    greedy_only: str = ""
    """Why the method decodes greedily only ("" when it samples too); a session with a temperature is refused with it."""
    budget_ceiling: Callable[[Any], int] | None = None
    """The most draft nodes one cycle may verify with these parameters, where it is not the ``budget`` parameter
    (Goose's confident cycles grow the budget)."""

    def __post_init__(self) -> None:
        if not self.display_name:
            object.__setattr__(self, "display_name", self.method_id)

    def wants_draft_model(self, params: Any) -> bool:
        """Whether a session with ``params`` drafts with a draft model (always, or TALON's ``drafter=model``)."""
        return self.needs_draft_model or getattr(params, "drafter", None) == "model"

    def max_budget(self, params: Any) -> int:
        """The most draft nodes one cycle may verify (``budget=auto`` chooses up to this)."""
        return self.budget_ceiling(params) if self.budget_ceiling is not None else int(params.budget)

    def drafter_class(self) -> type:
        """The drafter class that runs this method (imports torch and the method's module)."""
        module, _, name = self.drafter.partition(":")
        return getattr(importlib.import_module(module), name)

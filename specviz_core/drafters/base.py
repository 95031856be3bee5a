"""The one small interface every method implements.

A drafter proposes a :class:`~specviz_core.tree.DraftTree` each cycle and may
learn from the target's logits afterwards. The engine does everything else
(flattening, the forward, the walk, trimming, recording).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from specviz_core.methods import MethodCard, NoParams
from specviz_core.target_rows import TargetRows
from specviz_core.tree import DraftTree

#: The card's facts a drafter class carries as its own class attributes (``cls.description``...).
CARD_FACTS = ("method_id", "display_name", "description", "params_cls", "no_draft_reason", "no_match_note",
              "needs_draft_model", "draft_shares_tokenizer", "greedy_only")


@dataclass
class DraftContext:
    """What a drafter may look at when it drafts."""

    ids: list[int]
    """Every committed token, prompt included; ``ids[-1]`` is the root."""
    cache_len: int
    """Positions in the target's KV cache (``len(ids) - 1``)."""
    max_depth: int
    """The deepest a node may go without passing the model's context length."""
    generator: torch.Generator
    """The session's only source of randomness."""
    temperature: float
    """0 for greedy; drafters that sample use it."""
    room: int | None = None
    """New tokens the session may still commit (its max new tokens less those committed); None: no limit but
    the context. transformers' candidate generators cap their drafts by it, as ``generate``'s ``max_length`` does."""
    budget: int | None = None
    """With ``budget=auto``: draft at most this many nodes this cycle (the engine then keeps the best
    ones for this hardware). None: the method's own ``budget`` parameter. See ``Drafter.cycle_budget``."""


class Drafter(ABC):
    """Proposes a draft tree each cycle; learns from the target's logits."""

    card: ClassVar[MethodCard]
    """What the method is, torch-free (``specviz_core.methods``); a subclass that runs a method sets it, and its
    facts below follow from it."""
    method_id: ClassVar[str]
    display_name: ClassVar[str]
    """The method's name in prose ("Token Recycling"); the id where none is given."""
    description: ClassVar[str]
    #: Why a cycle of this method drafted nothing and fell back to one AR token.
    no_draft_reason: ClassVar[str] = "nothing was drafted"
    #: What a tree without a spine means for a spine method whose context match failed ("" if no spine method).
    no_match_note: ClassVar[str] = ""
    params_cls: ClassVar[type] = NoParams
    #: When several children match the target's token, the earlier source wins.
    source_priority: ClassVar[tuple[str, ...]] = ()
    needs_draft_model: ClassVar[bool] = False
    #: Whether the draft model must share the target's tokenizer (False: it brings its own, re-encoded each cycle).
    draft_shares_tokenizer: ClassVar[bool] = True
    #: The widest top-k of the target's rows the drafter reads in ``harvest`` (the engine reduces that many once).
    harvest_k: int = 0
    #: Why the method decodes greedily only ("" when it samples too); a session with a temperature is refused with it.
    greedy_only: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "card" in cls.__dict__:
            for name in CARD_FACTS:
                setattr(cls, name, getattr(cls.card, name))

    def __init__(self, params: Any, target: Any, draft_model: Any = None) -> None:
        self.params = params
        self.target = target
        self.draft_model = draft_model

    @classmethod
    def resolve_params(cls, params: Any, target: Any) -> Any:
        """The parameters as a session on ``target`` runs and records them (an ``auto`` choice made)."""
        return params

    def cycle_budget(self, ctx: DraftContext) -> int:
        """Nodes to draft this cycle: ``budget=auto``'s ceiling when it set one, else the ``budget`` parameter."""
        return ctx.budget if ctx.budget is not None else self.params.budget

    def start(self, prompt_ids: list[int]) -> None:
        """A new session begins with this prompt (before the prefill is harvested)."""

    @abstractmethod
    def draft(self, ctx: DraftContext) -> DraftTree:
        """Propose this cycle's tree, rooted at ``ctx.ids[-1]``."""

    def skip(self, ctx: DraftContext) -> DraftTree:
        """A plain cycle: ``budget=auto`` found no draft worth its cost this cycle, so nothing is drafted (the root
        alone). A drafter that carries state from its draft to its harvest and ``accepted`` sets it here too."""
        return DraftTree(root_token=ctx.ids[-1], mode="ar")

    def draft_cost_key(self) -> str | None:
        """What drafts, where drafting runs a model (a draft head, a draft model): ``budget=auto`` prices its steps
        by the cost measured for it (:mod:`specviz_core.runtime.cost_files`) and may skip drafting where it cannot
        pay. None: drafting is the host's bookkeeping."""
        return None

    def catch_up_rows(self, ids: list[int]) -> int:
        """The rows a draft head or draft model would first run, over committed tokens it has not seen, were it to
        draft after ``ids`` now (the whole prompt at its first draft); 0 where drafting runs no model. ``budget=auto``
        prices them before it decides to draft."""
        return 0

    def harvest(self, rows: TargetRows) -> None:
        """Learn from the target: what followed each row it just ran (a verify block's or a prefill chunk's).

        ``rows.top(k)`` gives each row's top-k successors from the one copy a cycle makes (within ``harvest_k``);
        ``rows.prev[i]`` is the token before ``rows.tokens[i]`` on its path (-1 if none), for bigram tables.
        """

    @property
    def harvests(self) -> bool:
        """Whether the drafter learns from the target's rows at all (else a prefill reduces none for it)."""
        return type(self).harvest is not Drafter.harvest

    def accepted(self, tree: DraftTree, accepted_nodes: list[int], committed: list[int]) -> dict[str, Any]:
        """The cycle's outcome; update adaptive state and return state worth recording."""
        return {}

    def stats(self) -> dict[str, Any]:
        """Session statistics worth storing at the end."""
        return {}

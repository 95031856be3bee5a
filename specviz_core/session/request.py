"""What a user asks for: a method with its parameters (:class:`MethodChoice`) and a whole session
(:class:`SessionRequest`). ``check()`` validates everything that needs no model, once; what it
returns (:class:`CheckedRequest`) is what the factory takes, so nothing checks twice."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from specviz_core.engine.budget import split_auto
from specviz_core.errors import SpecVizError
from specviz_core.methods import parse_params
from specviz_core.methods.card import DRAFT_MODEL, TARGET_AS_DRAFT

if TYPE_CHECKING:
    from specviz_core.drafters import Drafter

#: Bounds of a session's numbers (a context longer than this is beyond any model here; a seed is an int64).
MAX_NEW_TOKENS = 1_000_000
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class MethodChoice:
    """A checked method: its drafter class, its parsed parameters and whether ``budget=auto`` was asked."""

    method: str
    cls: type[Drafter]
    params: Any
    """An instance of ``cls.params_cls``."""
    auto: bool = False

    @property
    def recorded_params(self) -> dict[str, Any]:
        """The parameters as a session records them (``budget`` is ``"auto"`` when the controller picks it)."""
        return dict(vars(self.params), **({"budget": "auto"} if self.auto else {}))

    def on(self, target: Any) -> MethodChoice:
        """This choice as it runs on ``target``: any other ``auto`` choice made (``drafter=auto``: the model's
        draft head when it has one). ``budget=auto`` stays: the controller makes it cycle by cycle."""
        return replace(self, params=self.cls.resolve_params(self.params, target))

    @property
    def wants_draft_model(self) -> bool:
        return self.cls.wants_draft_model(self.params)


def check_method(method: str, raw_params: dict[str, Any] | None = None, budget: int | str | None = None
                 ) -> MethodChoice:
    """Parse and validate a method's ``key=value`` parameters. A method with a budget takes ``budget=auto`` (its
    default: chosen for the device), ``budget=paper`` (the paper's own) or a number, in ``raw_params`` or as
    ``budget`` (which wins).

    Loads the method's drafter (and torch): a choice is made to run."""
    from specviz_core.drafters import method_class

    cls = method_class(method)
    raw_params = dict(raw_params or {})
    if isinstance(budget, str):  # a word (auto, paper) or a number as text: the budget parameter's own check
        raw_params["budget"], budget = budget, None
    raw, auto = split_auto(method, cls.params_cls, raw_params)
    if budget is not None:
        if "budget" not in cls.params_cls.__dataclass_fields__:
            raise SpecVizError(f"method {method} has no budget")
        raw["budget"] = budget
        auto = False  # a number: fixed, not the default auto
    params = parse_params(method, cls.params_cls, raw)
    head = getattr(params, "head", "")
    if head:  # a head in EAGLE's layout: found (without loading it), and drafted with
        from specviz_core.runtime.head_files import check_head_folder

        if params.drafter not in ("auto", "head"):
            raise SpecVizError(f"head= (--draft-head) drafts with drafter=head or auto, not drafter={params.drafter}")
        params = replace(params, head=check_head_folder(head))
    return MethodChoice(method, cls, params, auto)


def choice_fields(method: str) -> set[str]:
    """The parameters ``method`` takes (torch-free)."""
    from specviz_core.methods import card

    return set(card(method).params_cls.__dataclass_fields__)


def head_methods() -> list[str]:
    """The methods that draft with a head (``head=``, ``--draft-head``)."""
    from specviz_core.methods import CARDS

    return [m for m, c in CARDS.items() if "head" in c.params_cls.__dataclass_fields__]


@dataclass
class SessionRequest:
    """Everything a user chooses for one session."""

    method: str
    prompt: str
    model: str | None = None
    draft_model: str | None = None
    draft_head: str | None = None
    """A draft head folder (or cached hub id) in EAGLE's published layout: the ``head`` parameter of the methods
    that draft with a head (talon, eagle_static, eagle)."""
    params: dict[str, Any] = field(default_factory=dict)
    budget: int | str | None = None
    """A number of draft nodes, ``"auto"`` or ``"paper"``; None: the method's default (``auto`` for a tree)."""
    max_new_tokens: int = 128
    temperature: float = 0.0
    seed: int = 0
    chat_template: bool | None = None
    """None: use the model's chat template if it has one."""
    device: str | None = None
    dtype: str | None = None
    threads: int | None = None
    """CPU threads for the model's forwards; None: the cores other processes leave free."""

    def check(self) -> CheckedRequest:
        """Validate everything that needs no model."""
        from specviz_core.runtime.models import check_text
        from specviz_core.runtime.threads import check_threads

        params = dict(self.params)
        if self.draft_head:
            if "head" not in choice_fields(self.method):
                raise SpecVizError(f"method {self.method} drafts with no head: --draft-head is for "
                                   f"{', '.join(head_methods())}")
            if params.get("head") not in (None, "", self.draft_head):
                raise SpecVizError(f"--draft-head {self.draft_head} disagrees with head={params['head']}")
            params["head"] = self.draft_head
        choice = check_method(self.method, params, self.budget)
        check_threads(self.threads)
        if not self.prompt or not self.prompt.strip():
            raise SpecVizError("the prompt is empty")
        check_text(self.prompt)
        if not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS:
            raise SpecVizError(f"max new tokens must be from 1 to {MAX_NEW_TOKENS:,}, got {self.max_new_tokens}")
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise SpecVizError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if not 0 <= self.seed <= MAX_SEED:
            raise SpecVizError(f"seed must be from 0 to 2**63 - 1, got {self.seed}")
        if choice.cls.greedy_only and self.temperature > 0:
            raise SpecVizError(f"method {self.method} decodes greedily only (temperature 0): {choice.cls.greedy_only}")
        if choice.wants_draft_model and not self.draft_model:
            why = "" if choice.cls.needs_draft_model else " with drafter=model (drafter=table needs none)"
            which = (f"a model sharing the target's tokenizer; {TARGET_AS_DRAFT}"
                     if choice.cls.draft_shares_tokenizer else "a model with a tokenizer of its own")
            raise SpecVizError(f"method {self.method} needs {DRAFT_MODEL}{why} ({which})")
        return CheckedRequest(self, choice)


@dataclass(frozen=True)
class CheckedRequest:
    """A request that passed :meth:`SessionRequest.check`, with its parsed method."""

    request: SessionRequest
    choice: MethodChoice

    def with_seed(self, seed: int) -> CheckedRequest:
        """The same request with another seed (the samples of one group)."""
        return CheckedRequest(replace(self.request, seed=seed), self.choice)

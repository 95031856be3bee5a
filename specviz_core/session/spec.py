"""A session's settings, once: the table of their limits and defaults (:data:`LIMITS`), what a user asks for
(:class:`SessionRequest`, loosely typed, as a flag, a field or a keyword argument gives it) and the one check that
turns a request into a frozen :class:`SessionSpec`, which is all a :class:`~specviz_core.session.session.Session`
is built from.

Every face reads the same table: the command line's argument types, the Run panel's and the fork dialog's editors,
``specviz.Session`` and ``specviz bench``; so a bound or a default is written here and nowhere else. Torch-free, like
the method cards the check reads: a wrong method, parameter or number is refused before any model (or torch) loads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from specviz_core.engine.budget import split_auto
from specviz_core.errors import SpecVizError
from specviz_core.methods import CARDS, card, parse_params
from specviz_core.methods.card import DRAFT_MODEL, TARGET_AS_DRAFT, MethodCard


@dataclass(frozen=True)
class Limit:
    """One number a session takes: its type, default and bounds, and what it does (a flag's and a field's help)."""

    name: str
    kind: type
    """``int`` or ``float``."""
    default: int | float
    lo: int | float
    hi: int | float
    help: str

    @property
    def words(self) -> str:
        """What the number may be, in the words every face says it: "a whole number from 1 to 1,000,000"."""
        if self.kind is int:
            return f"a whole number from {self.lo:,} to {self.hi:,}"
        return f"a number from {self.lo:g} to {self.hi:g}"

    def check(self, value: Any, what: str | None = None) -> int | float:
        """``value`` as this number, or one line saying what it must be. A fraction is not a whole number, and
        neither a bool nor a text is a number (a flag's text goes through :meth:`parse`)."""
        bad = SpecVizError(f"{what or self.name} must be {self.words}, got {value!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        if isinstance(value, float) and not math.isfinite(value):
            raise bad
        if self.kind is int:
            if isinstance(value, float) and not value.is_integer():
                raise bad
            value = int(value)
        else:
            value = float(value)
        if not self.lo <= value <= self.hi:
            raise bad
        return value

    def parse(self, text: str) -> int | float:
        """A flag's text as this number (argparse's ``type=``: a wrong value is a usage error, one line)."""
        import argparse

        try:
            value: int | float = int(text.strip()) if self.kind is int else float(text.strip())
            return self.check(value)
        except (ValueError, SpecVizError):
            raise argparse.ArgumentTypeError(f"must be {self.words}, got {text!r}") from None


#: The numbers every session takes, with their one set of bounds and defaults.
LIMITS: dict[str, Limit] = {lim.name: lim for lim in (
    Limit("max_new_tokens", int, 128, 1, 1_000_000,
          "stop after this many new tokens (the end-of-sequence token stops sooner)"),
    Limit("temperature", float, 0.0, 0.0, 100.0, "0 decodes greedily; above 0 samples (verification stays lossless)"),
    Limit("seed", int, 0, 0, 2**63 - 1, "seed of the session's one random generator: same seed, same session"),
    Limit("samples", int, 1, 1, 1000, "decode the prompt N times (seeds seed..seed+N-1) as one group, one drafter "
                                      "throughout"),
)}
MAX_NEW_TOKENS = LIMITS["max_new_tokens"]
TEMPERATURE = LIMITS["temperature"]
SEED = LIMITS["seed"]
SAMPLES = LIMITS["samples"]

#: The words ``budget`` takes besides a number.
BUDGET_WORDS = ("auto", "paper")


@dataclass(frozen=True)
class MethodChoice:
    """A checked method: its card, its parsed parameters and whether ``budget=auto`` was asked. Torch-free: the
    drafter class that runs it is imported from the card when a live session starts."""

    method: str
    params: Any
    """An instance of the card's ``params_cls``."""
    auto: bool = False

    @property
    def card(self) -> MethodCard:
        return CARDS[self.method]

    @property
    def drafter_class(self) -> type:
        """The drafter that runs this choice (imports torch)."""
        return self.card.drafter_class()

    @property
    def recorded_params(self) -> dict[str, Any]:
        """The parameters as a session records them (``budget`` is ``"auto"`` when the controller picks it)."""
        return dict(vars(self.params), **({"budget": "auto"} if self.auto else {}))

    def on(self, target: Any) -> MethodChoice:
        """This choice as it runs on ``target``: any other ``auto`` choice made (``drafter=auto``: the model's
        draft head when it has one). ``budget=auto`` stays: the controller makes it cycle by cycle."""
        return replace(self, params=self.drafter_class.resolve_params(self.params, target))

    @property
    def wants_draft_model(self) -> bool:
        return self.card.wants_draft_model(self.params)

    @property
    def max_budget(self) -> int:
        return self.card.max_budget(self.params)


def check_method(method: Any, raw_params: dict[str, Any] | None = None, budget: int | str | None = None
                 ) -> MethodChoice:
    """Parse and validate a method's ``key=value`` parameters. A method with a budget takes ``budget=auto`` (its
    default: chosen for the device), ``budget=paper`` (the paper's own) or a number, in ``raw_params`` or as
    ``budget`` (which wins). Torch-free."""
    if not isinstance(method, str):
        raise SpecVizError(f"method must be a method's name (known: {', '.join(CARDS)}), got {method!r}")
    c = card(method)
    raw_params = dict(raw_params or {})
    if isinstance(budget, str):  # a word (auto, paper) or a number as text: the budget parameter's own check
        raw_params["budget"], budget = budget, None
    raw, auto = split_auto(method, c.params_cls, raw_params)
    if budget is not None:
        if "budget" not in c.params_cls.__dataclass_fields__:
            raise SpecVizError(f"method {method} has no budget")
        raw["budget"] = budget
        auto = False  # a number: fixed, not the default auto
    params = parse_params(method, c.params_cls, raw)
    head = getattr(params, "head", "")
    if head:  # a head in EAGLE's layout: found (without loading it), and drafted with
        from specviz_core.runtime.head_files import check_head_folder

        if params.drafter not in ("auto", "head"):
            raise SpecVizError(f"head= (--draft-head) drafts with drafter=head or auto, not drafter={params.drafter}")
        params = replace(params, head=check_head_folder(head))
    return MethodChoice(method, params, auto)


def choice_fields(method: str) -> set[str]:
    """The parameters ``method`` takes."""
    return set(card(method).params_cls.__dataclass_fields__)


def head_methods() -> list[str]:
    """The methods that draft with a head (``head=``, ``--draft-head``)."""
    return [m for m, c in CARDS.items() if "head" in c.params_cls.__dataclass_fields__]


def draft_model_methods() -> list[str]:
    """The methods that can draft with a draft model, in words."""
    out = []
    for m, c in CARDS.items():
        if c.needs_draft_model:
            out.append(m)
        elif "model" in (c.params_cls.__dataclass_fields__.get("drafter").metadata.get("choices") or ()
                         if "drafter" in c.params_cls.__dataclass_fields__ else ()):
            out.append(f"{m} (drafter=model)")
    return out


def check_prompt(prompt: Any) -> tuple[str, tuple[int, ...] | None]:
    """A prompt as text, or as token ids (a list or tuple of whole numbers, checked against the model's vocabulary
    once it is loaded); one line for anything else."""
    from specviz_core.runtime.vocab import check_text

    if isinstance(prompt, str):
        if not prompt.strip():
            raise SpecVizError("the prompt is empty")
        check_text(prompt)
        return prompt, None
    if isinstance(prompt, (list, tuple)) or type(prompt).__name__ in ("Tensor", "ndarray"):
        try:
            ids = [v.item() if hasattr(v, "item") else v for v in (prompt.tolist() if hasattr(prompt, "tolist")
                                                                    else prompt)]
        except (TypeError, ValueError):
            ids = [None]
        if not ids:
            raise SpecVizError("the prompt is empty")
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in ids):
            raise SpecVizError("a prompt of token ids must be a flat list of whole numbers from 0 up, got "
                               f"{_short(prompt)}")
        return "", tuple(ids)
    raise SpecVizError(f"the prompt must be a text or a list of token ids, got {_short(prompt)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass
class SessionRequest:
    """Everything a user chooses for one session, as they gave it (checked by :meth:`check`)."""

    method: Any
    prompt: Any
    """A text, or token ids (a list of whole numbers)."""
    model: str | None = None
    draft_model: str | None = None
    draft_head: str | None = None
    """A draft head folder (or cached hub id) in EAGLE's published layout: the ``head`` parameter of the methods
    that draft with a head (talon, eagle_static, eagle)."""
    params: dict[str, Any] = field(default_factory=dict)
    budget: Any = None
    """A number of draft nodes, ``"auto"`` or ``"paper"``; None: the method's default (``auto`` for a tree)."""
    max_new_tokens: Any = MAX_NEW_TOKENS.default
    temperature: Any = TEMPERATURE.default
    seed: Any = SEED.default
    chat_template: bool | None = None
    """None: use the model's chat template if it has one."""
    device: str | None = None
    dtype: str | None = None
    threads: Any = None
    """CPU threads for the model's forwards; None: the cores other processes leave free."""

    def check(self) -> SessionSpec:
        """Validate everything that needs no model, in one place, without torch."""
        from specviz_core.runtime.threads import check_threads

        if not isinstance(self.params, dict):
            raise SpecVizError(f"method parameters must be a dict of key=value, got {_short(self.params)}")
        params = dict(self.params)
        if self.draft_head:
            if "head" not in choice_fields(self.method):
                raise SpecVizError(f"method {self.method} drafts with no head: --draft-head is for "
                                   f"{', '.join(head_methods())}")
            if params.get("head") not in (None, "", self.draft_head):
                raise SpecVizError(f"--draft-head {self.draft_head} disagrees with head={params['head']}")
            params["head"] = self.draft_head
        choice = check_method(self.method, params, self.budget)
        threads = check_threads(self.threads)
        text, ids = check_prompt(self.prompt)
        max_new = MAX_NEW_TOKENS.check(self.max_new_tokens)
        temperature = TEMPERATURE.check(self.temperature)
        seed = SEED.check(self.seed)
        c = choice.card
        if c.greedy_only and temperature > 0:
            raise SpecVizError(f"method {self.method} decodes greedily only (temperature 0): {c.greedy_only}")
        if choice.wants_draft_model and not self.draft_model:
            why = "" if c.needs_draft_model else " with drafter=model (drafter=table needs none)"
            which = (f"a model sharing the target's tokenizer; {TARGET_AS_DRAFT}"
                     if c.draft_shares_tokenizer else "a model with a tokenizer of its own")
            raise SpecVizError(f"method {self.method} needs {DRAFT_MODEL}{why} ({which})")
        if self.draft_model and not choice.wants_draft_model:
            hint = (" (add drafter=model to draft with it)" if "drafter" in choice_fields(self.method) else "")
            raise SpecVizError(f"method {self.method} drafts with no draft model{hint}; a draft model is for "
                               f"{', '.join(draft_model_methods())}")
        return SessionSpec(choice=choice, prompt=text, prompt_ids=ids, model=self.model,
                           draft_model=self.draft_model if choice.wants_draft_model else None,
                           device=self.device, dtype=self.dtype, threads=threads, max_new_tokens=int(max_new),
                           temperature=float(temperature), seed=int(seed), chat_template=self.chat_template)


@dataclass(frozen=True)
class SessionSpec:
    """A checked session: the method and its parameters, the prompt, the models, and the decode settings. What a
    :class:`~specviz_core.session.session.Session` is built from (a fork switches from its parent's spec to its own
    at a cycle). Made by :meth:`SessionRequest.check` alone."""

    choice: MethodChoice
    prompt: str
    """The prompt as the user typed it ("" when it was given as token ids)."""
    prompt_ids: tuple[int, ...] | None = None
    """The prompt as token ids, when given so (the Python API, a recorded session re-run): used as they are."""
    model: str | None = None
    draft_model: str | None = None
    """Set only where the method drafts with one."""
    device: str | None = None
    dtype: str | None = None
    threads: int | None = None
    max_new_tokens: int = MAX_NEW_TOKENS.default  # type: ignore[assignment]
    temperature: float = TEMPERATURE.default
    seed: int = SEED.default  # type: ignore[assignment]
    chat_template: bool | None = None

    @property
    def method(self) -> str:
        return self.choice.method

    def with_seed(self, seed: int) -> SessionSpec:
        """The same session with another seed (the samples of one group)."""
        return replace(self, seed=int(SEED.check(seed)))

    def with_prompt_ids(self, ids: Sequence[int], text: str | None = None) -> SessionSpec:
        """The same session on these token ids (``text``: what they say, for the record)."""
        return replace(self, prompt_ids=tuple(int(i) for i in ids), prompt=self.prompt if text is None else text)


def spec_for(choice: MethodChoice, prompt_ids: Sequence[int], *, max_new_tokens: int = MAX_NEW_TOKENS.default,
             temperature: float = 0.0, seed: int = 0, prompt: str = "", draft_model: str | None = None) -> SessionSpec:
    """A spec for a method already checked (a bench row, a reproduction, the AR baseline) on token ids: the prompt and
    the numbers go through the same check as any request's."""
    plain = SessionRequest(method="ar", prompt=list(prompt_ids), max_new_tokens=max_new_tokens,
                           temperature=temperature, seed=seed).check()
    return replace(plain, choice=choice, prompt=prompt, draft_model=draft_model if choice.wants_draft_model else None)


__all__ = ["BUDGET_WORDS", "LIMITS", "Limit", "MethodChoice", "SessionRequest", "SessionSpec", "check_method",
           "check_prompt", "choice_fields", "head_methods", "spec_for"]

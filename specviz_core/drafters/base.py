"""The one small interface every method implements, and its parameters.

A drafter proposes a :class:`~specviz_core.tree.DraftTree` each cycle and may
learn from the target's logits afterwards. The engine does everything else
(flattening, the forward, the walk, trimming, recording).
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from specviz_core.errors import SpecVizError
from specviz_core.tree import DraftTree


def param(default: Any, help: str, minimum: float | None = None, choices: tuple[str, ...] | None = None,
          maximum: float | None = None) -> Any:
    """A method parameter: a dataclass field with a default, a help text and bounds (the CLI and the window's
    editors both check against them)."""
    return dataclasses.field(default=default, metadata={"help": help, "minimum": minimum, "maximum": maximum,
                                                        "choices": choices})


@dataclass(frozen=True)
class NoParams:
    """A method without parameters."""


def param_specs(params_cls: type) -> list[dataclasses.Field]:
    return list(dataclasses.fields(params_cls))


def parse_kv(items: Iterable[str]) -> dict[str, str]:
    """``--param key=value`` arguments as a dict of strings (``parse_params`` checks them per method)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecVizError(f"--param takes key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def parse_params(method: str, params_cls: type, raw: dict[str, str | Any]) -> Any:
    """Build a params dataclass from ``key=value`` strings (or typed values), checking every one."""
    fields = {f.name: f for f in dataclasses.fields(params_cls)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in fields:
            known = ", ".join(sorted(fields)) or "none"
            raise SpecVizError(f"unknown parameter {key!r} for method {method} (known: {known})")
        f = fields[key]
        kind = type(f.default)
        try:
            if isinstance(value, str) and kind is bool:
                if value.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(value)
                v: Any = value.lower() in ("1", "true", "yes", "on")
            elif isinstance(value, str) and kind in (int, float):
                v = kind(float(value)) if kind is int and float(value).is_integer() else kind(value)
            else:
                v = kind(value)
        except (TypeError, ValueError, OverflowError):
            raise SpecVizError(f"parameter {key} must be a {kind.__name__}, got {value!r}") from None
        if isinstance(v, float) and not math.isfinite(v):
            raise SpecVizError(f"parameter {key} must be a finite number, got {value!r}")
        lo, hi = f.metadata.get("minimum"), f.metadata.get("maximum")
        if lo is not None and v < lo:
            raise SpecVizError(f"parameter {key} must be at least {lo:g}, got {v}")
        if hi is not None and v > hi:
            raise SpecVizError(f"parameter {key} must be at most {hi:g}, got {v}")
        choices = f.metadata.get("choices")
        if choices and v not in choices:
            raise SpecVizError(f"parameter {key} must be one of {', '.join(choices)}, got {v!r}")
        values[key] = v
    return params_cls(**values)


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
    #: Why the method decodes greedily only ("" when it samples too); a session with a temperature is refused with it.
    greedy_only: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "method_id" in cls.__dict__ and "display_name" not in cls.__dict__:
            cls.display_name = cls.method_id

    def __init__(self, params: Any, target: Any, draft_model: Any = None) -> None:
        self.params = params
        self.target = target
        self.draft_model = draft_model

    @classmethod
    def wants_draft_model(cls, params: Any) -> bool:
        """Whether a session with these parameters needs a draft model (TALON's ``drafter=model``)."""
        return cls.needs_draft_model

    @classmethod
    def resolve_params(cls, params: Any, target: Any) -> Any:
        """The parameters as a session on ``target`` runs and records them (an ``auto`` choice made)."""
        return params

    @classmethod
    def max_budget(cls, params: Any) -> int:
        """The most draft nodes one cycle may verify (``budget=auto`` chooses up to this): the ``budget`` parameter."""
        return params.budget

    def cycle_budget(self, ctx: DraftContext) -> int:
        """Nodes to draft this cycle: ``budget=auto``'s ceiling when it set one, else the ``budget`` parameter."""
        return ctx.budget if ctx.budget is not None else self.params.budget

    def start(self, prompt_ids: list[int]) -> None:
        """A new session begins with this prompt (before the prefill is harvested)."""

    @abstractmethod
    def draft(self, ctx: DraftContext) -> DraftTree:
        """Propose this cycle's tree, rooted at ``ctx.ids[-1]``."""

    def harvest(self, tokens: torch.Tensor, logits: torch.Tensor, prev: torch.Tensor | None = None) -> None:
        """Learn from the target: ``logits[i]`` ([n, V]) is what followed ``tokens[i]`` ([n]).

        ``prev[i]`` is the token before ``tokens[i]`` on its path (-1 if none), for bigram tables.
        """

    def accepted(self, tree: DraftTree, accepted_nodes: list[int], committed: list[int]) -> dict[str, Any]:
        """The cycle's outcome; update adaptive state and return state worth recording."""
        return {}

    def stats(self) -> dict[str, Any]:
        """Session statistics worth storing at the end."""
        return {}

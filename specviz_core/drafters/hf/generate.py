"""transformers' own candidate generators, driven one SpecViz cycle at a time.

``generate(assistant_model=...)`` and ``generate(prompt_lookup_num_tokens=...)`` run ``_assisted_decoding``:
every iteration asks a candidate generator for a chain (``get_candidates``), verifies it with one target
forward, keeps the leading tokens the target agrees with plus one token of the target's own, cuts at EOS and
``max_length``, and tells the generator how many draft tokens it kept (``update_candidate_strategy``), which is
where the heuristic schedule and the confidence threshold adapt.

The drafters here build the generator ``generate`` would build, from the generation config ``generate`` would
build (the model's own ``generation_config`` with the call's arguments on top), and call it at the same points:
``get_candidates`` when drafting, ``update_candidate_strategy`` after the cycle, with the same ``num_matches``
(tokens committed less the bonus, after the cut at EOS and ``max_new_tokens``, as ``_assisted_decoding``
recomputes it) and the same scores tensor (the verify rows' logits, [1, candidates + 1, V]). The generator keeps
its own state between cycles (the assistant's KV cache, which it crops itself on the next call from the tokens it
is given, the schedule, the re-encoding windows), exactly as inside ``generate``. SpecViz's engine does the
verify: a chain is a one-branch tree, and its greedy walk is ``_assisted_decoding``'s rule (leading matches of
the target's argmax, then the argmax after the last match).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from specviz_core.drafters.base import DraftContext, Drafter
from specviz_core.errors import SpecVizError
from specviz_core.target_rows import TargetRows
from specviz_core.tree import DraftTree


@contextlib.contextmanager
def assistant_settings(model: Any, **settings: Any) -> Iterator[None]:
    """Give ``model`` (an assistant) these ``generation_config`` settings for the ``with`` block, then put its
    own config back: how a test or the bench makes ``generate`` draft with a method's parameters."""
    saved = model.generation_config
    cfg = copy.deepcopy(saved)
    for key, value in settings.items():
        setattr(cfg, key, value)
    model.generation_config = cfg
    try:
        yield
    finally:
        model.generation_config = saved


@contextlib.contextmanager
def quiet_generation() -> Iterator[None]:
    """The assistant's inner ``generate`` logs a deprecation notice about its own arguments: not the user's concern."""
    log = logging.getLogger("transformers.generation.utils")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def generation_config_for(model: Any, input_len: int, max_new_tokens: int, **kwargs: Any) -> Any:
    """The generation config ``model.generate(input_ids, max_new_tokens=..., **kwargs)`` decodes with: the model's
    own ``generation_config``, transformers' defaults, then ``kwargs``; special tokens as tensors; ``max_length``
    from ``max_new_tokens``."""
    try:
        cfg, unused = model._prepare_generation_config(None, max_new_tokens=max_new_tokens, **kwargs)
        model._prepare_special_tokens(cfg, False, device=model.device, batch_size=1)
    except (ValueError, TypeError) as e:
        raise SpecVizError(f"transformers refused the generation settings: {e}") from None
    if unused:
        raise SpecVizError(f"not generation settings: {', '.join(sorted(unused))}")
    cfg.max_length = input_len + max_new_tokens
    return cfg


def model_kwargs_for(model: Any, input_ids: torch.Tensor) -> dict[str, Any]:
    """The model kwargs ``generate`` hands a candidate generator for an unpadded prompt: no attention mask (an
    all-ones mask is dropped), position ids ``0..n-1``, ``logits_to_keep=1`` where the model takes it."""
    kwargs: dict[str, Any] = {"attention_mask": None}
    kwargs["position_ids"] = torch.arange(input_ids.shape[1], device=input_ids.device)[None]  # [1, n]
    if model._supports_logits_to_keep():
        kwargs["logits_to_keep"] = 1
    kwargs["use_cache"] = True
    return kwargs


def check_no_processors(model: Any, cfg: Any, input_ids: torch.Tensor) -> Any:
    """The logits processors ``generate`` would apply; refuse any: SpecViz verifies the target's raw argmax."""
    from transformers import LogitsProcessorList

    procs = model._get_logits_processor(generation_config=cfg, input_ids_seq_length=input_ids.shape[1],
                                        encoder_input_ids=input_ids, logits_processor=LogitsProcessorList(),
                                        device=input_ids.device, model_kwargs={})
    if len(procs):
        names = ", ".join(type(p).__name__ for p in procs)
        raise SpecVizError(f"the model's generation_config makes generate() change the logits ({names}); "
                           "SpecViz verifies the target's plain greedy choice")
    return procs


@dataclass(frozen=True)
class AssistantCall:
    """One ``generate`` call of the assistant inside ``get_candidates``."""

    input_ids: list[int]
    """What the assistant was given (in its own tokens)."""
    max_new_tokens: int
    """The cap it drafted under: ``num_assistant_tokens``, or less near ``max_length``."""
    drafted: list[int]
    """The assistant tokens it drafted (its own tokens)."""
    probs: list[float]
    """The assistant's probability of each drafted token: what the confidence threshold is compared with."""


class AssistantSpy:
    """Stands in for the assistant inside a candidate generator: forwards everything to the model and notes each
    ``generate`` call (its input, cap and output), from which the chain's stop reason is read. Observes only."""

    def __init__(self, model: Any) -> None:
        object.__setattr__(self, "_model", model)
        self.last: AssistantCall | None = None
        self.count = 0

    def __getattr__(self, name: str) -> Any:  # only for what the spy does not have itself
        return getattr(self._model, name)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        out = self._model.generate(*args, **kwargs)
        self.count += 1
        try:  # observing must never change or break the call: what cannot be read is left out
            given = kwargs.get("input_ids", args[0] if args else None)
            n = given.shape[1]
            drafted = out.sequences[0, n:].tolist()
            probs: list[float] = []
            if out.scores and len(out.scores) >= len(drafted) and all(s.shape[-1] > t for s, t in
                                                                      zip(out.scores, drafted)):
                rows = torch.stack([s[0] for s in out.scores[: len(drafted)]]).float()  # [k, V]
                picked = torch.tensor(drafted, device=rows.device)[:, None]  # [k, 1]
                probs = torch.softmax(rows, dim=-1).gather(1, picked)[:, 0].tolist()
            self.last = AssistantCall(given[0].tolist(), int(kwargs.get("max_new_tokens", 0)), drafted, probs)
        except (AttributeError, IndexError, TypeError, RuntimeError):
            self.last = None
        return out


def assistant_stop(call: AssistantCall | None, eos: Sequence[int], threshold: float, num_assistant_tokens: int
                   ) -> tuple[str, str]:
    """Why the assistant stopped drafting: a short code and a sentence."""
    if call is None or call.max_new_tokens <= 0:
        return "max_length", "no room: the target's max_length leaves no token to draft"
    n = len(call.drafted)
    if n and call.drafted[-1] in eos:
        return "eos", f"the assistant drafted EOS after {n - 1} token{'s' if n != 2 else ''}"
    if n >= call.max_new_tokens:
        if call.max_new_tokens < num_assistant_tokens:
            return "max_length", f"the length cap: {n} tokens fill the room left before max_length"
        return "num_assistant_tokens", f"the length cap: num_assistant_tokens={num_assistant_tokens} drafted"
    if threshold > 0 and n and len(call.probs) == n and call.probs[-1] < threshold:
        return "confidence", (f"confidence below the threshold: the assistant gave token {n} probability "
                              f"{call.probs[-1]:.3f} < {threshold:.3g}")
    return "other", f"the assistant stopped after {n} tokens"


class CandidateDrafter(Drafter):
    """A drafter that is one of transformers' candidate generators, called as ``_assisted_decoding`` calls it."""

    #: The ``source`` of the chain's nodes.
    node_source: ClassVar[str] = "draft"

    def __init__(self, params: Any, target: Any, draft_model: Any = None) -> None:
        super().__init__(params, target, draft_model)
        self.generator: Any = None
        self._ids: list[int] = []
        self._logits: torch.Tensor | None = None
        self._drafted = False
        self.cycles = 0
        self.drafted_total = 0
        self.matched_total = 0

    @abstractmethod
    def make_generator(self, input_ids: torch.Tensor, max_new_tokens: int) -> Any:
        """The candidate generator ``generate`` would build for this prompt and token limit."""

    def settings(self) -> dict[str, Any]:
        """The generator's adaptive settings now (recorded before the cycle's draft and after its update)."""
        return {}

    def describe(self, ids: list[int], drafted: list[int]) -> tuple[list[float] | None, dict[str, Any]]:
        """The chain's node scores (None: all 1) and the cycle's state: why the chain stopped, and so on."""
        return None, {}

    def start(self, prompt_ids: list[int]) -> None:
        self.generator = None  # built at the first draft, when the token limit is known
        self._logits = None
        self._drafted = False

    def draft(self, ctx: DraftContext) -> DraftTree:
        dev = self.target.device
        ids = torch.tensor([ctx.ids], device=dev)  # [1, L]: every committed token, the root last
        if self.generator is None:
            room = ctx.room if ctx.room is not None else ctx.max_depth + 1
            self.generator = self.make_generator(ids, room)
        before = self.settings()
        with quiet_generation(), torch.no_grad():
            candidates, _ = self.generator.get_candidates(ids)
        drafted = candidates[0, ids.shape[1]:].tolist()
        scores, state = self.describe(list(ctx.ids), drafted)
        tree = DraftTree(root_token=ctx.ids[-1], mode="chain" if drafted else "ar")
        tree.add_chain(drafted, self.node_source, scores=scores)
        tree.state = {**state, **before, "candidate_length": len(drafted)}
        self._ids = list(ctx.ids)
        self._drafted = True
        return tree

    def harvest(self, rows: TargetRows) -> None:
        if self._drafted:  # the verify rows of the chain just drafted (prefill chunks are not the generator's)
            self._logits = rows.logits
            self._drafted = False

    def accepted(self, tree: DraftTree, accepted_nodes: list[int], committed: list[int]) -> dict[str, Any]:
        # _assisted_decoding: n_matches = valid tokens - 1, after the cut at EOS and max_length.
        n_matches = len(committed) - 1
        ids = torch.tensor([self._ids + list(committed)], device=self.target.device)  # [1, L + n_matches + 1]
        assert self._logits is not None
        scores = self._logits.float()[None]  # [1, verified candidates + 1, V], as new_logits
        self.generator.update_candidate_strategy(ids, scores, n_matches)
        self._logits = None
        self.cycles += 1
        self.drafted_total += tree.n_verified - 1
        self.matched_total += n_matches
        after = {f"{k}_next": v for k, v in self.settings().items()}
        return {"n_matches": n_matches, **after}

    def stats(self) -> dict[str, Any]:
        return {"cycles": self.cycles, "drafted": self.drafted_total, "matched": self.matched_total,
                **self.settings()}

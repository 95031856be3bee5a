"""The decode engine: one cycle at a time, every method through the same steps, knowing no drafter.

draft -> plan (context gate, budget, recorded decisions, padding) -> verify (one target forward) -> walk -> trim
-> harvest -> commit -> record. The cache holds every committed token but the root (``cache_len`` positions) at the
start of every cycle but the first: the prefill runs the whole prompt, as ``generate`` and the official decoders do,
and keeps its last row as the first root's verify (``Engine._verify``, the one place cycle 0 differs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from transformers import DynamicCache

from specviz_core.analysis.timing import padded_rows
from specviz_core.drafters.base import DraftContext, Drafter
from specviz_core.engine.forward import verify_forward
from specviz_core.engine.record import cycle_record
from specviz_core.engine.verify import WalkResult, children_rows, greedy_walk, sampling_walk
from specviz_core.errors import SpecVizError
from specviz_core.records import CycleDecisions, CycleRecord
from specviz_core.runtime import kv
from specviz_core.runtime import threads as cpu_threads
from specviz_core.runtime.feature_tap import kept_features
from specviz_core.runtime.models import LoadedModel, synchronize
from specviz_core.target_rows import TargetRows, Verified, target_rows
from specviz_core.tree import DraftTree, VerifyBlock, flatten

if TYPE_CHECKING:
    from specviz_core.analysis.timing import CostCurve
    from specviz_core.engine.budget import BudgetController

PREFILL_CHUNK = 512


@dataclass(frozen=True)
class DecodeConfig:
    max_new_tokens: int = 128
    """Stop after this many new tokens."""
    temperature: float = 0.0
    """0 for greedy; otherwise the target's logits are divided by it before sampling."""
    seed: int = 0
    """Seed of the session's single ``torch.Generator``."""
    stop_on_eos: bool = True
    pad_rows: bool = True
    """Run a verify block as a bigger one where this device's cost curve says the bigger costs less (a CPU's
    matrix kernels: :func:`~specviz_core.analysis.timing.padded_rows`); the padding changes no logit."""


class Laps:
    """A cycle's stage clock: ``lap(stage)`` ends the stage (the device synced first) and records its ms."""

    def __init__(self, clock: Callable[[], float], sync: Callable[[], None]) -> None:
        self.clock, self.sync = clock, sync
        self.t = clock()
        self.ms: dict[str, float] = {}

    def __call__(self, stage: str) -> None:
        self.sync()
        t = self.clock()
        self.ms[stage] = (t - self.t) * 1000.0
        self.t = t


class Engine:
    """Decodes one prompt with one drafter; ``step()`` returns one immutable cycle record."""

    def __init__(
        self,
        target: LoadedModel,
        drafter: Drafter,
        prompt_ids: list[int],
        config: DecodeConfig = DecodeConfig(),
        clock: Callable[[], float] = time.perf_counter,
        budget: BudgetController | None = None,
        pad_curve: CostCurve | None = None,
    ) -> None:
        """``budget``: ``budget=auto``'s controller, which sizes every cycle's tree (None: the method's own budget).
        ``pad_curve``: this device's verify-cost curve, to pad blocks by (``DecodeConfig.pad_rows``) where there is no
        controller; a controller pads by its own curve once it is known."""
        if not prompt_ids:
            raise SpecVizError("the prompt is empty")
        if config.max_new_tokens < 1:
            raise SpecVizError("max new tokens must be at least 1")
        if config.temperature < 0:
            raise SpecVizError("temperature must be >= 0")
        self.context_length = ctx = target.context_length
        if len(prompt_ids) >= ctx:
            raise SpecVizError(
                f"the prompt is {len(prompt_ids)} tokens but the model's context is {ctx}: shorten the prompt"
            )
        self.target = target
        self.drafter = drafter
        self.config = config
        self.clock = clock
        self.budget = budget
        self.pad_curve = pad_curve
        if budget is not None:
            budget.pad = config.pad_rows
        self.prompt_ids = list(prompt_ids)
        self.ids: list[int] = list(prompt_ids)
        self.generator = torch.Generator(device="cpu").manual_seed(config.seed)
        self.cache = DynamicCache()
        self.cycle_index = 0
        self.n_forward = 0
        self.stop_reason = ""
        self.prefill_ms = 0.0
        self.eos = set(target.eos_token_ids) if config.stop_on_eos else set()
        self._prefilled = False
        self.decided: dict[int, CycleDecisions] = {}
        """Decisions to apply instead of making them, by cycle index (:meth:`reuse_decisions`)."""
        self._first_row: Verified | None = None
        """The prefill's last row (logits [1, V] and a draft head's features of it), until cycle 0 uses or drops it."""

    # -- public state ---------------------------------------------------------
    @property
    def output_ids(self) -> list[int]:
        return self.ids[len(self.prompt_ids):]

    @property
    def cache_len(self) -> int:
        return len(self.ids) - 1

    @property
    def done(self) -> bool:
        return bool(self.stop_reason)

    @property
    def prefilled(self) -> bool:
        """Whether the prompt is in the cache (:meth:`prefill` ran)."""
        return self._prefilled

    def reuse_decisions(self, records: Iterator[CycleRecord] | list[CycleRecord]) -> None:
        """Re-run these recorded cycles as they decided: each one's draft ceiling, the nodes ``budget=auto`` kept and
        the rows its forward ran are applied, never decided again from this machine's curve (a fork's re-run)."""
        self.decided = {r.index: r.decisions for r in records}

    def switch(self, config: DecodeConfig, drafter: Drafter | None = None,
               budget: BudgetController | None = None) -> float:
        """Go on from the next cycle with other settings (a fork's): ``config`` applies from here (another seed starts
        a new random stream; a higher token limit lifts a stop at the old one); ``drafter`` replaces the drafter,
        started on the committed tokens as its prompt and warmed with a plain forward over them, ``budget`` its
        controller (None: its own budget). Returns the ms the new drafter took to warm (0 without one)."""
        if self.stop_reason == "max_new_tokens" and config.max_new_tokens > len(self.output_ids):
            self.stop_reason = ""
        if config.seed != self.config.seed:
            self.generator = torch.Generator(device="cpu").manual_seed(config.seed)
        warm_ms = 0.0
        if drafter is not None:
            t0 = self.clock()
            drafter.start(list(self.ids))
            prefill_into(self.target, drafter, self.ids[:-1], DynamicCache())
            self.drafter, self.budget = drafter, budget
            if budget is not None:
                budget.pad = config.pad_rows
            warm_ms = (self.clock() - t0) * 1000.0
        self.config = config
        return warm_ms

    def rows_to_run(self, rows: int) -> int:
        """The rows a verify block of ``rows`` runs as: padded where this device's curve says a bigger block costs
        less (the controller's curve once known, else ``pad_curve``), else ``rows``."""
        if not self.config.pad_rows:
            return rows
        curve = self.budget.curve if self.budget is not None else self.pad_curve
        return padded_rows(curve, rows) if curve is not None else rows

    # -- the cycle ------------------------------------------------------------
    def _sync(self) -> None:
        if self.target.device.type != "cpu":  # a CPU's work is done when its call returns
            synchronize(self.target.device)

    @torch.no_grad()
    def prefill(self) -> float:
        """Run the prompt into the cache, keeping the last row's logits for cycle 0; returns ms. The drafter
        harvests every row but the last (the first root's), which it harvests in cycle 0 as in every cycle."""
        if self._prefilled:
            return self.prefill_ms
        t0 = self.clock()
        self.drafter.start(list(self.prompt_ids))
        self.cache, self._first_row = prefill_into(self.target, self.drafter, self.prompt_ids, self.cache,
                                                   keep_last_row=True)
        self._sync()
        self.prefill_ms = (self.clock() - t0) * 1000.0
        self._prefilled = True
        return self.prefill_ms

    @torch.no_grad()
    def step(self) -> CycleRecord:
        """Run one cycle and return its record: draft, plan, verify, walk, trim, harvest, commit, record."""
        if self.done:
            raise SpecVizError(f"the session is finished ({self.stop_reason})")
        self.prefill()
        cfg, cache_len = self.config, self.cache_len
        lap = Laps(self.clock, self._sync)
        decided = self.decided.get(self.cycle_index)
        if decided is not None:  # a fork's re-run: as recorded
            ceiling, depth = decided.ceiling, decided.depth
        else:
            ceiling, depth = (self.budget.begin_cycle(cache_len, self.drafter.catch_up_rows(self.ids), self.room)
                              if self.budget is not None else (None, None))
        ctx = DraftContext(ids=list(self.ids), cache_len=cache_len, generator=self.generator,
                           max_depth=self.max_depth if depth is None else min(self.max_depth, depth),
                           temperature=cfg.temperature, budget=ceiling, room=self.room)
        tree = self.drafter.skip(ctx) if ceiling == 0 else self.drafter.draft(ctx)  # 0: a plain cycle, no draft
        block, rows_run = self._plan(tree, decided, ceiling, depth)
        lap("draft")
        verified = self._verify(tree, block, rows_run)
        lap("forward")
        probs = torch.softmax(verified.logits / cfg.temperature, dim=-1) if cfg.temperature > 0 else None
        rows = target_rows(verified.logits, block.tokens, block.parent_rows, self._prev(block),
                           self.drafter.harvest_k, cfg.temperature, probs, verified.features)
        walk = self._walk(tree, block, rows, probs)
        lap("walk")
        kv_keep = [0, *walk.accepted_rows]
        kv.trim(self.cache, cache_len, kv_keep)
        lap("trim")
        self.drafter.harvest(rows)
        committed, state = self._commit(tree, block, walk)
        lap("harvest")
        record = cycle_record(self.cycle_index, tree, block, rows, walk.accepted_rows, walk.bonus_token, committed,
                              kv_keep, state, cache_len, lap.ms)
        lap("build")  # building the record is part of the cycle's cost too: into the record's own timings
        if self.budget is not None:
            self.budget.observe(record, greedy=cfg.temperature <= 0)
        self.cycle_index += 1
        return record

    @property
    def max_depth(self) -> int:
        """The deepest a draft node may go without passing the model's context."""
        return self.context_length - 1 - self.cache_len

    @property
    def room(self) -> int:
        """New tokens the session may still commit."""
        return self.config.max_new_tokens - len(self.output_ids)

    def _plan(self, tree: DraftTree, decided: CycleDecisions | None, ceiling: int | None,
              depth: int | None = None) -> tuple[VerifyBlock, int]:
        """The nodes to verify and the rows to run them as: the context's limit gates deeper nodes, a recorded
        choice is applied as it was made, else ``budget=auto`` keeps the best nodes for this hardware (``ceiling``
        and ``depth``: what the drafter was asked for, recorded with the choice); the block is padded where a bigger
        one costs less (as recorded, on a re-run)."""
        _gate_deeper_than(tree, self.max_depth)
        if decided is not None and decided.kept is not None:
            _keep_only(tree, decided.kept)
            tree.state = dict(tree.state, budget=decided.budget_state)
        elif self.budget is not None:
            choice = self.budget.plain() if ceiling == 0 else self.budget.fit(tree, ceiling, self.room, depth)
            tree.state = dict(tree.state, budget=choice.as_state())
        block = flatten(tree)
        n = len(block.order)
        return block, max(n, decided.rows_run) if decided is not None else self.rows_to_run(n)

    def _verify(self, tree: DraftTree, block: VerifyBlock, rows_run: int) -> Verified:
        """The target's rows for the block: one forward, or at cycle 0 for the root alone the prefill's last row
        (the only place the prefill's shortcut is taken; a cycle 0 with a draft drops the root's KV and verifies
        it with its tree, as every cycle does)."""
        first, self._first_row = self._first_row, None
        assert kv.cache_length(self.cache) == self.cache_len + (first is not None), "cache out of step with tokens"
        if first is not None and len(block.order) == 1:
            tree.state = dict(tree.state, from_prefill=True)
            return first
        if first is not None:
            kv.crop(self.cache, self.cache_len)
        if rows_run > len(block.order):
            tree.state = dict(tree.state, padded_to=rows_run)
        self.n_forward += 1
        return verify_forward(self.target, self.cache, block, self.cache_len, rows_run)

    def _prev(self, block: VerifyBlock) -> np.ndarray:
        """The token before each row on its path: the parent's, or the one before the root (-1: none)."""
        before_root = self.ids[-2] if len(self.ids) > 1 else -1
        if len(block.parent_rows) == 1:
            return np.array([before_root], dtype=np.int64)
        return np.where(block.parent_rows >= 0, block.tokens[block.parent_rows.clip(min=0)], before_root)

    def _walk(self, tree: DraftTree, block: VerifyBlock, rows: TargetRows, probs: torch.Tensor | None) -> WalkResult:
        """The accepted path and the bonus token (greedy, or speculative sampling from ``probs``); a drafter's
        lazy offers are read before the harvest rewrites the tables they came from."""
        kids = children_rows(block, [tree.sources[i] for i in block.order.tolist()], self.drafter.source_priority)
        if probs is not None:
            walk = sampling_walk(block, probs.cpu(), kids, tree, self.generator)
        else:
            walk = greedy_walk(block, rows.argmax, kids)
        if tree.lazy_offers is not None:
            tree.lazy_offers([0, *(int(block.order[r]) for r in walk.accepted_rows)])
        return walk

    def _commit(self, tree: DraftTree, block: VerifyBlock, walk: WalkResult) -> tuple[list[int], dict[str, Any]]:
        """Commit the accepted tokens and the bonus (cut at EOS and the limits); the cycle's state, with the
        drafter's account of it and what each source offered where the walk went ("why did it stop" reads it)."""
        accepted_nodes = [int(block.order[r]) for r in walk.accepted_rows]
        committed = self._cut([tree.tokens[i] for i in accepted_nodes] + [walk.bonus_token])
        self.ids.extend(committed)
        state = dict(tree.state)
        state.update(self.drafter.accepted(tree, accepted_nodes, committed))
        path_offers = {str(n): tree.offers[n] for n in (0, *accepted_nodes) if n in tree.offers}
        if path_offers:
            state["offers"] = path_offers
        return committed, state

    def session_stats(self) -> dict[str, Any]:
        """What a finished session records (``stats``): the drafter's counters and, for a method with a budget,
        how it was chosen (``budget=auto`` for this device, the paper's, or a fixed number) beside the paper's."""
        stats = dict(self.drafter.stats())
        choice = cpu_threads.current() if self.target.device.type == "cpu" else None
        if choice is not None:  # what the forwards ran on: a figure measured with 1 thread is not one with 2
            stats["threads"] = choice.as_json()
        if self.budget is not None:
            stats["budget"] = self.budget.summary()
        else:
            params = getattr(self.drafter, "params", None)
            value = getattr(params, "budget", None)
            if isinstance(value, int) and not isinstance(value, bool):
                paper = type(params).__dataclass_fields__["budget"].default
                stats["budget"] = {"mode": "paper" if value == paper else "fixed", "value": value, "paper": paper}
        return stats

    def cycles(self) -> Iterator[CycleRecord]:
        """Run cycles until EOS, the token limit or the context limit."""
        while not self.done:
            yield self.step()

    def _cut(self, committed: list[int]) -> list[int]:
        """Cut the committed tokens at EOS, the token limit and the context limit; set the stop reason."""
        cut, reason = committed, ""
        for i, tok in enumerate(committed):
            if tok in self.eos:
                cut, reason = committed[: i + 1], "eos"
                break
        room = self.config.max_new_tokens - len(self.output_ids)
        if len(cut) > room or (len(cut) == room and not reason):
            cut, reason = cut[:room], "max_new_tokens"
        ctx_room = self.context_length - len(self.ids)
        if not reason and len(cut) >= ctx_room:
            cut, reason = cut[:ctx_room], "context"
        self.stop_reason = reason
        return cut


@torch.no_grad()
def prefill_into(target: LoadedModel, drafter: Drafter, body: list[int], cache: DynamicCache,
                 keep_last_row: bool = False) -> Any:
    """Run ``body`` into ``cache`` in chunks, the drafter harvesting every chunk's rows; returns the cache.

    A session's prefill (``body``: the whole prompt; ``keep_last_row``: returns ``(cache, the last row as
    Verified)``, which cycle 0 verifies the root alone with, and the drafter does not harvest that row here), and a
    fork's new drafter started on the committed tokens but the root as if they were its prompt
    (:mod:`specviz_core.session.fork`)."""
    dev = target.device
    last = None
    for start in range(0, len(body), PREFILL_CHUNK):
        chunk = body[start:start + PREFILL_CHUNK]
        out = target.model(
            input_ids=torch.tensor([chunk], device=dev),  # [1, c]
            position_ids=torch.arange(start, start + len(chunk), device=dev)[None],  # [1, c]
            **kv.cache_arg(target.model, cache),
            use_cache=True,
        )
        cache = kv.returned_cache(out)
        prev = [body[i - 1] if i > 0 else -1 for i in range(start, start + len(chunk))]
        logits, features = out.logits[0], kept_features(target.model, len(chunk))  # [c, V], [c, F]
        if keep_last_row and start + len(chunk) == len(body):
            last = Verified(logits[-1:].float(), None if features is None else features[-1:])
            chunk, logits, prev = chunk[:-1], logits[:-1], prev[:-1]
            features = None if features is None else features[:-1]
        if chunk and drafter.harvests:  # in fp32 only what a drafter reads (a half-precision chunk doubles)
            drafter.harvest(target_rows(logits.float(), np.asarray(chunk), None, np.asarray(prev), drafter.harvest_k,
                                        features=features))
    return (cache, last) if keep_last_row else cache


def _keep_only(tree: DraftTree, kept: frozenset[int]) -> None:
    """Gate every node a recorded ``budget=auto`` choice cut (an AR cycle when it kept the root alone)."""
    for i in range(1, len(tree)):
        if i not in kept:
            tree.gated[i] = True
    if len(kept) == 1:
        tree.mode = "ar"


def _gate_deeper_than(tree: DraftTree, max_depth: int) -> None:
    """Nodes past the context limit cannot be verified: gate them (and so their subtrees)."""
    for i in range(1, len(tree)):
        if tree.depths[i] > max_depth or tree.gated[tree.parents[i]]:
            tree.gated[i] = True

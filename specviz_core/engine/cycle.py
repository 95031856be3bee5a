"""The decode engine: one cycle at a time, every method through the same steps.

draft -> flatten -> verify (one target forward) -> walk -> trim -> harvest -> record.
The cache holds every committed token but the root (``cache_len`` positions) at the start of every cycle but the
first: the prefill runs the whole prompt, as ``generate`` and the official decoders do, so its last row already holds
the target's distribution after the first root. Cycle 0 takes its token from that row when it verifies nothing but
the root (AR, Goose's first cycle, a drafter with nothing to offer yet): no forward of its own, recorded with
``state["from_prefill"]``. When cycle 0 has a draft, the root's KV is dropped and the cycle verifies the root and its
tree as every other cycle does (the prefill's last row is then unused; no forward is added).
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
from specviz_core.drafters.talon.head import retap
from specviz_core.engine.forward import verify_forward
from specviz_core.engine.verify import children_rows, greedy_walk, sampling_walk
from specviz_core.errors import SpecVizError
from specviz_core.records import CycleDecisions, CycleRecord, Node
from specviz_core.runtime import kv
from specviz_core.runtime import threads as cpu_threads
from specviz_core.runtime.models import LoadedModel, synchronize
from specviz_core.tree import DraftTree, VerifyBlock, flatten

if TYPE_CHECKING:
    from specviz_core.analysis.timing import CostCurve
    from specviz_core.engine.budget import BudgetController

TOPK_SHOWN = 5
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
        ctx = target.context_length
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
        self._first_row: tuple[torch.Tensor, torch.Tensor | None] | None = None
        """The prefill's last row of logits [1, V] (fp32), and a draft head's features of it, until cycle 0 uses or
        drops them."""

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
        """Run one cycle and return its record."""
        if self.done:
            raise SpecVizError(f"the session is finished ({self.stop_reason})")
        if not self._prefilled:
            self.prefill()
        cfg, dev = self.config, self.target.device
        cache_len = self.cache_len
        first_row, self._first_row = self._first_row, None
        assert kv.cache_length(self.cache) == cache_len + (first_row is not None), "cache out of step with tokens"

        t0 = self.clock()
        max_depth = self.target.context_length - 1 - cache_len
        decided = self.decided.get(self.cycle_index)
        if decided is not None:
            ceiling = decided.ceiling
        else:
            ceiling = self.budget.draft_budget() if self.budget is not None else None
        room = cfg.max_new_tokens - len(self.output_ids)
        tree = self.drafter.draft(
            DraftContext(ids=list(self.ids), cache_len=cache_len, max_depth=max_depth,
                         generator=self.generator, temperature=cfg.temperature, budget=ceiling, room=room)
        )
        _gate_deeper_than(tree, max_depth)
        if decided is not None and decided.kept is not None:  # the recorded choice, applied as it was made
            _keep_only(tree, decided.kept)
            tree.state = dict(tree.state, budget=decided.budget_state)
        elif self.budget is not None:  # keep the best B nodes for this hardware; gate the rest
            tree.state = dict(tree.state, budget=self.budget.fit(tree, ceiling, room).as_state())
        block = flatten(tree)
        t1 = self.clock()

        if first_row is not None and len(block.order) == 1:  # the root alone: the prefill's last row is its verify
            logits, features = first_row  # [1, V]; a draft head's features of that row, when it taps them
            if features is not None:
                retap(self.target.model, features=features)
            tree.state = dict(tree.state, from_prefill=True)
        else:
            if first_row is not None:  # a draft at cycle 0: the root is verified with its tree, as in every cycle
                kv.crop(self.cache, cache_len)
            n_rows = len(block.order)
            rows_run = max(n_rows, decided.rows_run) if decided is not None else self.rows_to_run(n_rows)
            if rows_run > len(block.order):
                tree.state = dict(tree.state, padded_to=rows_run)
            logits = verify_forward(self.target, self.cache, block, cache_len, rows_run)  # [n, V]
            self.n_forward += 1
        self._sync()
        t2 = self.clock()

        if cfg.temperature > 0:
            probs = torch.softmax(logits / cfg.temperature, dim=-1)
        else:
            probs = torch.softmax(logits, dim=-1)
        rows = _row_stats(logits, probs, block)  # what the walk and the record need, in one transfer
        argmax = rows.argmax
        sources = [tree.sources[i] for i in block.order]
        kids = children_rows(block, sources, self.drafter.source_priority)
        if cfg.temperature > 0:
            walk = sampling_walk(block, probs.cpu(), kids, tree, self.generator)
        else:
            walk = greedy_walk(block, argmax, kids)
        if tree.lazy_offers is not None:  # before the harvest rewrites the tables the drafter read
            tree.lazy_offers([0, *(int(block.order[r]) for r in walk.accepted_rows)])
        self._sync()
        t3 = self.clock()

        keep_rows = [0] + walk.accepted_rows
        kv.trim(self.cache, cache_len, keep_rows)
        self._sync()
        t4 = self.clock()

        # The token before each row on its path: the parent's, or the one before the root.
        prev = np.where(block.parent_rows >= 0, block.tokens[block.parent_rows.clip(min=0)],
                        self.ids[-2] if len(self.ids) > 1 else -1)
        self.drafter.harvest(torch.from_numpy(block.tokens).to(dev), logits, torch.from_numpy(prev))
        accepted_nodes = [int(block.order[r]) for r in walk.accepted_rows]
        committed = [tree.tokens[i] for i in accepted_nodes] + [walk.bonus_token]
        committed = self._cut(committed)
        self.ids.extend(committed)
        state = dict(tree.state)
        state.update(self.drafter.accepted(tree, accepted_nodes, committed))
        path_offers = {str(n): tree.offers[n] for n in (0, *accepted_nodes) if n in tree.offers}
        if path_offers:  # what each source offered where the walk went: "why did it stop" reads it
            state["offers"] = path_offers
        self._sync()
        t5 = self.clock()

        record = self._record(tree, block, rows, walk.accepted_rows, walk.bonus_token,
                              committed, keep_rows, state, cache_len,
                              {"draft": t1 - t0, "forward": t2 - t1, "walk": t3 - t2, "trim": t4 - t3, "harvest": t5 - t4})
        # Building the record is part of the cycle's cost too.
        record = record.replace(timings_ms=dict(record.timings_ms, build=(self.clock() - t5) * 1000.0))
        if self.budget is not None:
            self.budget.observe(record, greedy=self.config.temperature <= 0)
        self.cycle_index += 1
        return record

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
        ctx_room = self.target.context_length - len(self.ids)
        if not reason and len(cut) >= ctx_room:
            cut, reason = cut[:ctx_room], "context"
        self.stop_reason = reason
        return cut

    def _record(self, tree: DraftTree, block, rows: RowStats, accepted_rows, bonus, committed, keep_rows,
                state: dict[str, Any], cache_len: int, seconds: dict[str, float]) -> CycleRecord:
        row_of = {int(nid): r for r, nid in enumerate(block.order)}
        argmax, tp = rows.argmax, rows.token_prob.tolist()
        top_ids, top_p = rows.top_ids.tolist(), rows.top_probs.tolist()
        accepted = {0} | {int(block.order[r]) for r in accepted_rows}
        nodes = []
        for i in range(len(tree)):
            row = row_of.get(i)
            nodes.append(Node(
                id=i, parent=tree.parents[i], token=tree.tokens[i], source=tree.sources[i],
                depth=tree.depths[i], score=float(tree.scores[i]), verified=row is not None,
                gated=tree.gated[i], accepted=i in accepted,
                target_token=int(argmax[row]) if row is not None else -1,
                target_prob=float(tp[row]) if row is not None and row > 0 else None,
            ))
        return CycleRecord(
            index=self.cycle_index,
            mode=tree.mode,
            cache_len=cache_len,
            nodes=tuple(nodes),
            verify_order=tuple(int(i) for i in block.order),
            mask=block.mask,
            positions=tuple(int(p) for p in block.positions(cache_len)),
            accepted_path=tuple(int(block.order[r]) for r in accepted_rows),
            bonus_token=int(bonus),
            committed_ids=tuple(int(t) for t in committed),
            kv_keep=tuple(keep_rows),
            target_topk=tuple(tuple((int(t), float(p)) for t, p in zip(ti, tpp)) for ti, tpp in zip(top_ids, top_p)),
            state=_plain(state),
            timings_ms={k: v * 1000.0 for k, v in seconds.items()},
        )


@torch.no_grad()
def prefill_into(target: LoadedModel, drafter: Drafter, body: list[int], cache: DynamicCache,
                 keep_last_row: bool = False) -> Any:
    """Run ``body`` into ``cache`` in chunks, the drafter harvesting every chunk's logits; returns the cache.

    A session's prefill (``body``: the whole prompt, ``keep_last_row``: returns ``(cache, last row's logits [1, V])``
    and the drafter does not harvest that row), and a fork's new drafter started on the committed tokens but the
    root as if they were its prompt (:mod:`specviz_core.session.fork`)."""
    dev = target.device
    last = last_features = None
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
        rows = out.logits[0]  # [c, V]
        if keep_last_row and start + len(chunk) == len(body):
            last = rows[-1:].float()  # [1, V]
            chunk, rows, prev = chunk[:-1], rows[:-1], prev[:-1]
            tapped = retap(target.model, slice(0, len(chunk)))  # a draft head's features: the same rows
            last_features = tapped[:, -1:] if tapped is not None else None
        if chunk:
            drafter.harvest(torch.tensor(chunk, device=dev), rows, torch.tensor(prev))
    return (cache, (last, last_features)) if keep_last_row else cache


@dataclass(frozen=True)
class RowStats:
    """Per verify-order row, what leaves the device each cycle (n rows, k = TOPK_SHOWN)."""

    argmax: np.ndarray  # [n] the target's argmax after each row
    token_prob: np.ndarray  # [n] probs[parent row, row's token]: the target's probability of the row's token
    top_ids: np.ndarray  # [n, k]
    top_probs: np.ndarray  # [n, k]


def _row_stats(logits: torch.Tensor, probs: torch.Tensor, block: VerifyBlock) -> RowStats:
    """Gather on the device, copy to the host once (a GPU sync per transfer is what costs)."""
    k = min(TOPK_SHOWN, probs.shape[-1])
    top = probs.topk(k, dim=-1)  # [n, k]
    dev = probs.device
    pr = torch.as_tensor(block.parent_rows.clip(min=0), device=dev)
    tp = probs[pr, torch.as_tensor(block.tokens, device=dev)]  # [n]
    # float64 holds token ids exactly (< 2**53) and float32 probabilities without rounding.
    packed = torch.cat([logits.argmax(dim=-1, keepdim=True).double(), tp[:, None].double(),
                        top.indices.double(), top.values.double()], dim=1).cpu().numpy()  # [n, 2 + 2k]
    return RowStats(packed[:, 0].astype(np.int64), packed[:, 1], packed[:, 2:2 + k].astype(np.int64),
                    packed[:, 2 + k:])


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


def _plain(value: Any) -> Any:
    """State as plain JSON-able Python values (no numpy scalars, no tuples)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value

"""Hardware-aware draft budgets: ``--param budget=auto``.

The papers fix the budget for a GPU (B=60), where a 60-token forward costs about what a
1-token one does. On a CPU it costs about 3x, so the best tree is far smaller, and
sometimes no tree at all. Each cycle, with ``budget=auto``:

1. the drafter drafts up to a ceiling (``DraftContext.budget``);
2. every verified node gets an estimated acceptance probability given that its parent is
   accepted, from the session's own running statistics (by source, score band and depth,
   shrunk towards the drafter's score, or a copy's measured acceptance at its depth, while there
   is little data; under greedy decoding they also count the nodes it cut, by whether the target
   wanted their token: see :meth:`AcceptanceStats.observe`), and a path probability:
   the product of the estimates along its path;
3. the controller ranks the nodes by an optimistic path probability (times one bonus per class
   of node on the path, one standard deviation, so that what was judged on little data gets
   tried again; once per class, not per node, or a 90-token spine would compound it 90 times)
   and keeps the B best, B maximising

       expected tokens per ms = (1 + sum of their mean path probabilities) / predicted cycle ms(B + 1)

   (the optimism orders the nodes but does not buy rows: counted in the sum, it promised 1.5x
   the tokens a free-chat session accepted, and kept trees that made it slower than plain decoding)

   and the sum is calibrated on the session's own history: times the ratio of the draft tokens the
   session's verified trees had accepted to what their choices expected (decayed sums, the last ~35
   cycles weigh most, shrunk to 1 by two pseudo-tokens: :attr:`BudgetController.calibration`). The
   kept nodes are those ranked best, so their estimates err high (the winner's curse); where the
   session's drafts keep missing, calibration brings the choice down to a plain cycle, and as the
   sums decay through plain cycles it drifts back to 1, so a draft is tried again

   with the cycle time predicted from this device's measured verify-cost curve, priced at the size the block
   runs as (padded: :func:`~specviz_core.analysis.timing.padded_rows`) and on the cycle's own cache (each cached
   token adds what the curve measured it to add at that size: a long prompt makes every row dearer), plus the
   host's reduction of the block's rows, measured with the curve (a softmax and a top-k over the vocabulary a row:
   on a CPU, with a small model and a large vocabulary, a share of the cycle that grows with the rows). B = 0
   verifies the root alone: an AR cycle, where speculation cannot pay here.

Where drafting runs a model (a draft head's steps, a draft model's forwards), it is priced too: a step costs what
was measured for that drafter on this device, in 1-row target forwards (stored beside the curve, once, from the
first session's drafting, which it does not change: until then a cautious prior, :data:`PRIOR_DRAFT_STEP`). A
cycle's tokens are then weighed against its draft and its forward together, and before drafting the controller
decides whether to draft at all: where the session's recent drafted cycles did not pay their drafting (the tokens
they committed over their priced cost, in plain cycles, below 1: what they gave, not what their choices expected),
the cycle is plain, nothing drafted, and a draft is tried again after 1, 2, 4 ... 32 plain cycles
(:meth:`BudgetController.draft_budget`), with the cheapest draft (one level), and only where the tokens left could
repay the try at the odds the session's tries have shown (:meth:`BudgetController.repays_try`); and how deep: one
level past the deepest node the recent drafted cycles kept (:meth:`BudgetController.draft_depth`), so no step drafts
a level the choice would cut. A session
starts where the last one with that drafter on this device left off (stored beside its step cost: whether its drafts
paid, and the wait between two tries), so a head that does not pay here is not paid for again in every session's
first probes; its plain cycles say so (``remembered``). A draft head or model catches up lazily, at its next draft,
on the committed tokens it has not run (the whole prompt at its first): the controller prices that too, per row as
measured for the drafter on this device (stored beside its step cost from the longest catch-up timed yet; until then
:data:`PRIOR_CATCH_UP_ROW`), and drafts only where drafts paying :data:`HOPED_GAIN` over a plain cycle would repay it
in the tokens the session may still commit; otherwise the cycle is plain and says so (``catch_up``).

The choice reads no clock: the curve is measured once per device and dtype, before a session needs it and never
in its time (:func:`~specviz_core.engine.cost_curve.ensure_device_curve`), and until it is known a cautious prior
for the device stands in (:func:`prior_curve`). So the same session decides the same way however busy the machine
is (a seed fixes a sampled session's text), and what it decided is recorded with each cycle
(:class:`~specviz_core.records.CycleDecisions`) for a fork's re-run to apply on any machine.

Under greedy decoding the sum of path probabilities is the expected number of accepted
draft tokens (exactly one child of an accepted node can match the target), so the
objective is the expected tokens per second of this cycle.

Drafters need nothing to benefit (the engine prunes their tree). A drafter that can build
a smaller tree more cheaply reads ``ctx.budget`` (or calls ``Drafter.cycle_budget(ctx)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specviz_core.analysis.timing import CostCurve, padded_rows
from specviz_core.engine.acceptance import DECAY, AcceptanceStats
from specviz_core.errors import SpecVizError
from specviz_core.records import CycleRecord
from specviz_core.tree import DraftTree

AUTO = "auto"
#: ``budget=paper``: the method's own budget, as its paper (and the official code) fix it.
PAPER = "paper"
#: Pseudo-tokens of a calibration of 1 (the estimates are right) behind a session's own (see ``calibration``).
CALIBRATION_WEIGHT = 2.0
#: The calibration's bounds (the pseudo-tokens keep a few cycles from swinging it; the sums decay through plain cycles,
#: so a session whose drafts stopped paying tries one again).
CALIBRATION_RANGE = (0.05, 1.5)
#: A draft step's cost, in 1-row target forwards, until one is measured for the drafter on this device: cautious (a
#: head step on the default model measured about 0.3-0.45 on a 2-core CPU).
PRIOR_DRAFT_STEP = 0.5
#: A drafted cycle's measured steps needed before a drafter's step cost is stored.
DRAFT_COST_SAMPLES = 4
#: How much a drafted cycle weighs in the next one's gain (:attr:`BudgetController.drafts_gain`).
GAIN_DECAY = 0.7
#: The most plain cycles between two tries of a draft, where drafting has not paid.
PROBE_MAX = 32
#: A row of a draft head's or draft model's catch-up, in 1-row target forwards, until one is measured for the drafter
#: on this device: a SpecViz head over a 1,800-token prompt measured 0.002 on a 2-core CPU (0.45 s, a 1-row forward
#: 0.12 s then); a GPU runs the rows side by side.
PRIOR_CATCH_UP_ROW = {"cpu": 0.003, "gpu": 0.0005}
#: What a draft hopes to give over a plain cycle where drafts pay (tokens per ms), by device: a catch-up is run only
#: where the tokens left would repay it at this gain. On a CPU, SpecViz's 10-minute heads gave 1.00-1.09x AR on code
#: editing, where they paid (docs/benchmarks.md, stages 8-9); EAGLE's own papers report 2-3x on a GPU.
HOPED_GAIN = {"cpu": 1.1, "gpu": 2.0}
#: A curve is flat when a forward over the largest tree costs at most this much more than a 1-row one (a GPU at
#: these sizes): there ``auto`` keeps the method's own budget, tree for tree.
FLAT = 1.10


def wants_auto(raw_params: dict[str, Any]) -> bool:
    """Whether the user asked for ``budget=auto`` in so many words."""
    v = raw_params.get("budget")
    return isinstance(v, str) and v.strip().lower() == AUTO


def split_auto(method: str, params_cls: type, raw_params: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``raw_params`` without a ``budget`` word, and whether the budget is ``auto``: asked for, or not given at all
    for a method with a budget (every tree method's default). ``budget=paper`` is the method's own budget."""
    has_budget = "budget" in params_cls.__dataclass_fields__
    v = raw_params.get("budget")
    word = v.strip().lower() if isinstance(v, str) else None
    if word in (AUTO, PAPER):
        if not has_budget:
            raise SpecVizError(f"method {method} has no budget, so budget={word} does not apply")
        return {k: x for k, x in raw_params.items() if k != "budget"}, word == AUTO
    return dict(raw_params), has_budget and v is None


def choose_budget(expected_tokens: Sequence[float], cycle_ms: Sequence[float]) -> int:
    """The b maximising ``expected_tokens[b] / cycle_ms[b]`` (b = draft nodes kept; ties: the smaller b)."""
    best, best_rate = 0, -1.0
    for b, (e, t) in enumerate(zip(expected_tokens, cycle_ms)):
        rate = e / t if t > 0 else 0.0
        if rate > best_rate * (1 + 1e-9):
            best, best_rate = b, rate
    return best


class CycleTimeModel:
    """Predicted ms of a cycle's verify forward for a block of n rows and of the host's reduction of its rows (where
    the curve measured it: :attr:`CostCurve.host_ms`), from the device's curve alone (no clock: a choice must not
    depend on how busy the machine was when it was made)."""

    def __init__(self, curve: CostCurve, pad: bool = True) -> None:
        self.curve = curve
        self.pad = pad
        """The engine pads a block to the size that costs least at or above it (:func:`padded_rows`): price that."""
        self.context: int | None = None
        """The cached tokens the cycle's forward reads (None: the curve's own); a longer cache makes rows dearer."""

    def rows_run(self, rows: int) -> int:
        """The rows a block of ``rows`` runs as (padded, when :attr:`pad`)."""
        return padded_rows(self.curve, rows) if self.pad else rows

    def forward_ms(self, rows: int) -> float:
        return self.curve.at(self.rows_run(rows), self.context)

    def __call__(self, rows: int) -> float:
        return self.forward_ms(rows) + self.curve.host(rows)


@dataclass
class Choice:
    """What the controller chose this cycle (recorded in the cycle's state as ``budget``)."""

    chosen: int
    """Draft nodes kept (verified), root excluded."""
    candidates: int
    """Draft nodes the drafter offered (before the choice)."""
    ceiling: int
    """The budget the drafter was asked to draft up to."""
    expected_tokens: float
    """Expected tokens committed this cycle (accepted + bonus) with the kept nodes."""
    expected_ms: float
    """Predicted ms: the verify forward and the host's reduction of its rows (where the curve measured it), and the
    drafting (``draft_ms``)."""
    gain_vs_ar: float
    """Expected tokens/ms over an AR cycle's (1 token, 1 row)."""
    prior: bool = False
    """Priced with the device's cautious prior: no verify-cost curve was measured yet (:func:`prior_curve`)."""
    calibration: float = 1.0
    """The session's calibration the expected tokens were scaled by (:attr:`BudgetController.calibration`)."""
    draft_ms: float = 0.0
    """The cycle's drafting, priced (a draft head's or draft model's steps); in ``expected_ms``."""
    plain: bool = False
    """Decided before drafting: no draft expected to pay its cost, so none was drafted."""
    flat: bool = False
    """The curve is flat up to the largest tree: the method's own tree was kept."""
    paper: int | None = None
    """The method's own budget, said beside the choice."""
    depth: int | None = None
    """The depth the drafter was asked to draft to (:meth:`BudgetController.draft_depth`); None: its own."""
    remembered: bool = False
    """A plain cycle decided from what earlier sessions on this device found (its drafts did not pay), before this
    session drafted at all."""
    catch_up: tuple[int, float, int] | None = None
    """A plain cycle because drafting would first run the draft head or model over this many committed tokens it has
    not seen, for this many ms (priced), more than drafts could save in the tokens left: (rows, ms, tokens left)."""

    no_try: tuple[float, int, int] | None = None
    """A plain cycle because a draft, tried again after this session's drafts did not pay, would cost this many ms
    (priced: :meth:`BudgetController.try_ms`), more than drafts could save in the tokens left at the odds its tries
    have shown: (ms, tokens left, the plain cycles waited)."""

    def as_state(self) -> dict[str, Any]:
        if self.plain:
            up = ({"catch_up": self.catch_up[0], "catch_up_ms": round(self.catch_up[1], 1), "room": self.catch_up[2],
                   **({"prior": True} if self.prior else {})}  # on the prior curve its "ms" are 1-row forwards
                  if self.catch_up else
                  {"try_ms": round(self.no_try[0], 1), "room": self.no_try[1], "waited": self.no_try[2],
                   **({"prior": True} if self.prior else {})}
                  if self.no_try else {})
            return {"chosen": 0, "candidates": 0, "ceiling": 0, "plain": True,
                    "gain_vs_ar": round(self.gain_vs_ar, 3), **({"paper": self.paper} if self.paper else {}),
                    **({"remembered": True} if self.remembered and not self.catch_up and not self.no_try else {}),
                    **up}
        if self.flat:
            return {"chosen": self.chosen, "candidates": self.candidates, "paper": self.ceiling, "flat": True}
        return {"chosen": self.chosen, "candidates": self.candidates, "ceiling": self.ceiling,
                "expected_tokens": round(self.expected_tokens, 3), "expected_ms": round(self.expected_ms, 3),
                "gain_vs_ar": round(self.gain_vs_ar, 3), "calibration": round(self.calibration, 3),
                **({"draft_ms": round(self.draft_ms, 3)} if self.draft_ms else {}),
                **({"depth": self.depth} if self.depth is not None else {}),
                **({"paper": self.paper} if self.paper else {}),
                **({"prior": True} if self.prior else {})}


class BudgetController:
    """``budget=auto``: chooses each cycle's budget from the cost curve and the running acceptance.

    ``curve``: this device's measured verify-cost curve; None prices with the device's cautious prior
    (:func:`prior_curve`) until one is measured."""

    def __init__(self, curve: CostCurve | None, max_budget: int, min_ceiling: int = 16, decay: float = DECAY,
                 paper: int | None = None, device: str = "cpu", drafts: bool = False,
                 draft_step: float | None = None, store_draft_step: Callable[[float, int], None] | None = None,
                 outcome: tuple[float, int] | None = None,
                 store_outcome: Callable[[float, int], None] | None = None,
                 catch_up_row: float | None = None, store_catch_up_row: Callable[[float, int], None] | None = None,
                 catch_up_rows: int = 0) -> None:
        """``drafts``: drafting runs a model, priced at ``draft_step`` 1-row forwards a step (None: not measured
        yet, :data:`PRIOR_DRAFT_STEP`; ``store_draft_step(cost, steps)`` keeps what this session measures).
        ``outcome``: what the last session drafting so on this device found, (gain over a plain cycle, plain cycles
        between two drafts): where its drafts did not pay, this session starts with that many plain cycles rather
        than paying for the same lesson again; ``store_outcome(gain, gap)`` keeps this session's.
        ``catch_up_row``: what a row of the drafter's catch-up costs, in 1-row forwards, measured on a catch-up of
        ``catch_up_rows`` rows (None: not measured yet, :data:`PRIOR_CATCH_UP_ROW`); ``store_catch_up_row(cost,
        rows)`` keeps what this session measures on a longer catch-up than that (a row costs more the more rows
        came before it: the head attends to them all)."""
        if max_budget < 1:
            raise SpecVizError("budget=auto needs a maximum budget of at least 1")
        self.max_budget = max_budget
        self.paper = paper if paper is not None else max_budget
        """The method's own budget (``budget=paper``), said beside the choice."""
        self.min_ceiling = min(min_ceiling, max_budget)
        self.stats = AcceptanceStats(decay)
        self.prior = curve is None
        """Priced with the device's prior: no curve measured yet."""
        self.time = CycleTimeModel(curve if curve is not None else prior_curve(device))
        self.curve_source = "prior" if curve is None else "stored"
        self._chosen_ema = float(max_budget)
        self.last: Choice | None = None
        self.n_cycles = 0
        self.chosen_total = 0
        self.ar_cycles = 0
        self.decay = decay
        self.drafts = drafts
        self.draft_step = draft_step if draft_step is not None else PRIOR_DRAFT_STEP
        self.draft_step_source = "stored" if draft_step is not None else "prior"
        self._store_draft_step = store_draft_step if draft_step is None else None
        self._step_ms: list[float] = []  # measured ms of a draft step, per drafted cycle, until stored
        self._gave = 0.0  # decayed sums, over the drafted cycles, of the tokens they committed ...
        self._cost = 0.0  # ... and of what they cost, priced, in plain cycles (the ratio: :attr:`drafts_gain`)
        self._plain_run = 0  # plain cycles since the last draft
        self._probe_gap = 1  # plain cycles before a draft is tried again
        self.plain_cycles = 0
        self._expected = 0.0  # decayed sums, over the cycles that verified a draft, of the draft tokens expected
        self._accepted = 0.0  # ... and of those accepted
        self._depth_ema: float | None = None  # the deepest node kept, recent drafted cycles (EMA)
        self._store_outcome = store_outcome if drafts else None
        self._stored_outcome: tuple[bool, int] | None = None  # (paid, gap) last stored
        self.outcome_source = "session"
        self._remembered = False  # the plain cycles so far follow from earlier sessions' outcome
        gpu = str(device).startswith(("cuda", "mps", "xpu"))
        self.catch_up_row = catch_up_row if catch_up_row is not None else PRIOR_CATCH_UP_ROW["gpu" if gpu else "cpu"]
        self.hoped_gain = HOPED_GAIN["gpu" if gpu else "cpu"]
        self.catch_up_row_source = "stored" if catch_up_row is not None else "prior"
        self._store_catch_up_row = store_catch_up_row
        self._catch_up_measured = catch_up_rows if catch_up_row is not None else 0  # rows the stored cost came from
        self._catch_up: tuple[int, float, int] | None = None  # this cycle is plain for its catch-up: rows, ms, left
        self._no_try: tuple[float, int, int] | None = None  # plain: a try would not repay (ms, left, waited)
        if drafts and outcome is not None and outcome[0] < 1.0:
            self._gave, self._cost = outcome[0], 1.0  # worth one drafted cycle: this session's own soon outweigh it
            self._probe_gap = max(1, min(int(outcome[1]), PROBE_MAX))
            self._depth_ema = 0.0  # so its tries are the cheapest drafts: one level (a head step), deeper if it pays
            self._stored_outcome = (False, self._probe_gap)
            self.outcome_source = "stored"
            self._remembered = True

    @property
    def drafts_gain(self) -> float | None:
        """What the recent drafted cycles gave over plain ones, their drafting priced: the tokens they committed over
        what they cost in plain cycles (decayed sums, :data:`GAIN_DECAY` a drafted cycle); None before any."""
        return self._gave / self._cost if self._cost > 0 else None

    @property
    def calibration(self) -> float:
        """Accepted over expected draft tokens in this session's verified trees (decayed sums), shrunk to 1 by
        :data:`CALIBRATION_WEIGHT` pseudo-tokens and bounded by :data:`CALIBRATION_RANGE`."""
        c = (self._accepted + CALIBRATION_WEIGHT) / (self._expected + CALIBRATION_WEIGHT)
        return min(max(c, CALIBRATION_RANGE[0]), CALIBRATION_RANGE[1])

    @property
    def pad(self) -> bool:
        """Whether the engine pads its blocks (``DecodeConfig.pad_rows``): the cycle times are priced so."""
        return self.time.pad

    @pad.setter
    def pad(self, value: bool) -> None:
        self.time.pad = bool(value) and not self.prior  # the prior has no kernel bumps to pad to

    @property
    def curve(self) -> CostCurve | None:
        """This device's measured verify-cost curve (None while the prior stands in)."""
        return None if self.prior else self.time.curve

    @property
    def flat(self) -> bool:
        """The curve is flat up to the largest tree (:data:`FLAT`), at this cycle's cache: the method's own budget is
        the choice."""
        return self.time.forward_ms(self.max_budget + 1) <= FLAT * self.time.forward_ms(1)

    def begin_cycle(self, context: int | None = None, catch_up: int = 0, room: int | None = None
                    ) -> tuple[int | None, int | None]:
        """A new cycle over ``context`` cached tokens, which every price of the cycle then counts
        (:meth:`CostCurve.at`: the longer the cache, the dearer each row): its ceiling (:meth:`draft_budget`) and
        depth (:meth:`draft_depth`), decided before drafting. ``catch_up``: the rows the drafter's model would first
        run over committed tokens it has not seen (:meth:`~specviz_core.drafters.base.Drafter.catch_up_rows`);
        ``room``: the tokens the session may still commit."""
        return self.draft_budget(context, catch_up, room), self.draft_depth()

    def draft_budget(self, context: int | None = None, catch_up: int = 0, room: int | None = None) -> int | None:
        """The ceiling to draft up to this cycle: room to grow to twice the recent choice (None on a flat curve: the
        drafter drafts its own tree); 0, a plain cycle, where no draft is expected to pay for its drafting, or where
        drafting would first catch up over more tokens than drafts could repay in the ``room`` left
        (:meth:`repays_catch_up`). ``context``, ``catch_up`` and ``room``: see :meth:`begin_cycle`."""
        self.time.context = context
        self._catch_up = None
        self._no_try = None
        if self.flat:
            return None
        probe = False
        if self.drafts and self.drafts_gain is not None and self.drafts_gain < 1.0:
            if self._plain_run < self._probe_gap:  # no draft expected to pay its cost: a plain cycle
                self._plain_run += 1
                return 0
            probe = True
        if probe and room is not None and not self.repays_try(catch_up, room):  # (its price counts the catch-up)
            self._no_try = (self.try_ms(catch_up), room, self._probe_gap)
            return 0
        if self.drafts and room is not None and not self.repays_catch_up(catch_up, room):
            self._catch_up = (catch_up, self.catch_up_ms(catch_up), room)
            return 0
        if probe:
            self._plain_run = 0  # try a draft again, and wait longer next time if it still does not pay
            self._probe_gap = min(2 * self._probe_gap, PROBE_MAX)
            self._remembered = False
            self._depth_ema = 0.0  # the cheapest try, as priced (try_ms): one level, deeper once drafts pay again
        return int(min(self.max_budget, max(self.min_ceiling, 2 * self._chosen_ema + 4)))

    def catch_up_ms(self, rows: int) -> float:
        """What a catch-up over ``rows`` committed tokens costs beyond the draft step it ends in (priced as the
        forward is: ms, or 1-row forwards on the prior curve)."""
        return max(rows - 1, 0) * self.catch_up_row * self.time.curve(1)

    def repays_catch_up(self, rows: int, room: int) -> bool:
        """Whether drafts could repay a catch-up over ``rows`` tokens in the ``room`` tokens left: at the gain over a
        plain cycle they give where they pay (:data:`HOPED_GAIN`, or the session's own where higher), the time they
        would save over those tokens covers it. A head's first draft on a 1,800-token prompt catches up over all of
        it (7 target forwards on a CPU): worth it for 200 new tokens, not for the last 8 of a short answer."""
        return rows <= 1 or self.catch_up_ms(rows) <= self.drafts_save_ms(room)

    def drafts_save_ms(self, tokens: float) -> float:
        """What drafts that pay would save over ``tokens`` committed tokens against plain cycles: at the gain they
        give where they pay (:data:`HOPED_GAIN`, or the session's own where higher)."""
        gain = max(self.hoped_gain, self.drafts_gain or 0.0)
        return tokens * self.time(1) * (1.0 - 1.0 / gain)

    def try_ms(self, rows: int) -> float:
        """What trying a draft again costs at least, beyond a plain cycle: the catch-up over ``rows`` committed
        tokens, one draft step, and the verify's second row (priced as the forward is)."""
        return self.catch_up_ms(rows) + self.draft_ms(1) + self.time(2) - self.time(1)

    def repays_try(self, rows: int, room: int) -> bool:
        """Whether a draft is worth trying again where the session's drafts have not paid: if drafts now pay
        (:data:`HOPED_GAIN` over a plain cycle), the time they would save over the ``room`` tokens left, at the odds
        this session's tries have shown (one in the plain cycles it waited since the last: the wait doubles with each
        try that did not pay), covers what the try costs (:meth:`try_ms`). So the waits 1, 2, 4 ... stop where the
        session is too near its end to profit from what a try would find: a try after 32 plain cycles, 8 tokens
        before the end of a 40-token answer, costs more than it could ever return."""
        return self.try_ms(rows) <= self.drafts_save_ms(room / self._probe_gap)

    def draft_depth(self) -> int | None:
        """How deep to draft this cycle, decided before drafting where a draft step costs (a head's, a draft model's):
        one level deeper than the recent cycles kept (each level is a step, and a level the choice then cuts was
        drafted for nothing), so the depth follows what pays, a level at a time. None: the drafter's own depth (no
        cost per step, a flat curve, or no drafted cycle seen yet)."""
        if not self.drafts or self.flat or self._depth_ema is None:
            return None
        return max(1, math.ceil(self._depth_ema - 1e-9) + 1)

    def draft_ms(self, steps: int) -> float:
        """What ``steps`` draft steps cost, priced as the forward is (ms, or 1-row forwards on the prior curve)."""
        return steps * self.draft_step * self.time.curve(1) if self.drafts else 0.0  # a draft step: its own cache

    def plain(self) -> Choice:
        """The choice of a cycle :meth:`draft_budget` made plain (its ceiling 0): nothing drafted."""
        self.last = Choice(0, 0, 0, 1.0, self.time(1), self.drafts_gain if self.drafts_gain is not None else 1.0,
                           paper=self.paper, prior=self.prior, plain=True, remembered=self._remembered,
                           catch_up=self._catch_up, no_try=self._no_try)
        return self.last

    def path_probs(self, tree: DraftTree) -> list[float]:
        """Optimistic probability that each node is on the accepted path (1 for the root, 0 for gated nodes): the
        product of the mean estimates along the path, times the optimism bonus (upper / mean) of each class of node
        on it, once per class. It ranks the nodes: what was judged on little data gets tried again."""
        return self._path_probs(tree)[0]

    def _path_probs(self, tree: DraftTree) -> tuple[list[float], list[float]]:
        """(optimistic, mean) path probabilities: the first ranks the nodes, the second counts the tokens expected."""
        pp, mean_pp = [1.0] * len(tree), [1.0] * len(tree)
        classes: list[frozenset] = [frozenset()] * len(tree)
        for i in range(1, len(tree)):
            if tree.gated[i]:
                pp[i] = mean_pp[i] = 0.0
                continue
            par = tree.parents[i]
            mean, upper, cls = self.stats.estimate(tree.sources[i], tree.scores[i], tree.depths[i])
            mean_pp[i] = mean_pp[par] * mean
            if cls in classes[par]:
                pp[i], classes[i] = pp[par] * mean, classes[par]
            else:
                pp[i], classes[i] = pp[par] * upper, classes[par] | {cls}
        return pp, mean_pp

    def fit(self, tree: DraftTree, ceiling: int | None = None, room: int | None = None,
            depth: int | None = None) -> Choice:
        """Gate every verified node but the best B; returns the choice (B may be 0: an AR cycle). ``room``: the
        tokens the session may still commit; a node at depth ``room`` or deeper can add none (the cycle is cut
        there), so it is never worth its row. ``depth``: the depth the drafter was asked for (recorded)."""
        if self.flat:  # a bigger tree costs (nearly) nothing more: the method's own tree, every node of it
            n = sum(1 for i in range(1, len(tree)) if not tree.gated[i])
            self.last = Choice(n, n, self.paper, 0.0, 0.0, 1.0, flat=True)
            return self.last
        pp, mean_pp = self._path_probs(tree)
        # Keep a node only with its parent and its earlier siblings (siblings sampled without replacement
        # must stay a prefix): rank by the lowest path probability among the node, its parent's rank
        # and its earlier sibling's rank.
        rank = list(pp)
        last_child: dict[int, int] = {}
        for i in range(1, len(tree)):
            if tree.gated[i]:
                continue
            par = tree.parents[i]
            rank[i] = min(pp[i], rank[par], rank[last_child[par]] if par in last_child else 1.0)
            last_child[par] = i
        cand = sorted((i for i in range(1, len(tree)) if not tree.gated[i] and (room is None or tree.depths[i] < room)),
                      key=lambda i: (-rank[i], i))
        cand = cand[: self.max_budget]
        # How many to keep is a bet on speed: the means decide it (the optimism only orders), calibrated.
        calibration = self.calibration
        expected = [1.0]
        for i in cand:
            expected.append(expected[-1] + calibration * mean_pp[i])
        # This cycle's drafting is spent; its tokens are weighed against it and the forward together.
        steps = tree.state.get("draft_steps", tree.state.get("draft_forwards", 0))
        draft_ms = self.draft_ms(int(steps)) if isinstance(steps, (int, float)) else 0.0
        cycle_ms = [self.time(b + 1) + draft_ms for b in range(len(expected))]
        b = choose_budget(expected, cycle_ms)
        keep = set(cand[:b])
        for i in range(1, len(tree)):
            if not tree.gated[i] and i not in keep:
                tree.gated[i] = True
        if b == 0:
            tree.mode = "ar"
        ar_rate = 1.0 / self.time(1)  # a plain cycle: one row, nothing drafted
        rate = expected[b] / cycle_ms[b] if cycle_ms[b] > 0 else 0.0
        self.last = Choice(b, len(cand), ceiling if ceiling is not None else self.max_budget, expected[b],
                           cycle_ms[b], rate / ar_rate if ar_rate > 0 else 1.0, paper=self.paper, prior=self.prior,
                           calibration=calibration, draft_ms=draft_ms, depth=depth)
        return self.last

    def observe(self, record: CycleRecord, greedy: bool = False) -> None:
        """Learn from a finished cycle the acceptance of its nodes (under greedy decoding also of those it cut: see
        :meth:`AcceptanceStats.observe`); never its timings, so a busy machine decides as a quiet one does."""
        self.stats.observe(record, greedy)
        chosen = record.n_verified - 1
        self._expected *= self.decay
        self._accepted *= self.decay
        choice = record.state.get("budget")
        if isinstance(choice, dict) and choice.get("plain"):
            self.plain_cycles += 1
        steps = record.state.get("draft_steps", record.state.get("draft_forwards", 0))
        if self.drafts and isinstance(steps, (int, float)) and steps > 0 and isinstance(choice, dict):
            gain, expected = choice.get("gain_vs_ar"), choice.get("expected_tokens", 1.0)
            if isinstance(gain, (int, float)) and gain > 0 and isinstance(expected, (int, float)) and expected > 0:
                # What the cycle gave, not what its choice hoped for: it committed 1 + accepted tokens at the cost
                # its choice priced (expected / gain, in plain cycles). The expectation is the best of the
                # candidates' estimates and errs high (a probe that expects 1.4x and accepts nothing gave 0.8x).
                self._gave = GAIN_DECAY * self._gave + 1.0 + len(record.accepted_path)
                self._cost = GAIN_DECAY * self._cost + float(expected) / float(gain)
                if self.drafts_gain is not None and self.drafts_gain >= 1.0:
                    self._probe_gap = 1
                self._keep_outcome()
            self._measure_step(record, int(steps))
            self._measure_catch_up(record)
            kept = max((n.depth for n in record.nodes if n.verified), default=0)
            self._depth_ema = float(kept) if self._depth_ema is None else self._depth_ema + 0.3 * (kept - self._depth_ema)
        if chosen > 0 and isinstance(choice, dict) and "expected_tokens" in choice:
            # what the choice expected before calibration, against what the tree gave
            self._expected += (float(choice["expected_tokens"]) - 1.0) / float(choice.get("calibration", 1.0))
            self._accepted += len(record.accepted_path)
        self._chosen_ema += 0.2 * (chosen - self._chosen_ema)
        self.n_cycles += 1
        self.chosen_total += chosen
        self.ar_cycles += chosen == 0

    def _keep_outcome(self) -> None:
        """Store whether this session's drafts pay, and the wait between two tries, when either changed (a few
        writes a session: not every drafted cycle), so the next session on this device starts from it."""
        if self._store_outcome is None or self.drafts_gain is None:
            return
        paid = self.drafts_gain >= 1.0
        now = (paid, 1 if paid else self._probe_gap)
        if now != self._stored_outcome:
            self._stored_outcome = now
            self._store_outcome(self.drafts_gain, now[1])

    def _measure_step(self, record: CycleRecord, steps: int) -> None:
        """Time a draft step from a drafted cycle (a head's own step time, else the draft stage over its steps); with
        :data:`DRAFT_COST_SAMPLES` of them, store their median in 1-row forwards, once (never used by this session,
        whose choices read no clock)."""
        if self._store_draft_step is None or self.prior:
            return
        per_step = record.state.get("draft_step_ms")
        if not isinstance(per_step, (int, float)) or per_step <= 0:
            per_step = record.timings_ms.get("draft", 0.0) / steps
        self._step_ms.append(float(per_step))
        if len(self._step_ms) >= DRAFT_COST_SAMPLES:
            ms = sorted(self._step_ms)[len(self._step_ms) // 2]
            self._store_draft_step(ms / self.time.curve(1), len(self._step_ms))
            self._store_draft_step = None

    def _measure_catch_up(self, record: CycleRecord) -> None:
        """Price a catch-up row from a drafted cycle's long catch-up (timed by the drafter: ``catch_up_rows``,
        ``catch_up_ms``), less the draft step it ends in, and store it where it is the longest catch-up measured yet
        (never used by this session): a row of a 1,000-token prompt's catch-up cost three times one of a short
        prompt's, so the longest measured prices the next sessions' long catch-ups as they will cost."""
        rows, ms = record.state.get("catch_up_rows"), record.state.get("catch_up_ms")
        if self._store_catch_up_row is None or self.prior or not isinstance(rows, int) or rows < 2 \
                or rows <= self._catch_up_measured or not isinstance(ms, (int, float)) or ms <= 0:
            return
        per_row = max(ms / self.time.curve(1) - self.draft_step, 0.0) / (rows - 1)
        self._store_catch_up_row(max(per_row, 1e-6), rows)
        self._catch_up_measured = rows

    def summary(self) -> dict[str, Any]:
        """What a session records of its budget (``stats["budget"]``): chosen for this device, and the paper's."""
        return {"mode": AUTO, "paper": self.paper, "cycles": self.n_cycles,
                "mean_budget": self.chosen_total / self.n_cycles if self.n_cycles else 0.0,
                "ar_cycles": self.ar_cycles, "max_budget": self.max_budget, "curve": self.curve_source,
                "calibration": round(self.calibration, 3),
                **({"draft_step": round(self.draft_step, 4), "draft_step_from": self.draft_step_source,
                    "catch_up_row": round(self.catch_up_row, 6), "catch_up_row_from": self.catch_up_row_source,
                    "plain_cycles": self.plain_cycles, "outcome_from": self.outcome_source} if self.drafts else {}),
                "auto_from_cycle": 0}


#: A CPU's verify cost, cautiously: a block of 2 or more rows costs 1.5x a 1-row forward, then 5% more a row (a
#: 2-core EPYC measured 1.39-1.55x for 2-4 rows and 3% a row beyond, docs/benchmarks.md). Pessimistic on purpose:
#: until this device's curve is measured, a tree must earn its rows clearly.
PRIOR_CPU = (1.5, 0.05)
#: A GPU's: nearly flat at these sizes (0.5% a row), after a 10% step.
PRIOR_GPU = (1.1, 0.005)


def prior_curve(device: Any = "cpu") -> CostCurve:
    """The cautious verify-cost curve ``budget=auto`` prices with on ``device`` until its own is measured (in units
    of a 1-row forward)."""
    step, slope = PRIOR_GPU if str(device).startswith(("cuda", "mps", "xpu")) else PRIOR_CPU
    sizes = (1, 2, 16, 32, 64, 128, 256)
    return CostCurve(sizes, tuple(1.0 if n == 1 else step + slope * (n - 1) for n in sizes))


def make_controller(target: Any, max_budget: int, paper: int | None = None,
                    drafter_key: str | None = None) -> BudgetController:
    """A controller for ``target`` on its device: with its stored cost curve, or the device's prior
    (:func:`prior_curve`) where none is stored yet (a session's set-up measures one first:
    :func:`~specviz_core.engine.cost_curve.ensure_device_curve`). ``drafter_key``: what drafts, where drafting runs
    a model (:meth:`~specviz_core.drafters.base.Drafter.draft_cost_key`): its stored step cost prices it."""
    if drafter_key is None:
        return BudgetController(stored_curve(target), max_budget, paper=paper, device=str(target.device))
    from specviz_core.runtime.cost_files import (
        load_catch_up_row,
        load_catch_up_rows,
        load_draft_cost,
        load_draft_outcome,
        save_catch_up_row,
        save_draft_cost,
        save_draft_outcome,
    )

    where = (target.name, target.device, target.dtype, drafter_key)

    def store(cost: float, steps: int) -> None:
        try:
            save_draft_cost(*where, cost, steps)
        except OSError:  # a read-only data folder: the prior stands in next time too
            pass

    def store_outcome(gain: float, gap: int) -> None:
        try:
            save_draft_outcome(*where, gain, gap)
        except OSError:  # a read-only data folder: the next session learns it again
            pass

    def store_catch_up(cost: float, rows: int) -> None:
        try:
            save_catch_up_row(*where, cost, rows)
        except OSError:  # a read-only data folder: the prior stands in next time too
            pass

    return BudgetController(stored_curve(target), max_budget, paper=paper, device=str(target.device), drafts=True,
                            draft_step=load_draft_cost(*where), store_draft_step=store,
                            outcome=load_draft_outcome(*where), store_outcome=store_outcome,
                            catch_up_row=load_catch_up_row(*where), store_catch_up_row=store_catch_up,
                            catch_up_rows=load_catch_up_rows(*where))


def stored_curve(target: Any) -> CostCurve | None:
    """``target``'s verify-cost curve stored for its device and dtype, when every small size was measured (a
    curve with gaps hid the kernels' bumps); else None."""
    from specviz_core.engine.cost_curve import is_dense, load_device_curve

    stored = load_device_curve(target)
    return CostCurve.from_dict(stored) if stored is not None and is_dense(stored) else None

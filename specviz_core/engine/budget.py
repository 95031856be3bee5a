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

   with the cycle time predicted from the measured verify-cost curve (scaled online to the
   forwards this session actually timed) plus the walk/trim/harvest/record-building time
   (fitted online as a + b * rows). The other nodes are gated, so the tree view still shows
   them. B = 0 verifies the root alone: an AR cycle, where speculation cannot pay here.

Under greedy decoding the sum of path probabilities is the expected number of accepted
draft tokens (exactly one child of an accepted node can match the target), so the
objective is the expected tokens per second of this cycle.

Drafters need nothing to benefit (the engine prunes their tree). A drafter that can build
a smaller tree more cheaply reads ``ctx.budget`` (or calls ``Drafter.cycle_budget(ctx)``).
"""

from __future__ import annotations

from collections.abc import Sequence
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
#: A curve is flat when a forward over the largest tree costs at most this much more than a 1-row one (a GPU at
#: these sizes): there ``auto`` keeps the method's own budget, tree for tree.
FLAT = 1.10
#: The cycle-time estimates ignore the draft's own time: it is spent before the choice.
STAGES_AFTER_DRAFT = ("walk", "trim", "harvest", "build")


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
    """Predicted ms of a cycle's forward plus what follows it, for a verify block of n rows."""

    def __init__(self, curve: CostCurve, ema: float = 0.1, pad: bool = True) -> None:
        self.curve = curve
        self.ema = ema
        self.pad = pad
        """The engine pads a block to the size that costs least at or above it (:func:`padded_rows`): price that."""
        self.scale = 1.0  # observed forward ms / the curve's ms, smoothed
        # Exponentially weighted sums for other_ms ~ a + b * n.
        self._w = self._n = self._nn = self._o = self._no = 0.0

    def rows_run(self, rows: int) -> int:
        """The rows a block of ``rows`` runs as (padded, when :attr:`pad`)."""
        return padded_rows(self.curve, rows) if self.pad else rows

    def forward_ms(self, rows: int) -> float:
        return self.scale * self.curve(self.rows_run(rows))

    def other_ms(self, rows: int) -> float:
        if self._w == 0:
            return 0.0
        mean_n, mean_o = self._n / self._w, self._o / self._w
        var = self._nn / self._w - mean_n ** 2
        slope = max(0.0, (self._no / self._w - mean_n * mean_o) / var) if var > 1.0 else 0.0
        return max(0.0, mean_o + slope * (rows - mean_n))

    def __call__(self, rows: int) -> float:
        return self.forward_ms(rows) + self.other_ms(rows)

    def observe(self, rows: int, forward_ms: float, other_ms: float, rows_run: int | None = None) -> None:
        """Learn from a cycle of ``rows`` verified rows, its forward run as ``rows_run`` (padded), and its times."""
        predicted = self.curve(rows_run or rows)
        if predicted > 0 and forward_ms > 0:
            self.scale += self.ema * (forward_ms / predicted - self.scale)
        k = 1.0 - self.ema
        self._w = k * self._w + 1.0
        self._n = k * self._n + rows
        self._nn = k * self._nn + rows * rows
        self._o = k * self._o + other_ms
        self._no = k * self._no + rows * other_ms


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
    """Predicted forward + walk/trim/harvest ms."""
    gain_vs_ar: float
    """Expected tokens/ms over an AR cycle's (1 token, 1 row)."""
    measuring: tuple[int, int] | None = None
    """While no curve is known yet: (steps done, steps in all) of measuring it; the method's own tree was kept."""
    flat: bool = False
    """The curve is flat up to the largest tree: the method's own tree was kept."""
    paper: int | None = None
    """The method's own budget, said beside the choice."""

    def as_state(self) -> dict[str, Any]:
        if self.measuring is not None:
            return {"chosen": self.chosen, "candidates": self.candidates, "paper": self.ceiling,
                    "measuring": list(self.measuring)}
        if self.flat:
            return {"chosen": self.chosen, "candidates": self.candidates, "paper": self.ceiling, "flat": True}
        return {"chosen": self.chosen, "candidates": self.candidates, "ceiling": self.ceiling,
                "expected_tokens": round(self.expected_tokens, 3), "expected_ms": round(self.expected_ms, 3),
                "gain_vs_ar": round(self.gain_vs_ar, 3), **({"paper": self.paper} if self.paper else {})}


class BudgetController:
    """``budget=auto``: chooses each cycle's budget from the cost curve and the running acceptance.

    With no curve for this device yet (``curve=None``) it is *pending*: the cycles keep the method's own budget (the
    paper's) while ``probe`` measures the curve one forward between cycles (:meth:`probe_step`); the choice starts
    with the cycle after the curve is known."""

    def __init__(self, curve: CostCurve | None, max_budget: int, min_ceiling: int = 16, decay: float = DECAY,
                 probe: Any = None, paper: int | None = None) -> None:
        if max_budget < 1:
            raise SpecVizError("budget=auto needs a maximum budget of at least 1")
        self.max_budget = max_budget
        self.paper = paper if paper is not None else max_budget
        """The method's own budget (``budget=paper``), kept while pending and said beside the choice."""
        self.min_ceiling = min(min_ceiling, max_budget)
        self.stats = AcceptanceStats(decay)
        self._pad = True
        self.time: CycleTimeModel | None = CycleTimeModel(curve) if curve is not None else None
        self.probe = probe
        self.curve_source = "stored" if curve is not None else "measuring"
        self.auto_from_cycle: int | None = 0 if curve is not None else None
        self._chosen_ema = float(max_budget)
        self.last: Choice | None = None
        self.n_cycles = 0
        self.chosen_total = 0
        self.ar_cycles = 0

    @property
    def pad(self) -> bool:
        """Whether the engine pads its blocks (``DecodeConfig.pad_rows``): the cycle times are priced so."""
        return self._pad

    @pad.setter
    def pad(self, value: bool) -> None:
        self._pad = bool(value)
        if self.time is not None:
            self.time.pad = self._pad

    @property
    def curve(self) -> CostCurve | None:
        """This device's verify-cost curve, once known."""
        return self.time.curve if self.time is not None else None

    @property
    def pending(self) -> bool:
        """No verify-cost curve yet: the method's own budget holds."""
        return self.time is None

    @property
    def flat(self) -> bool:
        """The curve is flat up to the largest tree (:data:`FLAT`): the method's own budget is the choice."""
        curve = self.time.curve if self.time is not None else None
        return curve is not None and curve(self.max_budget + 1) <= FLAT * curve(1)

    def draft_budget(self) -> int | None:
        """The ceiling to draft up to this cycle: room to grow to twice the recent choice (None while pending: the
        drafter drafts its own tree)."""
        if self.pending or self.flat:
            return None
        return int(min(self.max_budget, max(self.min_ceiling, 2 * self._chosen_ema + 4)))

    def probe_step(self) -> None:
        """While pending, one step of measuring the curve; the choice takes over once it is known."""
        if not self.pending or self.probe is None:
            return
        self.probe.step()
        if self.probe.done:
            self.time = CycleTimeModel(CostCurve.from_dict(self.probe.curve), pad=self._pad)
            self.curve_source = f"measured between cycles 0-{self.n_cycles - 1}"
            self.auto_from_cycle = self.n_cycles

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

    def fit(self, tree: DraftTree, ceiling: int | None = None, room: int | None = None) -> Choice:
        """Gate every verified node but the best B; returns the choice (B may be 0: an AR cycle). While pending,
        nothing is gated: the drafter's own tree is verified. ``room``: the tokens the session may still commit; a
        node at depth ``room`` or deeper can add none (the cycle is cut there), so it is never worth its row."""
        if self.time is None:
            n = sum(1 for i in range(1, len(tree)) if not tree.gated[i])
            done = (self.probe.done_steps, self.probe.total) if self.probe is not None else (0, 0)
            self.last = Choice(n, n, self.paper, 0.0, 0.0, 1.0, measuring=done)
            return self.last
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
        expected = [1.0]  # how many to keep is a bet on speed: the means decide it (the optimism only orders)
        for i in cand:
            expected.append(expected[-1] + mean_pp[i])
        cycle_ms = [self.time(b + 1) for b in range(len(expected))]
        b = choose_budget(expected, cycle_ms)
        keep = set(cand[:b])
        for i in range(1, len(tree)):
            if not tree.gated[i] and i not in keep:
                tree.gated[i] = True
        if b == 0:
            tree.mode = "ar"
        ar_rate = 1.0 / cycle_ms[0] if cycle_ms[0] > 0 else 0.0
        rate = expected[b] / cycle_ms[b] if cycle_ms[b] > 0 else 0.0
        self.last = Choice(b, len(cand), ceiling if ceiling is not None else self.max_budget, expected[b],
                           cycle_ms[b], rate / ar_rate if ar_rate > 0 else 1.0, paper=self.paper)
        return self.last

    def observe(self, record: CycleRecord, greedy: bool = False) -> None:
        """Learn from a finished cycle: acceptance of its nodes (under greedy decoding also of those it cut: see
        :meth:`AcceptanceStats.observe`), and its timings."""
        self.stats.observe(record, greedy)
        t = record.timings_ms
        rows = record.n_verified
        if self.time is not None and not record.state.get("from_prefill"):  # a forward was timed
            self.time.observe(rows, t.get("forward", 0.0), sum(t.get(k, 0.0) for k in STAGES_AFTER_DRAFT),
                              int(record.state.get("padded_to", rows)))
        chosen = rows - 1
        self._chosen_ema += 0.2 * (chosen - self._chosen_ema)
        self.n_cycles += 1
        self.chosen_total += chosen
        self.ar_cycles += chosen == 0

    def summary(self) -> dict[str, Any]:
        """What a session records of its budget (``stats["budget"]``): chosen for this device, and the paper's."""
        return {"mode": AUTO, "paper": self.paper, "cycles": self.n_cycles,
                "mean_budget": self.chosen_total / self.n_cycles if self.n_cycles else 0.0,
                "ar_cycles": self.ar_cycles, "max_budget": self.max_budget, "curve": self.curve_source,
                "auto_from_cycle": self.auto_from_cycle,
                "forward_scale": round(self.time.scale, 3) if self.time is not None else None}


def make_controller(target: Any, max_budget: int, paper: int | None = None) -> BudgetController:
    """A controller for ``target`` on its device: with its stored cost curve, or pending while a
    :class:`~specviz_core.engine.cost_curve.CurveProbe` measures one between the cycles (and stores it). A curve
    stored before every small size was measured is measured again: its gaps hid the kernels' bumps."""
    from specviz_core.engine.cost_curve import CurveProbe

    curve = stored_curve(target)
    if curve is not None:
        return BudgetController(curve, max_budget, paper=paper)
    return BudgetController(None, max_budget, probe=CurveProbe(target), paper=paper)


def stored_curve(target: Any) -> CostCurve | None:
    """``target``'s verify-cost curve stored for its device and dtype, when every small size was measured (a
    curve with gaps hid the kernels' bumps); else None."""
    from specviz_core.engine.cost_curve import is_dense
    from specviz_core.runtime.cost_files import load_cost_curve

    stored = load_cost_curve(target.name, target.device, target.dtype)
    return CostCurve.from_dict(stored) if stored is not None and is_dense(stored) else None

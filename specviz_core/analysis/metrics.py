"""Session metrics under the names and definitions serving dashboards use (vLLM, SGLang, llama.cpp).

Computed from cycle summaries alone, so a 10,000-cycle recording needs no tree. For a tree, the "drafted tokens"
of a cycle are its verified draft nodes (the root excluded); gated or budget-cut candidates were never sent to the
target and do not count. :data:`DEFINITIONS` is the one text of each definition: tooltips, ``specviz sessions
--metrics`` and ``docs/metrics.md`` all show it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.analysis.stop_cause import CAUSES
from specviz_core.cycle_state import EngineFacts, TalonFacts

DEFINITIONS: dict[str, str] = {
    "draft_acceptance_rate": "accepted draft tokens / drafted tokens; the bonus token is not counted (vLLM, "
                             "llama.cpp). For a tree, the drafted tokens are the verified nodes, root excluded.",
    "mean_acceptance_length": "1 + accepted draft tokens / cycles: tokens per target forward with the bonus "
                              "counted (vLLM, SGLang); SpecViz's tau.",
    "acceptance_at_position": "cycles that accepted a draft token at position i / cycles that drafted "
                              "(vLLM's per-position rate; position 1 is the first token after the root).",
    "conditional_acceptance_at_position": "cycles that accepted position i / cycles that reached it (accepted "
                                          "position i-1 and had a verified draft node at position i).",
    "stop_causes": "cycles by why the walk stopped where the target's token w was not a verified child: gated, "
                   "cut by the budget (or a depth limit, or the tree ended there), offered but not drafted (the "
                   "tree's width), no source offered it.",
    "headroom": "hindsight within each cycle: the draft tokens plus the target's next token w that some source "
                "offered along the target's path, width unlimited; headroom minus accepted = tokens the tree's "
                "shape and budget left on the table (one per cycle at most: the token after w is not known).",
    "oracle_run": "hindsight across cycles: the target's tokens from a cycle's root on that some source offered at "
                  "every step, in a row, width unlimited; where a cycle's sources offered its w, the run goes on "
                  "along the next cycle's path with what the sources offered there (their tables one cycle newer).",
    "delta": "draft steps / cycles: TALON's draft efficiency (one step per tree layer: a draft head or draft model "
             "forward, or a layer of table lookups).",
    "step_cost": "c: the median over cycles of one draft step's time / the cycle's target forward time (the head's "
                 "own timed steps where recorded).",
    "r": "TALON's R = mean_acceptance_length / (1 + c x delta): tokens per forward discounted by the drafting's "
         "cost (seed 001, Eq. 7).",
}


def decoding_ms(summaries: Iterable[CycleSummary]) -> float:
    """A session's decoding time, ms: every cycle's recorded stages summed (draft, forward, walk, trim, harvest,
    build, record). The prefill is not decoding time, and neither is anything between cycles (a paused session)."""
    return float(sum(s.cycle_ms for s in summaries if not s.damaged))


def tokens_per_s(summaries: Iterable[CycleSummary]) -> float:
    """THE tokens/s of a session, the one every face shows (the Run panel's and ``sessions``' list, the charts, the
    race at the finish, ``compare``, ``export``, ``Session.summary()``): tokens committed over :func:`decoding_ms`.
    A recording's session row keeps the same two sums (``SessionInfo.tokens_per_s``)."""
    cyc = [s for s in summaries if not s.damaged]
    ms = decoding_ms(cyc)
    return 1000.0 * sum(s.n_committed for s in cyc) / ms if ms > 0 else 0.0


def cycle_rate(s: CycleSummary) -> float | None:
    """One cycle's own tokens/s, as the charts plot it (the window's and the shared page's): None for a damaged cycle
    and for one that ran no forward of its own (a cycle 0 whose token came from the prefill's last row: a few ms of
    bookkeeping, hundreds of tokens/s that say nothing of the method). The session's rate, :func:`tokens_per_s`,
    still counts that token, as plain decoding's does."""
    if not s.ran_forward or s.cycle_ms <= 0:
        return None
    return 1000.0 * s.n_committed / s.cycle_ms


def tokens_per_forward(summaries: Iterable[CycleSummary]) -> float:
    """Tokens committed per target forward (tau), the bonus included: a cycle 0 whose token came from the prefill's
    last row ran no forward of its own (``SessionInfo.tokens_per_forward`` from the row's sums)."""
    cyc = [s for s in summaries if not s.damaged]
    forwards = sum(s.ran_forward for s in cyc)
    return sum(s.n_committed for s in cyc) / forwards if forwards else 0.0


def speedup(rate: float, baseline_rate: float) -> float | None:
    """A speed-up measured against a baseline session: tokens/s over the baseline's (None without one)."""
    return rate / baseline_rate if baseline_rate > 0 else None


def oracle_runs(summaries: list[CycleSummary]) -> list[int | None]:
    """Per cycle, :data:`DEFINITIONS` ``oracle_run`` (None where the cycle recorded no headroom). A cycle whose
    sources offered its w (headroom of all sources = accepted + 1) continues into the next cycle, whose root is w."""
    out: list[int | None] = [None] * len(summaries)
    after = 0  # the run from the next cycle's root on
    for i in range(len(summaries) - 1, -1, -1):
        s = summaries[i]
        room = s.headroom.get("*") if s.headroom and not s.damaged else None
        if room is None:
            after = 0
            continue
        through_w = room >= s.n_accepted + 1 and i + 1 < len(summaries)
        out[i] = room + (after if through_w else 0)
        after = out[i]
    return out


@dataclass(frozen=True, slots=True)
class PositionRate:
    """Acceptance at one draft position (depth in the tree), over a session."""

    position: int
    """1 for the first draft token after the root."""
    accepted: int
    """Cycles that accepted a token at this position."""
    reached: int | None
    """Cycles that accepted position - 1 and verified a node here; None when the recording lacks it."""
    drafting_cycles: int
    """Cycles that verified at least one draft token."""

    @property
    def unconditional(self) -> float:
        return self.accepted / self.drafting_cycles if self.drafting_cycles else 0.0

    @property
    def conditional(self) -> float | None:
        if self.reached is None:
            return None
        return self.accepted / self.reached if self.reached else 0.0


@dataclass(frozen=True, slots=True)
class SessionMetrics:
    """A session's acceptance in the terms of :data:`DEFINITIONS`."""

    cycles: int
    """Cycles decoded: one target forward each (the first token, when the prefill's last row gave it, is not one)."""
    drafting_cycles: int
    """Cycles that verified at least one draft token (AR fallbacks do not)."""
    drafted: int
    """Verified draft tokens (root excluded)."""
    accepted: int
    """Accepted draft tokens (the bonus excluded)."""
    positions: tuple[PositionRate, ...]
    causes: dict[str, int] = field(default_factory=dict)
    """Cycles per stop cause (:data:`specviz_core.analysis.stop_cause.CAUSES`), over cycles whose recording stored one."""
    headroom: int = 0
    """Sum over those cycles of the headroom of all sources together."""
    headroom_accepted: int = 0
    """Accepted draft tokens over the same cycles (what the headroom is compared with)."""
    headroom_by_source: dict[str, int] = field(default_factory=dict)
    """Per source, the sum of its own headroom."""
    draft_steps: int = 0
    """Draft steps over cycles that record them (TALON, EAGLE: one per tree layer; 0 for other methods)."""
    step_cost: float | None = None
    """c: the median over cycles of one draft step's time over the cycle's target forward (the head's own step time
    where recorded, else the cycle's draft time over its steps); None when no cycle recorded draft steps."""

    @property
    def lost_to_shape(self) -> int:
        """Tokens a source offered that the tree's width, gate or budget kept from the target (within the cycle)."""
        return self.headroom - self.headroom_accepted

    @property
    def draft_acceptance_rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def mean_acceptance_length(self) -> float:
        return 1.0 + self.accepted / self.cycles if self.cycles else 0.0

    @property
    def delta(self) -> float:
        """Draft steps per target forward (TALON's draft efficiency)."""
        return self.draft_steps / self.cycles if self.cycles else 0.0

    @property
    def r(self) -> float | None:
        """TALON's R = tau / (1 + c * delta): tokens per forward, discounted by the drafting's cost."""
        if self.step_cost is None:
            return None
        return self.mean_acceptance_length / (1.0 + self.step_cost * self.delta)

    def to_json(self) -> dict[str, Any]:
        return {
            "cycles": self.cycles, "drafting_cycles": self.drafting_cycles, "drafted": self.drafted,
            "accepted": self.accepted, "draft_acceptance_rate": self.draft_acceptance_rate,
            "mean_acceptance_length": self.mean_acceptance_length,
            "acceptance_at_position": [
                {"position": p.position, "accepted": p.accepted, "reached": p.reached,
                 "unconditional": p.unconditional, "conditional": p.conditional} for p in self.positions],
            "stop_causes": dict(self.causes), "headroom": self.headroom, "headroom_accepted": self.headroom_accepted,
            "headroom_by_source": dict(self.headroom_by_source), "draft_steps": self.draft_steps,
            "delta": self.delta, "step_cost": self.step_cost, "r": self.r,
        }

    def lines(self, max_positions: int = 8) -> list[str]:
        """The metrics as a few lines of text (``specviz sessions --metrics``)."""
        rate = self.draft_acceptance_rate
        out = [f"draft acceptance rate   {'n/a (nothing drafted)' if rate is None else f'{rate:.3f}'}"
               f"   ({self.accepted} accepted / {self.drafted} drafted)",
               f"mean acceptance length  {self.mean_acceptance_length:.3f}   (1 + {self.accepted} / {self.cycles} "
               "cycles)"]
        if self.positions:
            shown = self.positions[:max_positions]
            out.append("position                " + "".join(f"{p.position:>7}" for p in shown))
            out.append("accepted / drafting     " + "".join(f"{p.unconditional:>7.3f}" for p in shown))
            out.append("accepted / reached      " + "".join(
                f"{'n/a' if p.conditional is None else format(p.conditional, '.3f'):>7}" for p in shown))
        if self.step_cost is not None:
            out.append(f"draft cost               delta {self.delta:.2f} steps per forward, c {self.step_cost:.3f} "
                       f"(a step over a target forward), R = tau / (1 + c delta) = {self.r:.3f}")
        if self.causes:
            out.append("stopped because          " + ", ".join(f"{CAUSES[c]} {n}" for c, n in self.causes.items()))
            out.append(f"headroom                 {self.headroom} tokens in reach, {self.headroom_accepted} accepted: "
                       f"{self.lost_to_shape} left by the tree's shape and budget; the cycles that stopped with no "
                       f"source offering the target's token ({self.causes.get('not_offered', 0)}) are draft quality")
        return out


def session_metrics(summaries: Iterable[CycleSummary]) -> SessionMetrics:
    """The metrics of a session from its cycle summaries."""
    counter = MetricsCounter()
    counter.add(summaries)
    return counter.result()


class MetricsCounter:
    """:class:`SessionMetrics` counted as cycles arrive: :meth:`add` costs time in the cycles added only, so the
    window's charts keep them up to date during a live session."""

    def __init__(self) -> None:
        self.cycles = self.drafting = self.drafted = self.accepted = 0
        self.accepted_at: list[int] = []
        self.reached_at: list[int] = []
        self.reached_known = True
        self.causes = {c: 0 for c in CAUSES}
        self.room = self.room_acc = 0
        self.by_source: dict[str, int] = {}
        self.steps = 0
        self.step_costs: list[float] = []

    def add(self, summaries: Iterable[CycleSummary]) -> None:
        for s in summaries:
            if s.damaged:  # unreadable in its recording: nothing to count
                continue
            if s.cause:  # every cycle the timeline shows, the prefill's token included
                self.causes[s.cause] += 1
                self.room += s.headroom.get("*", 0)
                self.room_acc += s.n_accepted
                for src, n in s.headroom.items():
                    if src != "*":
                        self.by_source[src] = self.by_source.get(src, 0) + n
            if EngineFacts.read(s.state).from_prefill:  # the prefill's last row gave this token: not a decode step
                continue
            self.cycles += 1
            talon = TalonFacts.read(s.state)
            steps = talon.draft_steps
            if isinstance(steps, (int, float)) and steps > 0:
                self.steps += int(steps)
                per_step = (talon.draft_step_ms if talon.draft_step_ms is not None
                            else s.timings_ms.get("draft", 0.0) / steps)
                forward = s.timings_ms.get("forward", 0.0)
                if forward > 0 and isinstance(per_step, (int, float)):
                    self.step_costs.append(per_step / forward)
            n_draft = s.n_verified - 1
            if n_draft <= 0:
                continue
            self.drafting += 1
            self.drafted += n_draft
            self.accepted += s.n_accepted
            deepest = s.n_accepted + (1 if s.frontier else 0)
            self.reached_known = self.reached_known and s.frontier is not None
            while len(self.accepted_at) < deepest:
                self.accepted_at.append(0)
                self.reached_at.append(0)
            for i in range(s.n_accepted):
                self.accepted_at[i] += 1
            for i in range(deepest):
                self.reached_at[i] += 1

    def result(self) -> SessionMetrics:
        positions = tuple(
            PositionRate(i + 1, self.accepted_at[i], self.reached_at[i] if self.reached_known else None,
                         self.drafting)
            for i in range(len(self.accepted_at)))
        known = {c: n for c, n in self.causes.items() if n} if any(self.causes.values()) else {}
        costs = sorted(self.step_costs)
        c = (costs[(len(costs) - 1) // 2] + costs[len(costs) // 2]) / 2 if costs else None
        return SessionMetrics(self.cycles, self.drafting, self.drafted, self.accepted, positions, known, self.room,
                              self.room_acc, dict(self.by_source), self.steps, c)


def budget_words(stats: dict[str, Any]) -> str:
    """How a session's budget was chosen, in a few words (empty for a method with no budget)."""
    b = stats.get("budget") if isinstance(stats, dict) else None
    if not isinstance(b, dict):
        return ""
    if b.get("mode") == "auto":
        start = b.get("auto_from_cycle")
        when = "" if start in (0, None) else f" from cycle {start}, the paper's before while this device's verify " \
                                              "cost was measured"
        if start is None:
            return f"; budget: the paper's {b.get('paper')} while this device's verify cost is measured"
        if b.get("curve") == "prior":
            return (f"; budget chosen from a cautious prior (this device's verify cost not measured yet): "
                    f"{b.get('mean_budget', 0.0):.1f} nodes a cycle (the paper's {b.get('paper')})")
        return (f"; budget chosen for this device: {b.get('mean_budget', 0.0):.1f} nodes a cycle{when} "
                f"(the paper's {b.get('paper')})")
    if b.get("mode") == "fixed":
        return f"; budget fixed at {b.get('value')} (the paper's {b.get('paper')})"
    return f"; budget: the paper's {b.get('value')}"

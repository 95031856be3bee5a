"""The race: sessions of one prompt replayed side by side at their recorded wall-clock pace.

A lane's clock starts at 0 with the prefill (the forward over the prompt); each cycle's tokens land at the moment
that cycle ended, as recorded. :func:`frame_times` samples the race at a fixed frame rate, scaled by a slow-motion
factor, and :meth:`Race.at` says what every lane shows at a moment: the text so far, the tokens that landed last
(accepted draft tokens highlighted), tokens per second so far, the speed-up against the first lane, and whether it
has crossed the finish line. The window's Race view and ``specviz race`` (an animated GIF) draw the same frames.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specviz_core.analysis.compare import Compared
from specviz_core.analysis.cycle_summary import AR, BONUS
from specviz_core.analysis.metrics import speedup
from specviz_core.analysis.timing import CostCurve, session_cost
from specviz_core.cycle_state import EngineFacts
from specviz_core.records import SessionInfo


@dataclass(frozen=True, slots=True)
class LaneState:
    """One lane at one moment."""

    tokens: tuple[int, ...]
    """Every token committed by then."""
    kinds: tuple[str, ...]
    """Per token: the source that drafted it, ``bonus`` or ``ar``."""
    last_cycle: int
    """Tokens committed by the latest cycle (they are drawn highlighted); 0 before the first."""
    tokens_per_s: float
    """Tokens so far over the lane's decoding time so far (its prefill excluded: at the finish, the session's own
    tokens/s, the number ``sessions``, ``compare`` and the window show)."""
    finished: bool
    finish_ms: float
    """When the lane's last cycle ended (its finish line)."""


@dataclass(frozen=True)
class Lane:
    """When each of a session's tokens landed."""

    label: str
    ends_ms: tuple[float, ...]
    """Per cycle: when it ended, from the start of the prefill."""
    counts: tuple[int, ...]
    """Per cycle: tokens committed by the end of it (cumulative)."""
    tokens: tuple[int, ...]
    kinds: tuple[str, ...]
    start_ms: float = 0.0
    """When decoding began: after the prefill, when the lane's clock includes it."""

    @classmethod
    def of(cls, s: Compared, include_prefill: bool = True) -> Lane:
        t = s.info.prefill_ms if include_prefill else 0.0
        ends, counts, n = [], [], 0
        for c in s.summaries:
            t += c.cycle_ms
            n += c.n_committed
            ends.append(t)
            counts.append(n)
        tokens = tuple(tok for c in s.summaries for tok in c.committed_ids)
        kinds = tuple(k for c in s.summaries for k in c.committed_kinds)
        return cls(s.label, tuple(ends), tuple(counts), tokens, kinds, s.info.prefill_ms if include_prefill else 0.0)

    @property
    def finish_ms(self) -> float:
        return self.ends_ms[-1] if self.ends_ms else 0.0

    def at(self, ms: float) -> LaneState:
        k = bisect.bisect_right(self.ends_ms, ms)  # cycles ended by ``ms``
        n = self.counts[k - 1] if k else 0
        last = n - (self.counts[k - 2] if k >= 2 else 0) if k else 0
        decoding = min(ms, self.finish_ms) - self.start_ms
        tps = 1000.0 * n / decoding if decoding > 0 else 0.0
        return LaneState(self.tokens[:n], self.kinds[:n], last, tps, k == len(self.ends_ms), self.finish_ms)


def is_draft(kind: str) -> bool:
    """A token that a draft supplied (accepted), not the target's own bonus or AR token."""
    return kind not in (BONUS, AR)


@dataclass(frozen=True)
class Race:
    lanes: tuple[Lane, ...]
    notes: tuple[str, ...] = ()
    """Per lane: why it finished behind the first lane (from the time arithmetic), or '' when it did not."""

    @property
    def duration_ms(self) -> float:
        return max(lane.finish_ms for lane in self.lanes)

    def at(self, ms: float) -> list[LaneState]:
        return [lane.at(ms) for lane in self.lanes]

    def speedups(self, ms: float) -> list[float | None]:
        """Each lane's tokens/s so far over the first lane's (None until the first lane has a token)."""
        states = self.at(ms)
        base = states[0].tokens_per_s
        return [s.tokens_per_s / base if base > 0 else None for s in states]

    def final_speedups(self) -> list[float | None]:
        """Each lane's speed-up at its finish: its session's tokens/s over the first lane's, the number ``compare``,
        the window and ``Session.summary()`` give (:func:`specviz_core.analysis.metrics.speedup`; the prefill is not
        decoding time, as it is not in either session's tokens/s)."""
        ends = [lane.at(lane.finish_ms) for lane in self.lanes]
        return [speedup(s.tokens_per_s, ends[0].tokens_per_s) for s in ends]


def make_race(sessions: Sequence[Compared], include_prefill: bool = True,
              curve_of: Callable[[SessionInfo], CostCurve | None] | None = None) -> Race:
    """The race of ``sessions`` (the first is the baseline). ``curve_of``: a session's device's verify-cost curve,
    for what a lane behind the baseline says (the callers pass the stored curves)."""
    if not 2 <= len(sessions) <= 4:
        raise ValueError("a race has two to four lanes")
    lanes = tuple(Lane.of(s, include_prefill) for s in sessions)
    base = lanes[0]
    notes = tuple("" if i == 0 or lane.finish_ms <= base.finish_ms
                  else why_slower(s, sessions[0], curve_of(s.info) if curve_of else None)
                  for i, (lane, s) in enumerate(zip(lanes, sessions)))
    return Race(lanes, notes)


def why_slower(s: Compared, base: Compared, curve: CostCurve | None = None) -> str:
    """Why ``s`` took longer than ``base`` (plain decoding, as a race's first lane usually is), in one line: what
    its verify forward cost against the base's step, what it committed per forward, and what ``curve`` (its
    device's verify cost) says a better budget would do (:func:`specviz_core.analysis.timing.session_cost`)."""
    steps = [c.cycle_ms for c in base.summaries
             if not c.damaged and c.cycle_ms > 0 and not EngineFacts.read(c.state).from_prefill]  # decode steps only
    t_base = sum(steps) / len(steps) if steps else None
    cost = session_cost(s.summaries, curve, t_base, f"{base.info.method}'s mean step")
    if not cost.cycles:
        return ""
    rows = round(cost.mean_rows)
    unit = f"one {base.info.method} step" if t_base else "a 1-token forward"
    text = (f"Slower here: its {rows}-row verify costs {cost.forward_ms / cost.ar_forward_ms:.1f}x {unit}, "
            f"drafting and bookkeeping {(cost.draft_ms + cost.bookkeeping_ms) / cost.ar_forward_ms:.1f}x more, "
            f"for {cost.tau:.2f} tokens a forward")
    if cost.best is not None:
        text += (f"; the cost curve gives budget {cost.best.budget} {cost.best.speedup:.2f}x" if cost.best.speedup > 1
                 else "; the cost curve says no budget beats plain decoding on this device")
    return text + "."


def frame_times(race: Race, fps: float = 10.0, slowdown: float = 1.0, hold_ms: float = 2000.0) -> list[float]:
    """Race time (ms) shown by each frame: one frame every ``1000 / fps`` ms of the viewer's time, the race
    running ``slowdown`` times slower than recorded, until the last lane finishes; then ``hold_ms`` (viewer time)
    more frames on the final state."""
    step = 1000.0 / fps / slowdown
    n = int(race.duration_ms // step) + 1
    times = [i * step for i in range(n)]
    if times[-1] < race.duration_ms:
        times.append(race.duration_ms)
    times += [race.duration_ms] * int(round(hold_ms / 1000.0 * fps))
    return times

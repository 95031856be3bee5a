"""The race: sessions of one prompt replayed side by side at their recorded wall-clock pace.

A lane's clock starts at 0 with the prefill (the forward over the prompt); each cycle's tokens land at the moment
that cycle ended, as recorded. :func:`frame_times` samples the race at a fixed frame rate, scaled by a slow-motion
factor, and :meth:`Race.at` says what every lane shows at a moment: the text so far, the tokens that landed last
(accepted draft tokens highlighted), tokens per second so far, the speed-up against the first lane, and whether it
has crossed the finish line. The window's Race view and ``specviz race`` (an animated GIF) draw the same frames.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from specviz_core.analysis.compare import Compared
from specviz_core.analysis.cycle_summary import AR, BONUS


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
    """Tokens so far over the lane's time so far (prefill included)."""
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
        return cls(s.label, tuple(ends), tuple(counts), tokens, kinds)

    @property
    def finish_ms(self) -> float:
        return self.ends_ms[-1] if self.ends_ms else 0.0

    def at(self, ms: float) -> LaneState:
        k = bisect.bisect_right(self.ends_ms, ms)  # cycles ended by ``ms``
        n = self.counts[k - 1] if k else 0
        last = n - (self.counts[k - 2] if k >= 2 else 0) if k else 0
        elapsed = min(ms, self.finish_ms)
        tps = 1000.0 * n / elapsed if elapsed > 0 else 0.0
        return LaneState(self.tokens[:n], self.kinds[:n], last, tps, k == len(self.ends_ms), self.finish_ms)


def is_draft(kind: str) -> bool:
    """A token that a draft supplied (accepted), not the target's own bonus or AR token."""
    return kind not in (BONUS, AR)


@dataclass(frozen=True)
class Race:
    lanes: tuple[Lane, ...]

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

    def final_speedups(self) -> list[float]:
        """Time to the finish against the first lane's, for the same number of tokens."""
        base = self.lanes[0]
        return [base.finish_ms / lane.finish_ms if lane.finish_ms > 0 else 0.0 for lane in self.lanes]


def make_race(sessions: Sequence[Compared], include_prefill: bool = True) -> Race:
    if not 2 <= len(sessions) <= 4:
        raise ValueError("a race has two to four lanes")
    return Race(tuple(Lane.of(s, include_prefill) for s in sessions))


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

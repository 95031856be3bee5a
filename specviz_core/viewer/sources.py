"""Where cycles come from: a recording being replayed, or a session being decoded now.

Both implement :class:`CycleSource`, so nothing that shows a cycle knows which one it reads.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Any, Protocol

from specviz_core.analysis.cycle_summary import CycleSummary, damaged_summary, summarize
from specviz_core.analysis.timing import median_forward_ms
from specviz_core.errors import DamagedCycle, SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.records import COST_CURVE, CycleRecord, SessionInfo


class CycleSource(Protocol):
    """A session's cycles, by index. ``info`` may change while a live session grows."""

    info: SessionInfo
    live: bool

    def __len__(self) -> int: ...

    def cycle(self, index: int) -> CycleRecord:
        """Cycle ``index``; :class:`~specviz_core.errors.DamagedCycle` if its recording cannot give it back."""
        ...

    def summaries(self) -> list[CycleSummary]: ...


class RecordingSource:
    """One recorded session, read on demand with a small cache of full cycles.

    A damaged cycle keeps its place: its summary says why (``damaged``), known when the session opens where the
    summary itself is damaged, else the first time the cycle is read."""

    live = False

    def __init__(self, recording: Recording, session_id: str | None = None, cache_size: int = 64) -> None:
        self.recording = recording
        info = recording.session(session_id, with_output=False)
        self._summaries = recording.cycle_summaries(info.id)
        # The output ids are in the summaries already: no second pass over the cycles.
        self.info = dataclasses.replace(info, output_ids=tuple(t for s in self._summaries for t in s.committed_ids))
        self._cache: OrderedDict[int, CycleRecord] = OrderedDict()
        self._cache_size = cache_size

    def __len__(self) -> int:
        return len(self._summaries)

    def cycle(self, index: int) -> CycleRecord:
        rec = self._cache.get(index)
        if rec is None:
            known = self._summaries[index].damaged
            if known:
                raise DamagedCycle(self.recording.path, self.info.id, index, known)
            try:
                rec = self.recording.cycle(self.info.id, index)
            except DamagedCycle as e:
                self._summaries[index] = damaged_summary(index, e.reason)
                raise
            self._cache[index] = rec
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(index)
        return rec

    def summaries(self) -> list[CycleSummary]:
        return self._summaries

    def ar_baseline(self) -> tuple[float | None, str, float | None]:
        """The AR speed to compare with (tokens/s, or None), where it comes from, and its median forward (ms, which
        says the load it ran under): this session if it is AR, else the last AR session in the same file on the same
        prompt, model and device (8 tokens at least)."""
        info = self.info
        if info.method == "ar":
            return info.tokens_per_s or None, "this session is AR", median_forward_ms(self._summaries)
        best = None
        try:
            sessions = self.recording.sessions(damaged=[])  # a damaged session is no baseline
        except SpecVizError:
            return None, "", None
        for s in sessions:
            if (s.method == "ar" and s.prompt_ids == info.prompt_ids and s.model == info.model
                    and s.device == info.device and s.n_tokens >= 8):
                best = s
        if best is None:
            return None, "", None
        try:
            forward = median_forward_ms(self.recording.cycle_summaries(best.id))
        except SpecVizError:
            forward = None
        return best.tokens_per_s, f"AR session {best.id} on the same prompt ({best.n_tokens} tokens)", forward


class LiveSource:
    """A session being decoded: the engine's records, appended as they arrive (already recorded)."""

    live = True

    def __init__(self, info: SessionInfo) -> None:
        self.info = info
        self._records: list[CycleRecord] = []
        self._summaries: list[CycleSummary] = []

    def __len__(self) -> int:
        return len(self._records)

    def append(self, record: CycleRecord, summary: CycleSummary | None = None) -> CycleSummary:
        """Add the next cycle; its summary is computed here unless the recorder already did."""
        if record.index != len(self._records):
            raise ValueError(f"cycle {record.index} arrived after {len(self._records)} cycles")
        self._records.append(record)
        summary = summary if summary is not None else summarize(record)
        self._summaries.append(summary)
        return summary

    def cycle(self, index: int) -> CycleRecord:
        return self._records[index]

    def summaries(self) -> list[CycleSummary]:
        return self._summaries


#: Where a session's cost curve came from, as the window, ``explain`` and the race say it.
CURVE_RECORDED = "the cost curve recorded with the session"
CURVE_OF_MACHINE = "this machine's cost curve (the session was recorded before sessions kept theirs)"


def session_curve(info: SessionInfo) -> tuple[dict[str, Any] | None, str]:
    """The verify-cost curve a recorded session's estimates use, and where it came from: the one the session started
    with (kept in its stats, so its figures never change with what this machine measured later), else, for a
    session recorded before sessions kept theirs, this machine's stored curve for its model, device and dtype."""
    kept = info.stats.get(COST_CURVE) if isinstance(info.stats, dict) else None
    if isinstance(kept, dict) and kept.get("n") and len(kept.get("n", ())) == len(kept.get("ms", ())):
        # with what it measured beside the forward: the host's reduction, and what a longer cache adds
        extra = {k: kept[k] for k in ("host_ms", "cache_len", "context") if k in kept}
        return {"n": list(kept["n"]), "ms": list(kept["ms"]), **extra}, CURVE_RECORDED
    from specviz_core.runtime.cost_files import load_cost_curve

    try:
        stored = load_cost_curve(info.model, info.device, info.dtype or None)
    except Exception:  # noqa: BLE001 - a missing or broken measurement is "not measured"
        stored = None
    return (stored, CURVE_OF_MACHINE) if stored else (None, "")

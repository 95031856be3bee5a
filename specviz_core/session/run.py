"""Decoding a prepared session and recording every cycle, the same way whoever started it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import NamedTuple

from specviz_core.analysis.cycle_summary import CycleSummary, summarize
from specviz_core.analysis.metrics import budget_words
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording, SessionWriter
from specviz_core.records import CycleRecord, SessionInfo
from specviz_core.session.factory import Prepared

__all__ = ["Prepared", "RecordedCycle", "RecordedRun", "summary_line"]


class RecordedCycle(NamedTuple):
    """A cycle as stored: the record (with its ``record`` timing) and its summary, computed once."""

    record: CycleRecord
    summary: CycleSummary


class RecordedRun:
    """Drives an engine and records every cycle; safe to stop at any cycle boundary.

    ``run()`` yields cycles already stored; if the loop is left early the session is marked
    ``interrupted``, if the engine raises it is marked ``failed``.
    """

    def __init__(self, prepared: Prepared, recording: Recording) -> None:
        self.engine = prepared.engine
        self.recording = recording
        self.writer: SessionWriter = recording.new_session(prepared.info)
        self.info = prepared.info
        self.failed = False
        self.in_cycle = False
        """A cycle was started and not stored (an exception or Ctrl-C left it)."""

    def step(self) -> RecordedCycle:
        self.in_cycle = True
        try:
            record = self._decode()
            summary = summarize(record)
            record = self.writer.append(record, summary)
            summary = replace(summary, cycle_ms=float(sum(record.timings_ms.values())), timings_ms=dict(record.timings_ms))  # the record time too
            self._cycle_stored()
        except SpecVizError as e:
            self._fail(str(e))
            raise
        except Exception as e:
            self._fail(f"{type(e).__name__}: {e}")
            raise
        self.in_cycle = False
        if self.engine.done:
            self.finish("complete", self.engine.stop_reason)
        return RecordedCycle(record, summary)

    def _decode(self) -> CycleRecord:
        """The next cycle's record (the prefill first)."""
        if not self.engine.prefilled:
            self.writer.set_prefill_ms(self.engine.prefill())
        return self.engine.step()

    def _cycle_stored(self) -> None:
        """A cycle was stored (a fork switches its settings here)."""

    def run(self) -> Iterator[RecordedCycle]:
        try:
            while not self.engine.done:
                yield self.step()
        finally:
            if not self.writer.finished and not self.failed:
                try:
                    self.finish("interrupted", "stopped by the user")
                except SpecVizError:
                    pass  # the file cannot take it now; the next open marks the session interrupted

    def _fail(self, reason: str) -> None:
        """Mark the session failed if the file lets us; the error that failed it is what the user sees."""
        self.failed = True
        try:
            self.finish("failed", reason)
        except SpecVizError:
            pass  # e.g. the database is locked: the session stays 'running' until a reader finds its writer gone

    def finish(self, status: str, reason: str = "") -> None:
        self.writer.finish(status, reason, self.engine.session_stats())


def summary_line(info: SessionInfo) -> str:
    return (f"{info.n_tokens} tokens, {info.n_forward} target forwards, "
            f"{info.mean_accepted:.2f} tokens/forward, {info.tokens_per_s:.1f} tokens/s "
            f"({info.status}{', ' + info.stop_reason if info.stop_reason else ''}){budget_words(info.stats)}")

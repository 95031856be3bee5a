"""The one session object: a checked method on a prompt, decoded cycle by cycle and (when given a recording)
recorded, the same way whoever drives it.

``specviz.Session`` (the Python API) is this class with Python conveniences on top; ``specviz record``, the
benchmarks, ``reproduce``, ``optimize-tree``, the window's engine thread and a fork (:mod:`.fork`) all decode
through it. It is the only place an :class:`~specviz_core.engine.cycle.Engine` is built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from specviz_core.analysis.cycle_summary import CycleSummary, summarize
from specviz_core.analysis.metrics import budget_words
from specviz_core.drafters import Drafter
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording, SessionWriter
from specviz_core.records import COST_CURVE, CycleRecord, SessionInfo
from specviz_core.runtime import threads as cpu_threads
from specviz_core.runtime.models import LoadedModel, encode_prompt
from specviz_core.session.factory import build_engine, session_info
from specviz_core.session.spec import MethodChoice, SessionSpec

Progress = Callable[[str, float | None], None]


class RecordedCycle(NamedTuple):
    """A cycle as decoded (and stored, when the session records): the record and its summary, computed once."""

    record: CycleRecord
    summary: CycleSummary


class Session:
    """One session: ``step()`` decodes a cycle (the prompt's prefill first), ``run()`` to the end, ``close()`` ends it.

    With ``recording`` every cycle is stored as it is decoded and the session's row says how it ended: ``complete``
    (its stop reason, or ended by its caller between cycles), ``interrupted`` (a loop left early, a cut inside a
    cycle) or ``failed`` (the error that failed it). ``drafter``: reuse one (its tables persist across the samples
    of a group). ``info``: the row to record under when it differs from these settings (a fork's).
    """

    def __init__(self, spec: SessionSpec, target: LoadedModel, draft: LoadedModel | None = None, *,
                 recording: Recording | None = None, group_id: str | None = None, drafter: Drafter | None = None,
                 info: SessionInfo | None = None, progress: Progress | None = None) -> None:
        self.spec = spec
        self.target = target
        self.draft = draft
        prompt_ids, used_chat = encode_spec(spec, target)
        self.engine = build_engine(target, spec.choice, prompt_ids, draft=draft, max_new_tokens=spec.max_new_tokens,
                                   temperature=spec.temperature, seed=spec.seed, drafter=drafter, progress=progress)
        info = info or session_info(
            target, spec.choice, prompt_ids, prompt_text=spec.prompt or prompt_words(target, prompt_ids),
            temperature=spec.temperature, seed=spec.seed, max_new_tokens=spec.max_new_tokens, draft=draft,
            chat_template=used_chat, group_id=group_id)
        self.cost_curve = curve_in_force(target)
        """The verify-cost curve this device had when the session started, kept with the session: what its budget
        was chosen from, and what its speed-up is estimated with on any machine later."""
        self.info: SessionInfo = replace(info, stats={**info.stats, **self._curve_stats()})
        self.recording: Recording | None = None
        self.writer: SessionWriter | None = None
        if recording is not None:
            self.record_to(recording)
        self.failed = False
        """The session was marked failed (the error that failed it was raised)."""
        self.in_cycle = False
        """A cycle was started and not finished (an exception or Ctrl-C left it)."""

    @property
    def choice(self) -> MethodChoice:
        return self.spec.choice

    def record_to(self, recording: Recording) -> None:
        """Record this session in ``recording`` from its first cycle (its row is written now)."""
        if self.writer is not None or self.engine.prefilled:
            raise SpecVizError("a session is recorded from its start: give the recording before the first cycle")
        self.recording = recording
        self.writer = recording.new_session(self.info)

    # -- state ------------------------------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """Whether decoding has ended (:attr:`stop_reason` says why)."""
        return self.engine.done

    @property
    def stop_reason(self) -> str:
        return self.engine.stop_reason

    @property
    def finished(self) -> bool:
        """Whether the recorded row has its final status (always False without a recording)."""
        return self.writer is not None and self.writer.finished

    @property
    def drafter(self) -> Drafter:
        return self.engine.drafter

    @property
    def prompt_ids(self) -> list[int]:
        return list(self.engine.prompt_ids)

    @property
    def output_ids(self) -> list[int]:
        """The tokens committed after the prompt (what ``generate`` returns after the prompt)."""
        return list(self.engine.output_ids)

    @property
    def cycle_index(self) -> int:
        """The index of the next cycle to decode."""
        return self.engine.cycle_index

    @property
    def n_forward(self) -> int:
        """Target forwards so far (the prefill not counted)."""
        return self.engine.n_forward

    def stats(self) -> dict[str, Any]:
        """What the session records when it ends: the drafter's counters, the budget's choice, the threads, and the
        cost curve it started with."""
        return {**self.engine.session_stats(), **self._curve_stats()}

    def _curve_stats(self) -> dict[str, Any]:
        return {COST_CURVE: self.cost_curve} if self.cost_curve is not None else {}

    # -- decoding ---------------------------------------------------------------------------------------------------
    def prefill(self) -> float:
        """The prompt into the cache, if it is not yet (ms; 0 when it was). ``step()`` does it when needed; call it
        first to time the cycles alone."""
        if self.engine.prefilled:
            return 0.0
        ms = self.engine.prefill()
        if self.writer is not None:
            self.writer.set_prefill_ms(ms)
        return ms

    def step(self) -> RecordedCycle:
        """Decode one cycle (and store it); the session is marked ``failed`` if it raises."""
        if self.done:
            raise SpecVizError(f"the session has ended ({self.stop_reason}): start another session")
        self.in_cycle = True
        try:
            record = self._decode()
            summary = summarize(record)
            if self.writer is not None:
                record = self.writer.append(record, summary)
                # the record's own timing (storing it) too
                summary = replace(summary, cycle_ms=float(sum(record.timings_ms.values())),
                                  timings_ms=dict(record.timings_ms))
            self._cycle_stored()
        except SpecVizError as e:
            self._fail(str(e))
            raise
        except Exception as e:
            self._fail(f"{type(e).__name__}: {e}")
            raise
        self.in_cycle = False
        if self.done:
            self.finish("complete", self.stop_reason)
        return RecordedCycle(record, summary)

    def _decode(self) -> CycleRecord:
        """The next cycle's record (the prefill first)."""
        self.prefill()
        return self.engine.step()

    def _cycle_stored(self) -> None:
        """A cycle was stored (a fork switches its settings here)."""

    def run(self) -> Iterator[RecordedCycle]:
        """Every cycle to the end, each stored before it is yielded; a loop left early marks the session
        ``interrupted``."""
        try:
            while not self.done:
                yield self.step()
        finally:
            if self.writer is not None and not self.writer.finished and not self.failed:
                try:
                    self.finish("interrupted", "stopped by the user")
                except SpecVizError:
                    pass  # the file cannot take it now; the next open marks the session interrupted

    def records(self) -> Iterator[CycleRecord]:
        """Every cycle's record to the end, with nothing computed beside them when nothing is recorded (the
        benchmarks time this loop)."""
        if self.writer is not None:
            yield from (c.record for c in self.run())
            return
        self.prefill()
        while not self.done:
            yield self.engine.step()

    # -- ending -----------------------------------------------------------------------------------------------------
    def _fail(self, reason: str) -> None:
        """Mark the session failed if the file lets us; the error that failed it is what the user sees."""
        self.failed = True
        try:
            self.finish("failed", reason)
        except SpecVizError:
            pass  # e.g. the database is locked: the session stays 'running' until a reader finds its writer gone

    def finish(self, status: str, reason: str = "") -> None:
        """Give the recorded row its final ``status`` (nothing without a recording)."""
        if self.writer is not None:
            self.writer.finish(status, reason, self.stats())

    def end(self) -> None:
        """End the session where it is: one stopped between cycles is recorded as complete, ended by its caller;
        one cut inside a cycle (an error, Ctrl-C) as interrupted. Nothing if it already ended."""
        if self.writer is None or self.writer.finished or self.failed:
            return
        try:
            if self.in_cycle:
                self.finish("interrupted", "closed inside a cycle")
            else:
                self.finish("complete", f"ended by the caller after {len(self.engine.output_ids)} tokens")
        except SpecVizError:
            pass  # the file cannot take it now: a reader marks the session interrupted


def curve_in_force(target: LoadedModel) -> dict[str, list] | None:
    """``target``'s verify-cost curve stored for its device and dtype (and a CPU's threads) now (its sizes and ms), or
    None."""
    from specviz_core.engine.cost_curve import load_device_curve

    stored = load_device_curve(target)
    if not stored:
        return None
    return {"n": [int(n) for n in stored["n"]], "ms": [float(m) for m in stored["ms"]]}


def prompt_words(target: LoadedModel, ids: Sequence[int]) -> str:
    """What a prompt given as token ids says (as the session records its text); "" without a tokenizer."""
    return str(target.tokenizer.decode(list(ids))) if target.tokenizer is not None else ""


def encode_spec(spec: SessionSpec, target: LoadedModel) -> tuple[list[int], bool]:
    """The spec's prompt as token ids on ``target`` (with the model's chat template unless the spec says not; True
    when it was used), or its ids as given, checked against the model's vocabulary; the CPU threads set for the
    session first."""
    if spec.threads is not None:
        cpu_threads.request(spec.threads)
    cpu_threads.apply(target.device)
    if spec.prompt_ids is not None:
        vocab = target.vocab_size
        bad = [i for i in spec.prompt_ids if not 0 <= i < vocab]
        if bad:
            raise SpecVizError(f"the prompt's token ids must be from 0 to {vocab - 1:,} (this model's vocabulary), "
                               f"got {bad[0]:,}" + (f" and {len(bad) - 1} more" if len(bad) > 1 else ""))
        return list(spec.prompt_ids), bool(spec.chat_template)  # as the caller says the ids were made
    return encode_prompt(target, spec.prompt, spec.chat_template)


def summary_line(info: SessionInfo) -> str:
    """A recorded session in one line: tokens, forwards, tokens per forward, speed, how it ended."""
    return (f"{info.n_tokens} tokens, {info.n_forward} target forwards, "
            f"{info.tokens_per_forward:.2f} tokens/forward, {info.tokens_per_s:.1f} tokens/s "
            f"({info.status}{', ' + info.stop_reason if info.stop_reason else ''}){budget_words(info.stats)}")


__all__ = ["Progress", "RecordedCycle", "Session", "encode_spec", "summary_line"]

"""The engine thread's measuring jobs: plain AR's speed on a live session's prompt (in the background), and for the
charts' actions an AR session of a session's prompt recorded (the speed-up baseline) and the device's verify-cost
curve."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specviz_app.session.jobs import reports as r
from specviz_app.session.jobs.base import Job, JobContext, with_target
from specviz_core.analysis.metrics import tokens_per_s
from specviz_core.analysis.timing import median_forward_ms
from specviz_core.crash import one_line
from specviz_core.recording.store import Recording
from specviz_core.records import SessionInfo

if TYPE_CHECKING:
    from specviz_core.runtime.models import LoadedModel

#: The most tokens an AR baseline decodes (on a CPU about 10 s for the default model).
BASELINE_MAX_TOKENS = 128
#: The fewest: a shorter baseline times mostly the first steps.
BASELINE_MIN_TOKENS = 16


def baseline_tokens(info: SessionInfo) -> int:
    """Tokens the AR baseline of ``info`` decodes: as many as the session asked for, within bounds."""
    return max(BASELINE_MIN_TOKENS, min(BASELINE_MAX_TOKENS, info.max_new_tokens or info.n_tokens))


def record_ar_session(target: LoadedModel, info: SessionInfo, recording: Recording,
                      progress: Callable[[str, float], None], stop: Callable[[], bool]) -> SessionInfo:
    """Decode ``info``'s prompt plainly (``ar``, greedy) on ``target`` and record it; returns the finished session."""
    from specviz_core.session.session import Session
    from specviz_core.session.spec import SessionRequest

    n = baseline_tokens(info)
    spec = SessionRequest(method="ar", prompt=list(info.prompt_ids), max_new_tokens=n,
                          chat_template=info.chat_template).check().with_prompt_ids(info.prompt_ids, info.prompt_text)
    run = Session(spec, target, recording=recording)
    done = 0
    while not run.done:
        done += len(run.step().record.committed_ids)
        progress(f"recording the AR baseline ({done}/{n} tokens)", min(1.0, done / n))
        if stop() and not run.done:
            run.finish("interrupted", "stopped by the user")
            break
    return recording.session(run.info.id)


def ar_speed(target: LoadedModel, prompt_ids: tuple[int, ...], tokens: int, progress: Callable[[float], None],
             gave_way: Callable[[], bool]) -> tuple[float, float | None] | None:
    """Plain AR's speed on ``prompt_ids`` over ``tokens`` tokens, not recorded: its tokens/s by the one definition
    (tokens over the cycles' own time) and its median forward (ms); None when ``gave_way()`` said to stop (background
    work gives way to the user's requests)."""
    from specviz_core.analysis.cycle_summary import summarize
    from specviz_core.session.session import Session
    from specviz_core.session.spec import SessionRequest

    session = Session(SessionRequest(method="ar", prompt=list(prompt_ids), max_new_tokens=tokens).check(), target)
    session.prefill()
    cycles = []
    for record in session.records():
        if gave_way():
            return None
        cycles.append(summarize(record))
        progress(min(1.0, sum(c.n_committed for c in cycles) / tokens))
    return tokens_per_s(cycles), median_forward_ms(cycles)


def record_ar_baseline(target: LoadedModel, info: SessionInfo, current: Recording | None, db_path: str,
                       progress: Callable[[str, float], None], stop: Callable[[], bool]) -> SessionInfo:
    """:func:`record_ar_session` into ``db_path`` (the worker's ``current`` recording when it is that file)."""
    rec, close = open_recording(current, db_path)
    try:
        return record_ar_session(target, info, rec, progress, stop)
    finally:
        if close:
            rec.close()


def open_recording(current: Recording | None, db_path: str) -> tuple[Recording, bool]:
    """The worker's recording if it is ``db_path``, else that file opened (and True: close it after)."""
    if current is not None and str(current.path) == str(Path(db_path)):
        return current, False
    return Recording(db_path, create=True), True


def measure_curve(target: LoadedModel, progress: Callable[[str, float], None]) -> dict[str, Any]:
    """Measure (again) and keep the verify-cost curve of ``target`` on its device."""
    from specviz_core.engine.cost_curve import ensure_cost_curve

    return ensure_cost_curve(target, quick=False, force=True,
                             progress=lambda done, total: progress("measuring the verify cost curve", done / total))


#: Tokens decoded by plain AR to measure the baseline speed on the session's prompt.
BASELINE_TOKENS = 16


@dataclass(frozen=True)
class BaselineJob(Job):
    """Plain AR on the live session's prompt, not recorded: the speed every speed-up is measured against. Background
    work: it gives way to any request of the user's (a preempt) and to a pause or reset."""

    key = "baseline"

    def run(self, ctx: JobContext) -> Iterator[r.Report]:
        if ctx.held.run is None or not ctx.held.models:
            return
        info = ctx.held.run.info
        key = (info.model, info.device, info.dtype, info.prompt_ids)
        measured = ctx.baselines.get(key)
        if measured is None:
            try:
                target, _ = next(iter(ctx.held.models.values()))
                measured = ar_speed(target, info.prompt_ids, BASELINE_TOKENS, lambda f: ctx.emit(r.BaselineProgress(f)),
                               lambda: ctx.preempted() or ctx.paused())  # since it was sent, queued time too
            except Exception as e:
                yield r.Error(f"could not measure the AR baseline: {one_line(e)}")
                return
            if measured is None:
                yield r.BaselineDeferred()
                return
            ctx.baselines[key] = measured
        tps, forward_ms = measured
        yield r.BaselineReady(tps, f"AR measured on this prompt ({BASELINE_TOKENS} tokens, {info.device})", forward_ms)


@dataclass(frozen=True)
class RecordBaselineJob(Job):
    what = "Recording an AR session of this prompt"
    """Record an AR session of ``info``'s prompt, model and device to ``db_path``: the charts' speed-up baseline."""

    info: SessionInfo
    db_path: str

    def run(self, ctx: JobContext) -> Iterator[r.Report]:
        def work(target: LoadedModel) -> Iterator[r.Report]:
            ar = record_ar_baseline(target, self.info, ctx.held.recording, self.db_path,
                                    lambda s, f: ctx.emit(r.Progress(s, f)), ctx.paused)
            yield r.BaselineRecorded(ar)
            if ar.n_tokens:
                rec, close = open_recording(ctx.held.recording, self.db_path)
                try:
                    forward_ms = median_forward_ms(rec.cycle_summaries(ar.id))
                finally:
                    if close:
                        rec.close()
                yield r.BaselineReady(ar.tokens_per_s, f"AR session {ar.id} on the same prompt ({ar.n_tokens} tokens)",
                                      forward_ms)

        yield from with_target(ctx, self.info, work)


@dataclass(frozen=True)
class CostCurveJob(Job):
    what = "Measuring the verify-cost curve"
    """Measure (again) and keep the verify-cost curve of ``info``'s model on its device."""

    key = "cost-curve"
    info: SessionInfo

    def run(self, ctx: JobContext) -> Iterator[r.Report]:
        def work(target: LoadedModel) -> Iterator[r.Report]:
            yield r.CostCurveReady(measure_curve(target, lambda s, f: ctx.emit(r.Progress(s, f))))

        yield from with_target(ctx, self.info, work)

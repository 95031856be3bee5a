"""The engine thread's race recording: plain decoding (AR) and a method on one prompt, one after the other, then
raced (:class:`RaceJob`).

The two sessions are decoded in turn on the one engine thread, never at the same time, so neither's timings
include the other's work. AR takes every setting from the method's request but the method (prompt, chat template,
model, device, dtype, temperature, seed, max new tokens), so both answer the same prompt under the same sampling.
A short unrecorded AR warm-up first keeps one-time costs (the allocator, the first kernels) out of the race.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from specviz_app.session.jobs import reports as r
from specviz_app.session.jobs.base import Job, JobContext
from specviz_core.crash import one_line
from specviz_core.errors import SpecVizError
from specviz_core.session.spec import SessionSpec, check_method

#: Tokens of the unrecorded warm-up before the race's first session.
WARMUP_TOKENS = 4


def ar_request(spec: SessionSpec) -> SessionSpec:
    """The plain-decoding twin of ``spec``: the same prompt, model and sampling, method ``ar``."""
    return replace(spec, choice=check_method("ar"), draft_model=None)


class RaceCancelled(Exception):
    """The user cancelled the race recording (or paused or reset the engine) while it loaded or decoded."""


@dataclass(frozen=True)
class RaceJob(Job):
    what = "Recording the race"
    """Record AR and ``checked``'s method on its prompt into ``db_path``, one after the other, until paused; reports
    :class:`~specviz_app.session.jobs.reports.RaceRecorded` or ``RaceFailed``."""

    checked: SessionSpec
    db_path: str

    def run(self, ctx: JobContext) -> Iterator[r.Report]:
        yield r.Busy(True)
        try:
            yield from self._record(ctx)
        finally:
            yield r.Busy(False)

    def _record(self, ctx: JobContext) -> Iterator[r.Report]:
        from specviz_app.session.jobs import measure as jobs
        from specviz_core.session.factory import load_models

        checked, state = self.checked, ctx.held
        rec = close = None
        try:
            def stop_check() -> None:
                if ctx.paused():
                    raise RaceCancelled

            def loading(stage: str, fraction: float | None) -> None:
                stop_check()
                ctx.emit(r.RaceProgress(stage, -1.0 if fraction is None else fraction))

            stop_check()
            ar = ar_request(checked)
            key = (checked.model, checked.draft_model, checked.device, checked.dtype)
            models = state.models.get(key)
            if models is None:
                yield r.RaceProgress("loading the model", -1.0)
                models = load_models(checked, loading)
                state.models = {key: models}  # keep one set, as a session does: models are large
            target, draft = models
            rec, close = jobs.open_recording(state.recording, self.db_path)
            yield r.RaceProgress("warming up", 0.0)
            _warm_up(ar, target)
            ids = []
            for k, (c, d) in enumerate(((ar, None), (checked, draft))):
                ids.append((yield from _record_one(c, d, target, rec, k, stop_check)))
            yield r.RaceRecorded(self.db_path, ids)
        except RaceCancelled:
            yield r.RaceFailed("")
        except SpecVizError as e:
            yield r.RaceFailed(str(e))
        except Exception as e:  # out of memory, a model folder gone...: a message, not a crash
            yield r.RaceFailed(f"could not record the race: {one_line(e)}")
        finally:
            if close and rec is not None:
                rec.close()


def _warm_up(ar: SessionSpec, target) -> None:
    """A short unrecorded AR session: one-time costs (the allocator, the first kernels) out of the race."""
    from specviz_core.session.session import Session

    warm = Session(replace(ar, max_new_tokens=WARMUP_TOKENS), target)
    for _ in warm.records():
        pass

def _record_one(checked: SessionSpec, draft, target, rec, k: int, stop_check) -> Iterator[r.Report]:
    """Decode and record one session to its end (k: 0 for AR, 1 for the method); returns its id."""
    from specviz_core.session.session import Session

    run = Session(checked, target, draft, recording=rec)
    n_max = checked.max_new_tokens
    name = "plain decoding (AR)" if k == 0 else checked.method
    done = 0
    yield r.RaceProgress(f"recording {name} (0/{n_max} tokens)", k / 2)
    while not run.done:
        try:
            stop_check()
        except RaceCancelled:
            run.finish("interrupted", "race recording cancelled")
            raise
        done += len(run.step().record.committed_ids)
        yield r.RaceProgress(f"recording {name} ({done}/{n_max} tokens)", (k + min(1.0, done / n_max)) / 2)
    return run.info.id

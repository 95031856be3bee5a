"""The engine thread's race recording: plain decoding (AR) and a method on one prompt, one after the other, then
raced. :class:`RaceRecorder` is owned by :class:`specviz_app.session.worker.EngineWorker` (whose ``record_race`` slot
runs it) and given its :class:`~specviz_app.session.jobs.state.EngineState` (the models and the recording).

The two sessions are decoded in turn on the one engine thread, never at the same time, so neither's timings
include the other's work. AR takes every setting from the method's request but the method (prompt, chat template,
model, device, dtype, temperature, seed, max new tokens), so both answer the same prompt under the same sampling.
A short unrecorded AR warm-up first keeps one-time costs (the allocator, the first kernels) out of the race.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, Signal

from specviz_app.session.jobs.state import EngineState
from specviz_core.crash import one_line
from specviz_core.errors import SpecVizError
from specviz_core.session.request import CheckedRequest

#: Tokens of the unrecorded warm-up before the race's first session.
WARMUP_TOKENS = 4


def ar_request(checked: CheckedRequest) -> CheckedRequest:
    """The plain-decoding twin of ``checked``: the same prompt, model and sampling, method ``ar``."""
    req = replace(checked.request, method="ar", params={}, budget=None, draft_model=None)
    return req.check()


class RaceCancelled(Exception):
    """The user cancelled the race recording (or paused or reset the engine) while it loaded or decoded."""


class RaceRecorder(QObject):
    """Records a race on the engine thread (a child of the worker, so it lives there) and reports how it goes."""

    progress = Signal(str, float)
    """(what is happening, overall fraction 0..1 or -1 while a model loads)."""
    recorded = Signal(str, object)
    """(recording path, [AR session id, method session id]): both decoded to the end."""
    failed = Signal(str)
    """A message for the user; '' when cancelled."""

    def __init__(self, state: EngineState, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.state = state

    def record(self, checked: CheckedRequest, db_path: str, stopped: Callable[[], bool]) -> None:
        """Record AR and ``checked``'s method on its prompt into ``db_path``, one after the other, until
        ``stopped()``; reports ``recorded`` or ``failed``."""
        from specviz_app.session.jobs import measure as jobs
        from specviz_core.session.factory import load_models

        rec = close = None
        try:
            def stop_check() -> None:
                if stopped():
                    raise RaceCancelled

            def loading(stage: str, fraction: float | None) -> None:
                stop_check()
                self.progress.emit(stage, -1.0 if fraction is None else fraction)

            stop_check()
            ar = ar_request(checked)
            req = checked.request
            key = (req.model, req.draft_model, req.device, req.dtype)
            models = self.state.models.get(key)
            if models is None:
                self.progress.emit("loading the model", -1.0)
                models = load_models(checked, loading)
                self.state.models = {key: models}  # keep one set, as a session does: models are large
            target, draft = models
            rec, close = jobs.open_recording(self.state.recording, db_path)
            self._warm_up(ar, target)
            ids = []
            for k, (c, d) in enumerate(((ar, None), (checked, draft))):
                ids.append(self._record_one(c, d, target, rec, k, stop_check))
            self.recorded.emit(db_path, ids)
        except RaceCancelled:
            self.failed.emit("")
        except SpecVizError as e:
            self.failed.emit(str(e))
        except Exception as e:  # out of memory, a model folder gone...: a message, not a crash
            self.failed.emit(f"could not record the race: {one_line(e)}")
        finally:
            if close and rec is not None:
                rec.close()

    def _warm_up(self, ar: CheckedRequest, target) -> None:
        from specviz_core.session.session import Session

        self.progress.emit("warming up", 0.0)
        warm = Session.start(CheckedRequest(replace(ar.request, max_new_tokens=WARMUP_TOKENS), ar.choice), target)
        for _ in warm.records():
            pass

    def _record_one(self, checked: CheckedRequest, draft, target, rec, k: int, stop_check) -> str:
        """Decode and record one session to its end (k: 0 for AR, 1 for the method); its id."""
        from specviz_core.session.session import Session

        run = Session.start(checked, target, draft, recording=rec)
        n_max = checked.request.max_new_tokens
        name = "plain decoding (AR)" if k == 0 else checked.request.method
        done = 0
        self.progress.emit(f"recording {name} (0/{n_max} tokens)", k / 2)
        while not run.done:
            try:
                stop_check()
            except RaceCancelled:
                run.finish("interrupted", "race recording cancelled")
                raise
            done += len(run.step().record.committed_ids)
            self.progress.emit(f"recording {name} ({done}/{n_max} tokens)", (k + min(1.0, done / n_max)) / 2)
        return run.info.id

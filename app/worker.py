"""The engine thread: every tensor lives here; the window only receives cycle records.

The window calls the worker's slots through queued signals (``begin``, ``step``, ``run``, ``reset``,
``shutdown``) and ``pause()`` directly (it only sets a flag, checked between cycles).
"""

from __future__ import annotations

import threading
import time
import traceback
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot

from specviz_core.errors import SpecVizError
from specviz_core.models import LoadedModel
from specviz_core.recording.store import Recording
from specviz_core.records import SessionInfo
from specviz_core.session.factory import build_engine, load_models, prepare
from specviz_core.session.request import CheckedRequest, check_method
from specviz_core.session.run import RecordedRun
from specviz_core.viewer.filters import CycleFilter

#: Tokens decoded by plain AR to measure the baseline speed on the session's prompt.
BASELINE_TOKENS = 16


class EngineWorker(QObject):
    """Owns the models, the engine and the recording connection; lives on its own QThread."""

    progress = Signal(str, float)
    """(stage, fraction in 0..1, or -1 when unknown): model loading and the like."""
    session_started = Signal(object, object)
    """(SessionInfo, tokenizer): a session was created and its row written."""
    cycle_ready = Signal(object)
    """A RecordedCycle (record and summary), already recorded."""
    session_finished = Signal(object)
    """The final SessionInfo (complete / interrupted / failed)."""
    baseline_ready = Signal(float, str)
    """(AR tokens/s on this prompt, how it was measured)."""
    busy_changed = Signal(bool)
    error = Signal(str)
    """A message for the user (never a traceback)."""
    request_done = Signal()
    """Every slot called through a queued signal emits this once when it returns."""

    def __init__(self) -> None:
        super().__init__()
        self._pause = threading.Event()
        self._models: dict[tuple, tuple[LoadedModel, LoadedModel | None]] = {}
        self.run_: RecordedRun | None = None
        self.recording: Recording | None = None
        self._baselines: dict[tuple, float] = {}
        self.cycles_done = 0
        """Cycles decoded by this worker so far (read from the UI thread; an int, so reads are atomic)."""

    # -- called from the UI thread ------------------------------------------------
    def pause(self) -> None:
        """Stop a Run at the next cycle boundary (thread-safe)."""
        self._pause.set()

    # -- slots (run on the worker thread) -------------------------------------------
    @Slot(object, str)
    def begin(self, req: CheckedRequest, db_path: str) -> None:
        """Load models if needed and create a recorded session; the first cycle waits for a step."""
        try:
            self._begin(req, db_path)
        finally:
            self.request_done.emit()

    def _begin(self, checked: CheckedRequest, db_path: str) -> None:
        self.busy_changed.emit(True)
        try:
            self._finish_current("interrupted", "reset by the user")
            req = checked.request
            key = (req.model, req.draft_model, req.device, req.dtype, req.method, tuple(sorted(req.params.items())))
            models = self._models.get(key[:4])
            if models is None:
                self.progress.emit("loading the model", -1.0)
                models = load_models(checked, lambda stage, f: self.progress.emit(stage, -1.0 if f is None else f))
                self._models = {key[:4]: models}  # keep one set: models are large
            target, draft = models
            if self.recording is None or str(self.recording.path) != str(Path(db_path)):
                if self.recording is not None:
                    self.recording.close()
                Path(db_path).parent.mkdir(parents=True, exist_ok=True)
                self.recording = Recording(db_path, create=True)
            self.run_ = RecordedRun(prepare(checked, target, draft), self.recording)
            self.progress.emit("ready", 1.0)
            self.session_started.emit(self.run_.info, target.tokenizer)
        except SpecVizError as e:
            self.run_ = None
            self.error.emit(str(e))
        except Exception as e:  # a broken model folder, out of memory...: a message, not a crash
            self.run_ = None
            self.error.emit(f"could not start the session: {type(e).__name__}: {e}")
            traceback.print_exc()
        finally:
            self.busy_changed.emit(False)

    @Slot(int)
    def step(self, n: int = 1) -> None:
        """Decode ``n`` cycles (or until the session ends)."""
        try:
            self._loop(max_cycles=n, breakpoint=None)
        finally:
            self.request_done.emit()

    @Slot(object)
    def run(self, breakpoint: CycleFilter | None = None) -> None:
        """Decode until the end, a pause, or a cycle matching ``breakpoint``."""
        try:
            self._loop(max_cycles=None, breakpoint=breakpoint)
        finally:
            self.request_done.emit()

    @Slot()
    def reset(self) -> None:
        try:
            self._finish_current("interrupted", "reset by the user")
            self.run_ = None
        finally:
            self.request_done.emit()

    @Slot()
    def shutdown(self) -> None:
        """Close cleanly: the session in flight is marked interrupted, the recording closed."""
        self._finish_current("interrupted", "window closed")
        self.run_ = None
        if self.recording is not None:
            self.recording.close()
            self.recording = None
        self._models.clear()

    @Slot()
    def measure_baseline(self) -> None:
        """Plain AR on the session's prompt, not recorded: the speed every speed-up is measured against."""
        try:
            self._measure_baseline()
        finally:
            self.request_done.emit()

    def _measure_baseline(self) -> None:
        if self.run_ is None:
            return
        info = self.run_.info
        key = (info.model, info.device, info.dtype, info.prompt_ids)
        tps = self._baselines.get(key)
        if tps is None:
            self.busy_changed.emit(True)
            try:
                target, _ = next(iter(self._models.values()))
                engine = build_engine(target, check_method("ar"), info.prompt_ids, max_new_tokens=BASELINE_TOKENS)
                engine.prefill()
                t0 = time.perf_counter()
                n = sum(len(r.committed_ids) for r in engine.cycles())
                tps = n / (time.perf_counter() - t0)
                self._baselines[key] = tps
            except Exception as e:
                self.error.emit(f"could not measure the AR baseline: {e}")
                return
            finally:
                self.busy_changed.emit(False)
        self.baseline_ready.emit(tps, f"AR measured on this prompt ({BASELINE_TOKENS} tokens, {info.device})")

    # -- internals ----------------------------------------------------------------
    def _loop(self, max_cycles: int | None, breakpoint: CycleFilter | None) -> None:
        run = self.run_
        if run is None:
            return
        self._pause.clear()
        self.busy_changed.emit(True)
        done = 0
        try:
            while not run.engine.done and not self._pause.is_set():
                cycle = run.step()
                self.cycles_done += 1
                self.cycle_ready.emit(cycle)
                done += 1
                if max_cycles is not None and done >= max_cycles:
                    break
                if breakpoint is not None and breakpoint(cycle.summary):
                    break
        except SpecVizError as e:
            self.error.emit(str(e))
        except Exception as e:
            self.error.emit(f"the decode failed: {type(e).__name__}: {e}")
            traceback.print_exc()
        finally:
            self.busy_changed.emit(False)
        if run.writer.finished:
            self.session_finished.emit(self._final_info(run))

    def _final_info(self, run: RecordedRun) -> SessionInfo:
        assert self.recording is not None
        return self.recording.session(run.info.id)

    def _finish_current(self, status: str, reason: str) -> None:
        run = self.run_
        if run is not None and not run.writer.finished:
            run.finish(status, reason)
            self.session_finished.emit(self._final_info(run))


class WorkerThread:
    """A worker and its thread, started once; ``stop()`` waits for the cycle in flight."""

    def __init__(self) -> None:
        self.thread = QThread()
        self.thread.setObjectName("specviz-engine")
        self.worker = EngineWorker()
        self.worker.moveToThread(self.thread)
        self.thread.start()

    def stop(self, timeout_ms: int = 60000) -> bool:
        self.worker.pause()
        from PySide6.QtCore import QMetaObject, Qt

        QMetaObject.invokeMethod(self.worker, "shutdown", Qt.ConnectionType.BlockingQueuedConnection)
        self.thread.quit()
        return self.thread.wait(timeout_ms)

"""The engine thread: every tensor lives here; the window only receives cycle records.

The window calls the worker's slots through queued signals (``begin``, ``step``, ``run``, ``reset``,
``shutdown``) and ``pause()`` / ``cancel()`` directly. Each request carries the :class:`Ticket` the worker gave when
it was sent (:mod:`specviz_app.session.tickets`). The worker owns what the thread holds (:class:`EngineState`) and
the jobs it runs over it: forks (:class:`ForkJob`), the race's recording (:class:`RaceRecorder`, with its own
signals) and the measurements (:mod:`specviz_app.session.jobs.measure`).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QThread, Signal, Slot

from specviz_app.session.jobs import measure as jobs
from specviz_app.session.jobs.fork import ForkJob, ForkStart
from specviz_app.session.jobs.race import RaceRecorder
from specviz_app.session.jobs.state import EngineState
from specviz_app.session.tickets import Ticket, Tickets
from specviz_core.crash import one_line
from specviz_core.errors import SpecVizError
from specviz_core.records import SessionInfo
from specviz_core.runtime.models import LoadedModel
from specviz_core.session.factory import load_models
from specviz_core.session.fork import Fork, ForkMismatch
from specviz_core.session.request import CheckedRequest
from specviz_core.session.session import RecordedCycle, Session
from specviz_core.viewer.filters import CycleFilter

#: Tokens decoded by plain AR to measure the baseline speed on the session's prompt.
BASELINE_TOKENS = 16
#: How long closing the window waits for the engine thread: the forward or load stage in flight, nothing more.
STOP_WAIT_MS = 10_000


class Cancelled(Exception):
    """A load stopped by Reset or close at a stage boundary."""


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
    baseline_progress = Signal(float)
    """The background AR baseline's fraction done."""
    baseline_deferred = Signal()
    """The background AR baseline gave way to a request of the user's (:meth:`preempt`); it can be asked again."""
    run_ended = Signal(str, int)
    """(how, the last cycle's index or -1): a Step or Run ended with ``steps``, ``breakpoint``, ``paused``,
    ``finished`` or ``failed``."""
    baseline_recorded = Signal(object)
    """The SessionInfo of an AR session recorded as the baseline (the recording gained a session)."""
    cost_curve_ready = Signal(object)
    """A verify-cost curve measured and kept (the dict of :mod:`specviz_core.engine.cost_curve`)."""
    audit_ready = Signal(object)
    """An :class:`~specviz_core.audit.AuditResult` of the session asked for."""
    busy_changed = Signal(bool)
    error = Signal(str)
    """A message for the user (never a traceback)."""
    request_done = Signal()
    """Every slot called through a queued signal emits this once when it returns."""
    fork_mismatch = Signal(str)
    """A fork's re-run cycle differs from its recording: the fork waits for ``fork_choice``."""

    def __init__(self) -> None:
        super().__init__()
        self._tickets = Tickets()
        self.state = EngineState()
        """The models, the recording and the live run (touched on the engine thread only)."""
        self.forks = ForkJob(self.state)
        self.race = RaceRecorder(self.state, self)
        """The race's recording (``record_race``) and its reports: ``progress``, ``recorded``, ``failed``."""
        self._baselines: dict[tuple, float] = {}
        self.cycles_done = 0
        """Cycles decoded by this worker so far (read from the UI thread; an int, so reads are atomic)."""

    # -- called from the UI thread ------------------------------------------------
    def ticket(self) -> Ticket:
        """Stamp a request with the current counts (thread-safe)."""
        return self._tickets.ticket()

    def pause(self) -> None:
        """Stop every Run or Step sent before now at its next cycle boundary, queued ones included (thread-safe)."""
        self._tickets.pause()

    def cancel(self) -> None:
        """Pause, and stop a load sent before now at its next stage (Reset, close; thread-safe)."""
        self._tickets.cancel()

    def preempt(self) -> None:
        """A request of the user's is on its way: background work gives way at its next step (thread-safe)."""
        self._tickets.preempt()

    @property
    def loaded(self) -> bool:
        """A model is loaded (read from the UI thread)."""
        return bool(self.state.models)

    # -- slots (run on the worker thread) -------------------------------------------
    @Slot(object, str, object)
    def begin(self, req: CheckedRequest, db_path: str, ticket: Ticket) -> None:
        """Load models if needed and create a recorded session; the first cycle waits for a step."""
        try:
            self._begin(req, db_path, ticket)
        finally:
            self.request_done.emit()

    def _begin(self, checked: CheckedRequest | ForkStart, db_path: str, ticket: Ticket) -> None:
        self.busy_changed.emit(True)
        fork = checked if isinstance(checked, ForkStart) else None
        try:
            self._finish_current("interrupted", "reset by the user")
            if self._tickets.cancelled(ticket):
                return
            if fork is not None:
                parent, checked = self.forks.request(fork, db_path)
            req = checked.request
            key = (req.model, req.draft_model, req.device, req.dtype, req.method, tuple(sorted(req.params.items())))
            models = self.state.models.get(key[:4])

            def progress(stage: str, fraction: float | None) -> None:
                if self._tickets.cancelled(ticket):
                    raise Cancelled
                self.progress.emit(stage, -1.0 if fraction is None else fraction)

            if models is None:
                self.progress.emit("loading the model", -1.0)
                try:
                    models = load_models(checked, progress)
                except Cancelled:
                    self.progress.emit("cancelled", 1.0)
                    return
                self.state.models = {key[:4]: models}  # keep one set: models are large
            if self._tickets.cancelled(ticket):  # reset or closed while the last stage loaded: no session to record
                self.progress.emit("cancelled", 1.0)
                return
            target, draft = models
            recording = self.state.record_to(db_path)
            if fork is not None:
                self.state.run = self.forks.run(fork, parent, checked, target, draft)
            else:
                try:  # a device's first budget=auto session measures its verify cost first (seconds, once)
                    self.state.run = Session.start(checked, target, draft, recording=recording, progress=progress)
                except Cancelled:
                    self.progress.emit("cancelled", 1.0)
                    return
            self.progress.emit("ready", 1.0)
            self.session_started.emit(self.state.run.info, target.tokenizer)
            if fork is not None:
                self._rerun(ticket)
        except SpecVizError as e:
            self.state.run = None
            self.error.emit(str(e))
        except Exception as e:  # a broken model folder, out of memory...: a message, not a crash
            self.state.run = None
            self.error.emit(f"could not start the session: {one_line(e)}")
        finally:
            self.busy_changed.emit(False)

    @Slot(int, object)
    def step(self, n: int, ticket: Ticket) -> None:
        """Decode ``n`` cycles (or until the session ends or a pause)."""
        try:
            self._loop(ticket, max_cycles=n, breakpoint=None)
        finally:
            self.request_done.emit()

    @Slot(object, object)
    def run(self, breakpoint: CycleFilter | None, ticket: Ticket) -> None:
        """Decode until the end, a pause, or a cycle matching ``breakpoint``."""
        try:
            self._loop(ticket, max_cycles=None, breakpoint=breakpoint)
        finally:
            self.request_done.emit()

    @Slot()
    def reset(self) -> None:
        try:
            self._finish_current("interrupted", "reset by the user")
            self.state.run = None
        finally:
            self.request_done.emit()

    @Slot()
    def shutdown(self) -> None:
        """Close cleanly: the session in flight is marked interrupted, the recording closed, the thread ended."""
        try:
            self._finish_current("interrupted", "window closed")
            self.state.close()
        finally:
            QThread.currentThread().quit()

    @Slot(object)
    def measure_baseline(self, ticket: Ticket) -> None:
        """Plain AR on the session's prompt, not recorded: the speed every speed-up is measured against. Background
        work: it gives way to any request of the user's (:meth:`preempt`) and to a pause or reset."""
        try:
            self._measure_baseline(ticket)
        finally:
            self.request_done.emit()

    def _measure_baseline(self, ticket: Ticket) -> None:
        if self.state.run is None or not self.state.models:
            return
        info = self.state.run.info
        key = (info.model, info.device, info.dtype, info.prompt_ids)
        tps = self._baselines.get(key)
        if tps is None:
            preempts = self._tickets.preempts
            try:
                target, _ = next(iter(self.state.models.values()))
                tps = jobs.ar_speed(target, info.prompt_ids, BASELINE_TOKENS, self.baseline_progress.emit,
                                    lambda: self._tickets.preempts != preempts or self._tickets.paused(ticket))
            except Exception as e:
                self.error.emit(f"could not measure the AR baseline: {one_line(e)}")
                return
            if tps is None:
                self.baseline_deferred.emit()
                return
            self._baselines[key] = tps
        self.baseline_ready.emit(tps, f"AR measured on this prompt ({BASELINE_TOKENS} tokens, {info.device})")

    @Slot(object, str, object)
    def record_baseline(self, info: SessionInfo, db_path: str, ticket: Ticket) -> None:
        """Record an AR session of ``info``'s prompt, model and device to ``db_path``: the charts' speed-up baseline."""
        try:
            self._job(ticket, lambda target: self._record_baseline(target, info, db_path, ticket), info)
        finally:
            self.request_done.emit()

    def _record_baseline(self, target: LoadedModel, info: SessionInfo, db_path: str, ticket: Ticket) -> None:
        ar = jobs.record_ar_baseline(target, info, self.state.recording, db_path, self.progress.emit,
                                     lambda: self._tickets.paused(ticket))
        self.baseline_recorded.emit(ar)
        if ar.n_tokens:
            self.baseline_ready.emit(ar.tokens_per_s, f"AR session {ar.id} on the same prompt ({ar.n_tokens} tokens)")

    @Slot(object, object)
    def measure_cost_curve(self, info: SessionInfo, ticket: Ticket) -> None:
        """Measure and keep the verify-cost curve of ``info``'s model on its device."""
        try:
            self._job(ticket, lambda target: self.cost_curve_ready.emit(jobs.measure_curve(target, self.progress.emit)),
                      info)
        finally:
            self.request_done.emit()

    @Slot(object, object, object)
    def audit_session(self, info: SessionInfo, cycle_lengths: list[int], ticket: Ticket) -> None:
        """Decode ``info``'s prompt plainly on its model and compare the outputs (:mod:`specviz_core.audit`)."""
        from specviz_core.audit import audit

        try:
            self._job(ticket, lambda target: self.audit_ready.emit(
                audit(info, cycle_lengths, target, progress=lambda s: self.progress.emit(s, -1.0))), info)
        finally:
            self.request_done.emit()

    def _job(self, ticket: Ticket, work, info: SessionInfo) -> None:
        """Load ``info``'s target (if needed), then ``work(target)``; errors become one-line messages."""
        if self._tickets.paused(ticket):
            return
        self.busy_changed.emit(True)
        try:
            target = jobs.target_for(self.state.models, info, lambda s, f: self.progress.emit(s, -1.0 if f is None else f))
            work(target)
        except SpecVizError as e:
            self.error.emit(str(e))
        except Exception as e:  # out of memory, a model folder gone since the recording...: a message, not a crash
            self.error.emit(f"could not measure: {one_line(e)}")
        finally:
            self.progress.emit("ready", 1.0)
            self.busy_changed.emit(False)

    @Slot(bool, object)
    def fork_choice(self, go_on: bool, ticket: Ticket) -> None:
        """After a failed check: go on from the re-run state, or end the fork as failed."""
        try:
            run = self.state.run
            if isinstance(run, Fork) and not run.finished:
                if go_on:
                    run.continue_anyway()
                    self._rerun(ticket)
                else:
                    run.stop()
                    self.session_finished.emit(self.state.final_info(run))
        finally:
            self.request_done.emit()

    @Slot(object, str, object)
    def record_race(self, checked: CheckedRequest, db_path: str, ticket: Ticket) -> None:
        """Record AR and ``checked``'s method on its prompt into ``db_path``, one after the other (:attr:`race`
        reports how it goes)."""
        self.busy_changed.emit(True)
        try:
            self.race.record(checked, db_path, lambda: self._tickets.paused(ticket))
        finally:
            self.busy_changed.emit(False)
            self.request_done.emit()

    # -- internals ----------------------------------------------------------------
    def _loop(self, ticket: Ticket, max_cycles: int | None, breakpoint: CycleFilter | None) -> None:
        run = self.state.run
        if run is None or self._tickets.paused(ticket):
            return
        self.busy_changed.emit(True)
        done, last, how = 0, -1, "paused"
        try:
            while not run.done and not self._tickets.paused(ticket):
                cycle = run.step()
                self._report(cycle)
                done, last = done + 1, cycle.record.index
                if breakpoint is not None and breakpoint(cycle.summary):
                    how = "breakpoint"
                    break
                if max_cycles is not None and done >= max_cycles:
                    how = "steps"
                    break
            else:
                how = "finished" if run.done else "paused"
        except ForkMismatch as e:  # a fork stepped through its re-run cycles: the user chooses
            how = "paused"
            self.fork_mismatch.emit(str(e))
        except SpecVizError as e:
            how = "failed"
            self.error.emit(str(e))
        except Exception as e:
            how = "failed"
            self.error.emit(f"the decode failed: {one_line(e)}")
        finally:
            self.busy_changed.emit(False)
        self.run_ended.emit(how, last)
        if run.finished:
            self.session_finished.emit(self.state.final_info(run))

    def _rerun(self, ticket: Ticket) -> None:
        """Re-run a fork's cycles before its fork cycle, with a progress bar; stops at the first difference."""
        run = self.state.run
        assert isinstance(run, Fork)
        self.busy_changed.emit(True)
        try:
            for cycle in self.forks.rerun(run, lambda: self._tickets.paused(ticket), self.progress.emit):
                self._report(cycle)
            self.progress.emit("ready", 1.0)
        except ForkMismatch as e:
            self.progress.emit("ready", 1.0)
            self.fork_mismatch.emit(str(e))
            return
        except SpecVizError as e:
            self.error.emit(str(e))
        except Exception as e:
            self.error.emit(f"the fork failed: {one_line(e)}")
        finally:
            self.busy_changed.emit(False)
        if run.finished:
            self.session_finished.emit(self.state.final_info(run))

    def _report(self, cycle: RecordedCycle) -> None:
        self.cycles_done += 1
        self.cycle_ready.emit(cycle)

    def _finish_current(self, status: str, reason: str) -> None:
        info = self.state.finish(status, reason)
        if info is not None:
            self.session_finished.emit(info)


class WorkerThread:
    """A worker and its thread, started once; ``stop()`` waits for the forward or load stage in flight only."""

    _unfinished: list[WorkerThread] = []
    """Threads that outlived ``stop()``'s wait (a model still loading): kept alive until :meth:`join_unfinished`."""

    def __init__(self) -> None:
        self.thread = QThread()
        self.thread.setObjectName("specviz-engine")
        self.worker = EngineWorker()
        self.worker.moveToThread(self.thread)
        self.thread.start()

    def stop(self, timeout_ms: int = STOP_WAIT_MS) -> bool:
        """Cancel what is queued, mark the session interrupted, end the thread; False if it is still busy."""
        from PySide6.QtCore import QMetaObject, Qt

        self.worker.cancel()  # queued Runs and Steps return at once, a load stops at its next stage
        QMetaObject.invokeMethod(self.worker, "shutdown", Qt.ConnectionType.QueuedConnection)
        if self.thread.wait(timeout_ms):
            return True
        WorkerThread._unfinished.append(self)  # never destroy a running QThread
        return False

    @classmethod
    def join_unfinished(cls) -> None:
        """At exit: let threads that outlived the window finish (a model load cannot be interrupted mid-file)."""
        while cls._unfinished:
            cls._unfinished.pop().thread.wait()

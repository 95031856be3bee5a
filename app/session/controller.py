"""The session behind the window: a live one decoded on the engine thread, or a recorded one replayed.

:class:`SessionController` owns the lifecycle (start, step, run, run to a breakpoint, pause, reset, open a
recording) and its parts: the engine thread (:class:`EngineLink`), the measurements (:class:`Measurements`: the AR
baseline, the cost curve), autoplay (:class:`Autoplay`) and the live cycles' way into the model (:class:`LiveFeed`).
The lifecycle is one value, :class:`~specviz_core.viewer.lifecycle.SessionState`, replaced whole on every change and
reported by ``state_changed``: the window's status bar and enabled actions are functions of it. It opens sessions in
the :class:`SessionModel` that every panel follows, reads what to decode from a :class:`RunSettings` (the Run panel),
and reports everything else through signals; it never touches a widget.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, Signal

from specviz_app.session.autoplay import AUTOPLAY_SPEEDS, DEFAULT_SPEED, Autoplay  # noqa: F401 - the window's
from specviz_app.session.engine_link import EngineLink
from specviz_app.session.jobs import reports as r
from specviz_app.session.jobs.base import Job
from specviz_app.session.jobs.session import DecodeJob, ForkChoiceJob, ResetJob, StartJob
from specviz_app.session.live_feed import LiveFeed
from specviz_app.session.measurements import Measurements
from specviz_core.analysis.metrics import budget_words
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.records import SessionInfo
from specviz_core.runtime.vocab import TokenText, load_token_text
from specviz_core.session.spec import SessionSpec
from specviz_core.viewer.filters import CycleFilter
from specviz_core.viewer.lifecycle import Activity, Open, SessionState
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import LiveSource, RecordingSource

if TYPE_CHECKING:  # the engine loads with its thread, on the first live session
    from specviz_app.session.jobs.fork import ForkStart
    from specviz_app.session.worker import EngineWorker

NO_SESSION = "No session: press Step (F10) to start one."


class RunSettings(Protocol):
    """What to decode next (the Run panel)."""

    def request(self) -> SessionSpec:
        """The session the settings describe; raises SpecVizError with a message for the user."""

    def breakpoint(self) -> CycleFilter: ...


class SessionController(QObject):
    """Live and replayed sessions, one at a time, shown through one :class:`SessionModel`."""

    state_changed = Signal(object)
    """The lifecycle's new :class:`SessionState`: what the status bar says and which actions are enabled."""
    progress = Signal(str, float)
    """(stage, fraction in 0..1 or -1 when unknown) while the engine loads; stage ``ready`` when done."""
    busy_changed = Signal(bool, bool)
    """(the engine is doing what the user waits for, a live session is open)."""
    settings_locked = Signal(bool)
    """A live session fixes its settings until Reset."""
    session_status = Signal(str)
    """One line about the current session (live, finished or replayed)."""
    notice = Signal(str, int)
    """A passing message (text, ms to show it; 0 until the next one)."""
    error = Signal(str)
    """Bad input or a failed run, for the user (never a traceback); '' when a new start clears it."""
    autoplay_changed = Signal(bool)
    sessions_changed = Signal()
    """A session was recorded or finished: the recording file changed."""
    fork_mismatch = Signal(str)
    """A fork's re-run cycle differs from its recording: answer with :meth:`fork_choice`."""

    def __init__(self, model: SessionModel, settings: RunSettings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.settings = settings
        self.engine = EngineLink(self)
        """The engine thread's job queue, started on the first job; its ``idle`` says when nothing is in flight."""
        self.engine.idle.connect(self._on_engine_idle)
        self.state = SessionState()
        """The lifecycle now; replaced whole by :meth:`_set`."""
        self.measurements = Measurements(model, self.engine, lambda: self.state, self._set, self.notice.emit,
                                         self._recording, self)
        """The live session's AR baseline (in the background), and the charts' measurements."""
        self.feed = LiveFeed(model, self)
        """The live session's cycles into the model, throttled while a Run decodes."""
        self.autoplay = Autoplay(model, self, self)
        self.autoplay.changed.connect(self.autoplay_changed)
        self._listen()

    # -- state ----------------------------------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        """No request is waiting for or running on the engine thread."""
        return self.engine.inflight == 0

    @property
    def busy(self) -> bool:
        """The engine does what the user waits for (a background measurement does not count)."""
        return self.state.busy

    @property
    def live_done(self) -> bool:
        """No live session is decoding (none was started, or it ended)."""
        return not self.state.live and not self.state.starting

    def _set(self, **changes) -> None:
        new = self.state.with_(**changes)
        if new != self.state:
            old, self.state = self.state, new
            self.state_changed.emit(new)
            if old.busy != new.busy:
                self.busy_changed.emit(new.busy, new.live)

    @property
    def worker(self) -> EngineWorker | None:
        """The engine worker, once the first request started it."""
        return self.engine.worker

    # -- the engine thread ----------------------------------------------------------------------------------------
    def _listen(self) -> None:
        """The engine's reports the session lifecycle follows (on the UI thread)."""
        on = self.engine.on
        on(r.BaselineRecorded, lambda _: self.sessions_changed.emit())
        on(r.ForkMismatch, lambda rep: self.fork_mismatch.emit(rep.text))
        on(r.Progress, lambda rep: self._on_progress(rep.stage, rep.fraction))
        on(r.SessionStarted, lambda rep: self._on_session_started(rep.info, rep.tokenizer))
        on(r.CycleReady, lambda rep: self._on_cycle_ready(rep.cycle))
        on(r.SessionFinished, lambda rep: self._on_session_finished(rep.info))
        on(r.RunEnded, lambda rep: self._on_run_ended(rep.how, rep.last))
        on(r.Busy, lambda rep: self._on_busy(rep.on))
        on(r.Error, lambda rep: self._fail(rep.text))
        self.measurements.listen(on)

    def _on_engine_idle(self) -> None:
        """Nothing is queued on the engine thread: the activity ends, and a background measurement may begin."""
        self._set(activity=Activity.IDLE, detail="", progress=None)
        self.measurements.on_idle(bool(self.state.live_id) and self.state.open in (Open.LIVE, Open.FINISHED))

    def shutdown(self) -> None:
        """Stop autoplay and the engine thread: queued work is dropped, the forward in flight (or the load stage)
        finishes, the session is marked interrupted. Waits a few seconds at most."""
        self.autoplay.set(False)
        self.measurements.forget_baseline()
        self.engine.stop()

    # -- live sessions ----------------------------------------------------------------------------------------------
    def _ensure_session(self, then: Activity) -> bool:
        """Start a live session from the settings if none is open; False (with a message) on bad input. ``then``:
        what the request sent after the start will do, shown once the session is there."""
        if self.state.live_id and self.state.live:
            return True
        if self.busy:
            return False
        try:
            req = self.settings.request()
            db = self._recording()
        except SpecVizError as e:  # refused in one line; nothing started, the settings stay editable
            self.error.emit(str(e))
            self.settings_locked.emit(False)
            return False
        self.error.emit("")
        self.autoplay.stop_if_replay()
        self.engine.start()
        self.measurements.forget_baseline()
        self.settings_locked.emit(True)
        self._set(activity=Activity.LOADING, detail="starting the session", progress=None, note="", paused=False,
                  live_id="", starting=True, then=then)
        self.session_status.emit("Starting a session: loading the model…")  # not "No session" while it loads
        self.engine.submit(StartJob(req, str(db)))
        return True

    def _recording(self) -> Path:
        """The open recording, where a live session is recorded."""
        if self.model.recording_path is None:
            raise SpecVizError("choose a file to record the session to")
        return self.model.recording_path

    def _curve_for(self, info: SessionInfo) -> dict | None:
        """The verify-cost curve ``info`` is estimated with: the one recorded with it (else this machine's), or None."""
        from specviz_core.viewer.sources import session_curve

        return session_curve(info)[0]

    def fork(self, start: ForkStart, db_path: str | Path) -> bool:
        """Start a fork (a live session that re-runs and checks its parent's first cycles, then goes on with other
        settings); the session open now, live or replayed, is closed. False (with a message) while busy."""
        if self.busy:
            self.error.emit("Pause the running session before forking.")
            return False
        self.error.emit("")
        self.autoplay.set(False)
        self.measurements.preempt()
        self.engine.start()
        self.measurements.forget_baseline()
        self.settings_locked.emit(True)
        self.model.follow_live = True
        self.model.set_recording(db_path)  # the fork is written beside its parent: that file stays the open one
        self._set(activity=Activity.LOADING, detail=f"forking session {start.parent_id} at cycle {start.cycle}",
                  progress=None, note="", paused=False, live_id="", starting=True, then=Activity.IDLE)
        self.engine.submit(StartJob(start, str(db_path)))
        return True

    def fork_choice(self, go_on: bool) -> None:
        """After a failed reproducibility check: go on from the re-run state, or stop (the fork is saved failed)."""
        if self.engine.worker is not None:
            self.engine.submit(ForkChoiceJob(go_on))

    def step(self) -> None:
        """Decode one cycle (starting a live session first if none is open)."""
        self._decode(follow=True, job=DecodeJob(1))

    def run(self) -> None:
        """Decode until the session ends or Pause."""
        self._decode(follow=False, job=DecodeJob(None))

    def run_to_breakpoint(self) -> None:
        """Decode until a cycle matches the breakpoint in the settings."""
        bp = self.settings.breakpoint()
        self._decode(follow=False, job=DecodeJob(None, bp), breakpoint=bp.label())

    def _decode(self, follow: bool, job: DecodeJob, breakpoint: str = "") -> None:
        """The user's Step, Run or Run to breakpoint: it goes before background work, starts a session if none can
        go on, and shows as running (to the breakpoint) from now, or once the session it started is there."""
        if self.busy:
            return
        self.measurements.preempt()
        activity = Activity.RUNNING_TO_BREAKPOINT if breakpoint else Activity.RUNNING
        if not self._ensure_session(activity):
            return
        self.model.follow_live = follow
        self._set(breakpoint=breakpoint)
        if self.state.starting:
            if breakpoint:
                self._set(detail=f"starting the session, then running to the first cycle where: {breakpoint}")
        else:
            self._set(activity=activity, detail=breakpoint, progress=None, note="", paused=False)
        self.engine.submit(job)

    def pause(self) -> None:
        """Stop after the cycle in flight; stops autoplay too."""
        if self.engine.worker is not None:
            self.engine.pause()
            if self.state.activity in (Activity.RUNNING, Activity.RUNNING_TO_BREAKPOINT):
                self._set(activity=Activity.PAUSING)
        self.autoplay.set(False)

    def reset(self) -> None:
        """End the session (it stays recorded) and unlock the settings; a model still loading stops loading."""
        self.engine.cancel()
        self.autoplay.set(False)
        if self.engine.worker is not None and self.state.live_id and self.state.open is Open.LIVE:
            self.engine.submit(ResetJob())
        self.measurements.forget_baseline()
        self.model.close()
        self.settings_locked.emit(False)
        self._set(open=Open.NONE, session_id="", method="", note="", paused=False, live_id="", starting=False,
                  then=Activity.IDLE, has_model=self.engine.worker is not None and self.engine.worker.loaded)
        if self.engine.inflight == 0:
            self._set(activity=Activity.IDLE, detail="", progress=None)
        self.busy_changed.emit(self.busy, False)
        self.session_status.emit(NO_SESSION)

    # -- worker callbacks (UI thread) ---------------------------------------------------------------------------------
    def _on_progress(self, stage: str, fraction: float) -> None:
        self.progress.emit(stage, fraction)
        if stage in ("ready", "cancelled"):
            return
        if self.state.starting:  # the Run panel says what the session waits for (the model, the cost curve)
            pct = f" ({fraction:.0%})" if fraction >= 0 else ""
            self.session_status.emit(f"Starting a session: {stage}{pct}…")
        if self.state.activity in (Activity.LOADING, Activity.MEASURING):
            self._set(detail=stage, progress=None if fraction < 0 else fraction)

    def _on_session_started(self, info: SessionInfo, tokenizer: object) -> None:
        if not self.state.starting:  # Reset while its model loaded: end it, recorded but not shown
            self.engine.submit(ResetJob())
            self.sessions_changed.emit()
            return
        then = self.state.then
        # the session is there before the model shows it (reported with the rest of the change below)
        self.state = self.state.with_(starting=False, live_id=info.id, then=Activity.IDLE)
        self.model.open(LiveSource(info), TokenText(tokenizer), cost_curve=self._curve_for(info))
        self._set(open=Open.LIVE, session_id=info.id, method=info.method, has_model=True, note="", paused=False,
                  **({"activity": then, "detail": self.state.breakpoint, "progress": None}
                     if then is not Activity.IDLE else {}))
        self.session_status.emit(f"Live session {info.id}: {info.method} on {info.device} ({info.dtype}; attention "
                                 f"{info.attention or 'not recorded'}), recorded to "
                                 f"{self.model.recording_path.name if self.model.recording_path else '?'}")
        self.sessions_changed.emit()

    def _on_cycle_ready(self, cycle) -> None:
        if self.feed.append(cycle) and cycle.record.index == 0:
            self.measurements.want_baseline()  # measured in the background once the engine is idle

    def _on_run_ended(self, how: str, cycle: int) -> None:
        """How the Step or Run in flight ended: ``steps`` (the cycles asked for), ``breakpoint`` (a cycle matched),
        ``paused``, ``finished`` (the session ended) or ``failed``."""
        bp = self.state.breakpoint
        if how == "breakpoint":
            self._set(paused=True, note=f"Stopped at cycle {cycle}: {bp}")
        elif how == "paused":
            self._set(paused=True, note=f"Paused after cycle {cycle}" if cycle >= 0 else "Paused")
        elif how == "finished" and bp:
            self._set(note=f"No cycle matched the breakpoint ({bp})")
        elif how == "steps":
            self._set(paused=False, note="")
        self._set(breakpoint="")

    def _on_session_finished(self, info: SessionInfo) -> None:
        if self.state.live_id and info.id == self.state.live_id:
            self.feed.show_latest()
            self._set(open=Open.FINISHED if info.status != "failed" else Open.FAILED, paused=False)
            self.session_status.emit(f"Session {info.id} {info.status}"
                                     f"{' (' + info.stop_reason + ')' if info.stop_reason else ''}: "
                                     f"{info.n_tokens} tokens in {info.n_forward} forwards, "
                                     f"{info.tokens_per_forward:.2f} tokens/forward{budget_words(info.stats)}. Step or "
                                     "Run starts a new session with these settings; Reset edits them first.")
            self.autoplay.set(False)
        self.sessions_changed.emit()

    def submit(self, job: Job) -> None:
        """Send the engine thread a job that is not a step of the session (an audit, a race's recording): the one way
        the window's parts reach it. A background measurement gives way first; while the job runs the status bar
        says what it is (its ``what``)."""
        self.measurements.preempt()
        self.engine.submit(job)

    def _on_busy(self, busy: bool) -> None:
        """The worker started or ended some work. Work that is not a step of the session (an audit, a race's
        recording, a measurement) shows as measuring, named by the job whose report this is."""
        if busy and self.state.activity in (Activity.IDLE, Activity.MEASURING_BASELINE) and not self.state.starting:
            job = self.engine.reporting
            self._set(activity=Activity.MEASURING, detail=job.what if job is not None else "Working", progress=None)
        if not busy:
            self.feed.flush()

    def _fail(self, text: str) -> None:
        """A refused start or a failed run: the message, and a start that never happened is undone."""
        self.error.emit(text)
        if self.state.activity is Activity.MEASURING_BASELINE:
            self.measurements.forget_baseline()  # a background measurement failed: not tried again for this session
            return
        if not self.state.live_id and self.state.starting:
            self.settings_locked.emit(False)
            self._set(open=Open.FAILED, note=text.rstrip("."), session_id="", method="", paused=False, starting=False,
                      then=Activity.IDLE)
        elif self.state.activity in (Activity.RUNNING, Activity.RUNNING_TO_BREAKPOINT, Activity.PAUSING):
            self._set(open=Open.FAILED, note=text.rstrip("."), paused=False)

    # -- replay -------------------------------------------------------------------------------------------------------
    def open_session(self, db: str, session_id: str | None = None) -> bool:
        """Replay a recorded session (the latest in ``db`` if no id); a live one still decoding is reset."""
        if self.busy:
            self.error.emit("Pause the running session before opening another one.")
            return False
        try:
            source = RecordingSource(Recording(db), session_id)
        except SpecVizError as e:
            self.error.emit(str(e))
            return False
        if self.state.live_id and self.state.live:
            self.reset()
        self.measurements.preempt()
        self.measurements.forget_baseline()
        self.error.emit("")
        self.model.set_recording(db)
        self.model.open(source, load_token_text(source.info.tokenizer), ar_baseline=source.ar_baseline(),
                        cost_curve=self._curve_for(source.info))
        self._set(open=Open.REPLAY, session_id=source.info.id, method=source.info.method, note="", paused=False)
        info = source.info
        self.session_status.emit(f"Replaying session {info.id}: {info.method} on {info.device}, "
                                 f"{self.model.n_cycles} cycles, from {Path(db).name}. Step (F10) starts a new "
                                 "live session with the settings below.")
        self.notice.emit(f"Replaying session {info.id} from {Path(db).name}", 5000)  # the name: a path cut mid-way says less
        return True

    # -- autoplay -----------------------------------------------------------------------------------------------------
    def set_autoplay_speed(self, speed: str) -> None:
        """One of :data:`AUTOPLAY_SPEEDS`."""
        self.autoplay.set_speed(speed)

    def toggle_autoplay(self) -> None:
        """Step through cycles at the chosen speed: a replay's recorded ones, or decode the live session's next."""
        self.autoplay.set(not self.autoplay.on)

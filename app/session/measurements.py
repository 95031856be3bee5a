"""The session's measurements on the engine thread, a part of the session controller.

The live session's AR baseline is measured in the background after its first cycle, when the engine is idle: the
user's Step or Run goes first (the measurement gives way at its next token and starts again when the engine is idle
once more). For the charts, an AR session of the shown session's prompt can be recorded (every speed-up is then
measured against it) and the device's verify-cost curve measured. Each shows in the lifecycle (measuring, measuring
the baseline); what they find goes to the session model.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject

from specviz_app.session.jobs import reports as r
from specviz_app.session.jobs.measure import BaselineJob, CostCurveJob, RecordBaselineJob
from specviz_core.viewer.lifecycle import Activity, SessionState
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import LiveSource, RecordingSource

if TYPE_CHECKING:
    from specviz_app.session.engine_link import EngineLink


class Measurements(QObject):
    """Given the ``model`` shown, the ``engine`` to send requests to, the lifecycle (``state()`` to read it,
    ``set_state(**changes)`` to change it), ``notice(text, ms)`` for a passing message and ``recording()``, the file
    a live session is recorded to. It hears the engine's reports through ``listen``, on the UI thread."""

    def __init__(self, model: SessionModel, engine: EngineLink, state: Callable[[], SessionState],
                 set_state: Callable[..., None], notice: Callable[[str, int], None],
                 recording: Callable[[], Path], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.model, self.engine = model, engine
        self._state, self._set, self._notice, self._recording = state, set_state, notice, recording
        self._wanted = False
        """The live session's AR baseline is still to be measured (in the background, when the engine is idle)."""

    def listen(self, on: Callable[[type, Callable[[Any], None]], None]) -> None:
        """The engine's measurement reports (``on(kind, handler)``), to the model and the lifecycle."""
        on(r.CostCurveReady, lambda rep: self._on_cost_curve(rep.curve))
        on(r.BaselineReady, lambda rep: self._on_baseline(rep.tokens_per_s, rep.note, rep.forward_ms))
        on(r.BaselineProgress, lambda rep: self._on_baseline_progress(rep.fraction))
        on(r.BaselineDeferred, lambda rep: self._on_baseline_deferred())

    # -- the live session's baseline, in the background -------------------------------------------------------------
    def want_baseline(self) -> None:
        """The live session decoded its first cycle: measure its baseline once the engine is idle."""
        self._wanted = True

    def forget_baseline(self) -> None:
        """A new session, a replay, a reset, a failed measurement: no background measurement is due."""
        self._wanted = False

    def on_idle(self, live: bool) -> None:
        """Nothing is queued on the engine thread: the ``live`` session's baseline is measured now, if it is due."""
        if self._wanted and live:
            self._set(activity=Activity.MEASURING_BASELINE, detail="the AR baseline", progress=0.0)
            self.engine.submit(BaselineJob())

    def preempt(self) -> None:
        """The user's request goes first: a background measurement in flight gives way at its next token."""
        if self._state().activity is Activity.MEASURING_BASELINE:
            self.engine.preempt()

    # -- for the charts -----------------------------------------------------------------------------------------------
    def _measuring_ok(self) -> bool:
        if self.model.source is None:
            self._notice("Open a recording or step a session first.", 5000)
            return False
        if self._state().busy:
            self._notice("The engine is busy: pause first, then measure.", 5000)
            return False
        return True

    def record_ar_baseline(self) -> None:
        """Record a plain (AR) session of the current session's prompt, model and device into its recording; every
        speed-up is then measured against it."""
        if self._measuring_ok():
            source = self.model.source
            db = str(source.recording.path) if isinstance(source, RecordingSource) else str(self._recording())
            self.preempt()
            self._set(activity=Activity.MEASURING, detail="Recording an AR session of this prompt", progress=None)
            self.engine.submit(RecordBaselineJob(source.info, db))

    def measure_cost_curve(self) -> None:
        """Measure the verify-cost curve of the current session's model on its device (kept for next time)."""
        if self._measuring_ok():
            self.preempt()
            self._set(activity=Activity.MEASURING, detail="Measuring the verify-cost curve", progress=None)
            self.engine.submit(CostCurveJob(self.model.source.info))

    # -- reports (UI thread) ------------------------------------------------------------------------------------------
    def _on_baseline(self, tokens_per_s: float, note: str, forward_ms: float | None = None) -> None:
        self._wanted = False
        background = self._state().activity is Activity.MEASURING_BASELINE
        if not background or isinstance(self.model.source, LiveSource):
            # an AR session recorded for the session shown, or the live session's background baseline (one that
            # arrives after a replay was opened is not the replay's)
            self.model.set_ar_baseline(tokens_per_s, note, forward_ms)

    def _on_baseline_progress(self, fraction: float) -> None:
        if self._state().activity is Activity.MEASURING_BASELINE:
            self._set(progress=fraction)

    def _on_cost_curve(self, curve: dict) -> None:
        self.model.set_cost_curve(curve)

    def _on_baseline_deferred(self) -> None:
        """The background measurement gave way to the user's request: it starts again when the engine is idle."""
        if self._state().activity is Activity.MEASURING_BASELINE:
            self._set(progress=0.0)

"""The session controller's line to the engine thread: the thread started on first use, every request sent as a
queued signal and counted until the worker says it is done, so that the controller knows when the engine is idle.

The engine (torch, transformers, the drafters) is imported when the thread first starts: a window that only
replays recordings never loads it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, SignalInstance

if TYPE_CHECKING:
    from specviz_app.session.worker import EngineWorker, Ticket, WorkerThread


class EngineLink(QObject):
    """Requests to the engine thread (queued: the worker lives there), and whether any is still in flight."""

    begin = Signal(object, str, object)
    """(CheckedRequest or ForkStart, recording path, ticket): load if needed and start a session."""
    step = Signal(int, object)
    run = Signal(object, object)
    """(breakpoint or None, ticket)."""
    reset = Signal()
    baseline = Signal(object)
    """(ticket): measure the live session's AR baseline, in the background."""
    record_baseline = Signal(object, str, object)
    measure_curve = Signal(object, object)
    fork_choice = Signal(bool, object)
    idle = Signal()
    """The last request in flight is done: nothing is queued on the engine thread."""

    def __init__(self, connect_reports: Callable[[EngineWorker], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._connect_reports = connect_reports
        self._thread: WorkerThread | None = None
        self.inflight = 0
        """Requests sent to the engine thread and not yet done."""

    @property
    def worker(self) -> EngineWorker | None:
        """The engine worker, once started."""
        return self._thread.worker if self._thread is not None else None

    def start(self) -> EngineWorker:
        """The engine worker, its thread started (and its reports connected) on first use."""
        if self._thread is None:
            from specviz_app.session.worker import WorkerThread  # the engine: torch and transformers load here

            self._thread = WorkerThread()
            w = self._thread.worker
            for request, slot in ((self.begin, w.begin), (self.step, w.step), (self.run, w.run),
                                  (self.reset, w.reset), (self.baseline, w.measure_baseline),
                                  (self.record_baseline, w.record_baseline), (self.measure_curve, w.measure_cost_curve),
                                  (self.fork_choice, w.fork_choice)):
                request.connect(slot)
                request.connect(self._sent)
            w.request_done.connect(self._done)
            self._connect_reports(w)
        return self._thread.worker

    def count(self, request: SignalInstance) -> EngineWorker:
        """The worker (started if needed) for another part's queued ``request`` signal, counted like ours."""
        request.connect(self._sent)
        return self.start()

    def ticket(self) -> Ticket:
        """A stamp for a request sent now (a pause or cancel after it cancels it)."""
        return self.start().ticket()

    def stop(self) -> None:
        """End the thread: queued work is dropped, the forward or load stage in flight finishes."""
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def _sent(self, *args: object) -> None:
        self.inflight += 1

    def _done(self) -> None:
        self.inflight -= 1
        if self.inflight == 0:
            self.idle.emit()

"""The window's line to the engine thread: one job queue. ``submit(job)`` sends a job (the thread started on first
use), ``on(ReportType, handler)`` hears what jobs report, and ``idle`` says when nothing is queued or running.

The engine (torch, transformers, the drafters) is imported when the thread first starts: a window that only
replays recordings never loads it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from specviz_app.session.jobs.reports import Done, Report

if TYPE_CHECKING:
    from specviz_app.session.jobs.base import Job
    from specviz_app.session.tickets import Ticket
    from specviz_app.session.worker import EngineWorker, WorkerThread


class EngineLink(QObject):
    """Jobs to the engine thread, its reports to whoever listens (on the UI thread), and whether any job is in
    flight."""

    idle = Signal()
    """The last job in flight is done: nothing is queued on the engine thread."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread: WorkerThread | None = None
        self._handlers: dict[type[Report], list[Callable[[Any], None]]] = {}
        self.inflight = 0
        """Jobs submitted and not yet done."""
        self.reporting: Job | None = None
        """The job whose report the handlers are hearing now (None between reports, or for the thread's own)."""

    @property
    def worker(self) -> EngineWorker | None:
        """The engine worker, once started."""
        return self._thread.worker if self._thread is not None else None

    def start(self) -> EngineWorker:
        """The engine worker, its thread started on first use."""
        if self._thread is None:
            from specviz_app.session.worker import WorkerThread  # the engine: torch and transformers load here

            self._thread = WorkerThread()
            self._thread.worker.report.connect(self._on_report)  # a slot of this UI-thread object: queued here
        return self._thread.worker

    def submit(self, job: Job) -> Ticket:
        """Queue ``job`` on the engine thread; the ticket it carries (a pause or cancel after now stops it)."""
        ticket, replaced = self.start().submit(job)
        if not replaced:
            self.inflight += 1
        return ticket

    def on(self, kind: type[Report], handler: Callable[[Any], None]) -> None:
        """Call ``handler(report)`` for every report of ``kind`` (on the UI thread, in the order they were sent)."""
        self._handlers.setdefault(kind, []).append(handler)

    def pause(self) -> None:
        if self.worker is not None:
            self.worker.pause()

    def cancel(self) -> None:
        if self.worker is not None:
            self.worker.cancel()

    def preempt(self) -> None:
        if self.worker is not None:
            self.worker.preempt()

    def stop(self) -> None:
        """End the thread: queued work is dropped, the forward or load stage in flight finishes."""
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def _on_report(self, job: Job | None, report: Report) -> None:
        self.reporting = job
        try:
            for handler in self._handlers.get(type(report), ()):
                handler(report)
        finally:
            self.reporting = None
        if isinstance(report, Done):
            self.inflight -= 1
            if self.inflight == 0:
                self.idle.emit()

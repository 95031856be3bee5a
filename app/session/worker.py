"""The engine thread: every tensor lives here; the window only receives reports.

The window submits jobs (:mod:`specviz_app.session.jobs`: start a session, decode, reset, measure, audit, record a
race) through :class:`~specviz_app.session.engine_link.EngineLink`; the worker runs them one at a time, in the order
they came, each a generator of reports sent through the one ``report`` signal. A job sent with a key replaces a queued
one of the same key that has not started. ``pause()``, ``cancel()`` and ``preempt()`` are called directly (thread-safe);
each job carries the :class:`Ticket` it was given when it was sent (:mod:`specviz_app.session.tickets`), so a pause
stops every job sent before it, even one still queued behind a model that is loading.
"""

from __future__ import annotations

import threading
from collections import deque

from PySide6.QtCore import QObject, QThread, Signal, Slot

from specviz_app.session.jobs.base import Counts, Job, JobContext
from specviz_app.session.jobs.holdings import Holdings
from specviz_app.session.jobs.reports import Busy, Done, Error, Progress, SessionFinished
from specviz_app.session.tickets import Ticket, Tickets
from specviz_core.crash import one_line

#: How long closing the window waits for the engine thread: the forward or load stage in flight, nothing more.
STOP_WAIT_MS = 10_000


class EngineWorker(QObject):
    """Runs the submitted jobs over what the engine thread holds (models, recording, session); lives on its QThread."""

    report = Signal(object, object)
    """(the job, one of its :class:`~specviz_app.session.jobs.reports.Report`): every report says whose it is;
    :class:`Done` after each job. The job is None for what the thread says of itself as it closes."""
    _wake = Signal()
    """A job was queued (queued to the worker's thread, which takes the next job)."""

    def __init__(self) -> None:
        super().__init__()
        self._tickets = Tickets()
        self.held = Holdings()
        """The models, the recording and the live session (touched on the engine thread only)."""
        self.counts = Counts()
        self._baselines: dict[tuple, float] = {}
        self._queue: deque[tuple[Job, Ticket]] = deque()
        self._lock = threading.Lock()
        self._wake.connect(self._next)

    @property
    def cycles_done(self) -> int:
        """Cycles decoded by this worker so far (read from the UI thread)."""
        return self.counts.cycles_done

    # -- called from the UI thread ------------------------------------------------
    def submit(self, job: Job) -> tuple[Ticket, bool]:
        """Queue ``job`` with a ticket stamped now; True when it replaced a queued job of the same key (thread-safe)."""
        ticket = self._tickets.ticket()
        replaced = False
        with self._lock:
            if job.key is not None:
                for i, (queued, _) in enumerate(self._queue):
                    if queued.key == job.key:
                        self._queue[i] = (job, ticket)
                        replaced = True
                        break
            if not replaced:
                self._queue.append((job, ticket))
        if not replaced:
            self._wake.emit()
        return ticket, replaced

    def pause(self) -> None:
        """Stop every job sent before now at its next cycle boundary, queued ones included (thread-safe)."""
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
        return bool(self.held.models)

    # -- on the worker thread -------------------------------------------------------
    @Slot()
    def _next(self) -> None:
        """Run the next queued job to its end, sending what it reports."""
        with self._lock:
            if not self._queue:
                return
            job, ticket = self._queue.popleft()
        ctx = JobContext(self.held, self._tickets, ticket, lambda item: self.report.emit(job, item), self._baselines,
                         self.counts)
        try:
            for item in job.run(ctx):
                self.report.emit(job, item)
        except Exception as e:  # a job's own failures are its reports; this is the last net, never a crash
            self.report.emit(job, Error(f"{type(job).__name__} failed: {one_line(e)}"))
        finally:
            self.report.emit(job, Done())

    @Slot()
    def shutdown(self) -> None:
        """Close cleanly: the session in flight is marked interrupted, the recording closed, the thread ended."""
        try:
            info = self.held.finish("interrupted", "window closed")
            if info is not None:
                self.report.emit(None, SessionFinished(info))
            self.held.close()
        finally:
            QThread.currentThread().quit()
            self.report.emit(None, Progress("ready", 1.0))
            self.report.emit(None, Busy(False))


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

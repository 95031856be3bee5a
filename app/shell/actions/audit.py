"""The window's lossless audit: Run → Audit against plain decoding (Ctrl+Shift+A).

The session shown is compared with plain greedy decoding of its prompt on the same model (transformers' own
``generate``, on the engine thread: :meth:`specviz_app.session.worker.EngineWorker.audit_session`, the core's
:func:`specviz_core.audit.audit`, as ``specviz audit`` does). The verdict (identical, a numerical tie, a real
divergence, or not applicable to a sampled session) opens in a message; a tie or a divergence also shows the cycle
that committed the first differing token. A part of :class:`~specviz_app.shell.window.MainWindow`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMainWindow, QMenu, QMessageBox

from specviz_app.session.controller import SessionController
from specviz_app.shell.actions.common import window_action
from specviz_core.audit import AuditResult, audit
from specviz_core.viewer.session_model import SessionModel


class AuditJob(QObject):
    """Sends an audit to the engine worker and relays its result (on the UI thread)."""

    _audit = Signal(object, object, object)
    done = Signal(object)

    def __init__(self, controller: SessionController, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self._worker = None

    def start(self, info, cycle_lengths: list[int]) -> None:
        if self._worker is None:
            w = self._worker = self.controller.engine_for(self._audit)
            self._audit.connect(w.audit_session)
            w.audit_ready.connect(self.done)
        self._audit.emit(info, cycle_lengths, self._worker.ticket())


class AuditActions:
    """Run → Audit against plain decoding, added to ``run_menu``: audits the session ``model`` shows on
    ``controller``'s engine thread; the verdict opens in a message over ``window``."""

    def __init__(self, window: QMainWindow, run_menu: QMenu, model: SessionModel, controller: SessionController,
                 show_error: Callable[[str], None]) -> None:
        self.window, self.model, self.show_error = window, model, show_error
        self.action = window_action(
            window, "&Audit against plain decoding", "Ctrl+Shift+A", self.audit_session,
            "Decode the session's prompt plainly (greedy) on its model and find the first token where the outputs "
            "differ: identical, a numerical tie, or a real divergence")
        run_menu.addAction(self.action)
        self.job = AuditJob(controller, window)
        self.job.done.connect(self._audit_done)
        self.result: AuditResult | None = None
        """The last audit's verdict."""
        self.box: QMessageBox | None = None
        """The last verdict's message."""
        self._audited: str | None = None

    def audit_session(self) -> None:
        src = self.model.source
        if src is None:
            self.show_error("Nothing to audit: open a recording or decode a few cycles first.")
            return
        summaries = src.summaries()
        lengths = [len(s.committed_ids) for s in summaries]
        # A live session's info is the one it started with: its output is what its cycles committed so far.
        info = replace(src.info, output_ids=tuple(t for s in summaries for t in s.committed_ids))
        self._audited = info.id
        if info.temperature > 0 or not info.output_ids:  # no model needed to say it does not apply
            self._audit_done(audit(info, lengths, None))
            return
        self.window.statusBar().showMessage(f"Auditing session {info.id}: decoding its prompt plainly…")
        self.job.start(info, lengths)

    def _audit_done(self, result: AuditResult) -> None:
        self.result = result
        self.window.statusBar().showMessage(f"Audit: {result.verdict}", 10000)
        src = self.model.source
        if result.cycle is not None and src is not None and src.info.id == self._audited:
            self.model.set_cycle(min(result.cycle, self.model.n_cycles - 1))
        box = self.box = QMessageBox(self.window)
        box.setIcon(QMessageBox.Icon.Warning if result.verdict == "divergence" else QMessageBox.Icon.Information)
        box.setWindowTitle(f"Audit: {result.verdict}")
        box.setText(result.message)
        box.open()  # not modal: the cycle it names stays in view

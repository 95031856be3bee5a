"""The window's lossless audit: Run → Audit against plain decoding (Ctrl+Shift+A).

The session shown is compared with plain greedy decoding of its prompt on the same model (transformers' own
``generate``, on the engine thread: :meth:`specviz_app.session.worker.EngineWorker.audit_session`, the core's
:func:`specviz_core.audit.audit`, as ``specviz audit`` does). The verdict (identical, a numerical tie, a real
divergence, or not applicable to a sampled session) opens in a message; a tie or a divergence also shows the cycle
that committed the first differing token. A mixin of :class:`~specviz_app.shell.window.MainWindow`.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMessageBox

from specviz_core.audit import AuditResult, audit


class AuditJob(QObject):
    """Sends an audit to the engine worker and relays its result (on the UI thread)."""

    _audit = Signal(object, object, object)
    done = Signal(object)

    def __init__(self, controller, parent: QObject | None = None) -> None:
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
    """The audit action for the main window (which provides model, controller, statusBar, show_error...)."""

    def _build_audit(self, run_menu) -> None:
        self.audit_action = self._action(
            "&Audit against plain decoding", "Ctrl+Shift+A", self.audit_session,
            "Decode the session's prompt plainly (greedy) on its model and find the first token where the outputs "
            "differ: identical, a numerical tie, or a real divergence")
        run_menu.addAction(self.audit_action)
        self.audit_job = AuditJob(self.controller, self)
        self.audit_job.done.connect(self._audit_done)
        self.audit_result: AuditResult | None = None
        self.audit_box: QMessageBox | None = None
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
        self.statusBar().showMessage(f"Auditing session {info.id}: decoding its prompt plainly…")
        self.audit_job.start(info, lengths)

    def _audit_done(self, result: AuditResult) -> None:
        self.audit_result = result
        self.statusBar().showMessage(f"Audit: {result.verdict}", 10000)
        src = self.model.source
        if result.cycle is not None and src is not None and src.info.id == self._audited:
            self.model.set_cycle(min(result.cycle, self.model.n_cycles - 1))
        box = self.audit_box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Warning if result.verdict == "divergence" else QMessageBox.Icon.Information)
        box.setWindowTitle(f"Audit: {result.verdict}")
        box.setText(result.message)
        box.open()  # not modal: the cycle it names stays in view

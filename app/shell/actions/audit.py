"""The window's lossless audit: Run → Audit against plain decoding (Ctrl+Shift+A).

The session shown is compared with plain greedy decoding of its prompt on the same model (transformers' own
``generate``, on the engine thread: :class:`specviz_app.session.jobs.audit.AuditJob`, the core's
:func:`specviz_core.audit.audit`, as ``specviz audit`` does). The verdict (identical, a numerical tie, a real
divergence, or not applicable to a sampled session) opens in a message; a tie or a divergence also shows the cycle
that committed the first differing token. A part of :class:`~specviz_app.shell.window.MainWindow`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from PySide6.QtWidgets import QMainWindow, QMenu, QMessageBox

from specviz_app.session.controller import SessionController
from specviz_app.session.jobs.audit import AuditJob
from specviz_app.session.jobs.reports import AuditReady
from specviz_app.shell.actions.common import window_action
from specviz_core.audit import AuditResult, audit
from specviz_core.viewer.session_model import SessionModel


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
        self.controller = controller
        controller.engine.on(AuditReady, lambda rep: self._audit_done(rep.result))
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
        self.controller.submit(AuditJob(info, tuple(lengths)))

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

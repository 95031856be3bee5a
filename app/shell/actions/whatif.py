"""The window's what-if actions: fork the session shown from a cycle (docs/fork.md), compare sessions.

A part of :class:`~specviz_app.shell.window.MainWindow`: the timeline's context menu, the Run panel's Fork… button and
Run → Fork from this cycle… open the fork dialog pre-filled from the session; the controller starts the fork, whose
re-run of the parent's cycles shows in the status bar's progress bar; a failed check asks Continue anyway or Stop.
Run → Compare sessions… (Ctrl+Shift+C) picks sessions of the open recording and shows them in a Compare window;
clicking a token there opens that cycle of that session here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMenu,
    QMessageBox,
    QVBoxLayout,
)

from specviz_app.panels.run.panel import RunPanel
from specviz_app.panels.timeline import TimelinePanel
from specviz_app.session.controller import SessionController
from specviz_app.shell.actions.common import session_file, window_action
from specviz_app.windows.fork import ForkDialog
from specviz_core.analysis.compare import fork_label, fork_tree
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.viewer.session_model import SessionModel


class WhatIfActions:
    """Run → Fork from this cycle… and Run → Compare sessions…, added to ``run_menu``: dialogs over ``window``, the
    session shown read from ``model``, forks started and sessions opened through ``controller``."""

    def __init__(self, window: QMainWindow, run_menu: QMenu, model: SessionModel, controller: SessionController,
                 run_panel: RunPanel, timeline: TimelinePanel, show_error: Callable[[str], None]) -> None:
        self.window, self.model, self.controller, self.run_panel = window, model, controller, run_panel
        self.show_error = show_error
        self.fork_dialog: ForkDialog | None = None
        self.fork_box: QMessageBox | None = None
        self._fork_rerunning = False
        self.fork_action = window_action(window, "&Fork from this cycle…", "Ctrl+Shift+F", lambda: self.fork_from(),
                                         "Continue the session shown from the current cycle with other settings")
        self.compare_action = window_action(window, "&Compare sessions…", "Ctrl+Shift+C", self.compare_dialog,
                                            "Sessions of the open recording side by side")
        self.compare_chooser: QDialog | None = None
        self.compare_list: QListWidget | None = None
        self.compare_windows: list = []
        run_menu.addSeparator()
        run_menu.addAction(self.fork_action)
        run_menu.addAction(self.compare_action)
        timeline.fork_requested.connect(self.fork_from)
        run_panel.fork_requested.connect(lambda: self.fork_from())
        controller.fork_mismatch.connect(self._on_fork_mismatch)
        controller.progress.connect(self._on_fork_progress)
        model.session_opened.connect(self._on_fork_opened)

    def fork_from(self, cycle: int | None = None) -> ForkDialog | None:
        """Open the fork dialog for the session shown, from ``cycle`` (default: the current one)."""
        src, db = self.model.source, session_file(self.model)
        if src is None or db is None:
            self.show_error("No session to fork: open a recording or decode a few cycles first.")
            return None
        if self.controller.busy:
            self.show_error("Pause the running session before forking it.")
            return None
        try:
            with Recording(db, read_only=True) as rec:
                info = rec.session(src.info.id)  # counts as stored now (a live session's header has none)
        except SpecVizError as e:
            self.show_error(str(e))
            return None
        cycle = self.model.index if cycle is None else cycle
        dialog = ForkDialog(info, max(cycle, 0), self.window)
        dialog.accepted.connect(lambda: self._start_fork(info.id, dialog, db))
        self.fork_dialog = dialog
        dialog.open()
        return dialog

    def _start_fork(self, parent_id: str, dialog: ForkDialog, db: Path) -> None:
        from specviz_app.session.jobs.fork import ForkStart

        start = ForkStart(parent_id, dialog.cycle.value(), dialog.changes())
        if self.controller.fork(start, db):
            self.window.statusBar().showMessage(f"Forking {parent_id} at cycle {start.cycle}: loading…")

    def _on_fork_opened(self, source) -> None:
        info = source.info
        if source.live and info.parent_session:
            self.run_panel.show_settings(info)  # the fork's own settings, locked
            self._fork_rerunning = bool(info.fork_cycle)
            self.run_panel.set_status(f"Fork {info.id} of {info.parent_session} at cycle {info.fork_cycle}: "
                                      f"{info.method}. Re-running and checking cycles 0–{(info.fork_cycle or 1) - 1} "
                                      "first." if info.fork_cycle else f"Fork {info.id}: {info.method} from cycle 0.")

    def _on_fork_progress(self, stage: str, fraction: float) -> None:
        if stage == "ready" and self._fork_rerunning and self.model.source is not None and self.model.source.live:
            self._fork_rerunning = False
            info = self.model.source.info
            if self.model.n_cycles >= (info.fork_cycle or 0):
                text = (f"Cycles 0–{info.fork_cycle - 1} re-ran exactly as recorded. Step (F10) or Run (F5) decodes "
                        f"cycle {info.fork_cycle} on with {info.method}.")
                self.run_panel.set_status(text)
                self.window.statusBar().showMessage(text, 10000)

    def _on_fork_mismatch(self, text: str) -> None:
        self._fork_rerunning = False
        box = QMessageBox(QMessageBox.Icon.Warning, "The fork did not reproduce", text, parent=self.window)
        box.setInformativeText("Continue anyway goes on from the re-run state (the prefix then differs from the "
                               "parent's); Stop saves the fork as failed.")
        go_on = box.addButton("Continue anyway", QMessageBox.ButtonRole.AcceptRole)
        box.addButton("Stop", QMessageBox.ButtonRole.RejectRole)
        box.finished.connect(lambda _: self.controller.fork_choice(box.clickedButton() is go_on))
        self.fork_box = box
        self.run_panel.show_message(text)
        box.open()

    # -- compare ------------------------------------------------------------------------------------------------
    def compare_dialog(self) -> QDialog | None:
        """Choose sessions of the open recording (the one shown, its parent and AR sessions of its prompt are
        ticked), then :meth:`compare`."""
        db = self.model.recording_path
        if db is None or not Path(db).exists():
            self.show_error("No recording open: open one (Ctrl+O) or record a session first.")
            return None
        try:
            with Recording(db, read_only=True) as rec:
                sessions = [s for s, _ in fork_tree(rec.sessions())]
        except SpecVizError as e:
            self.show_error(str(e))
            return None
        cur = self.model.source.info if self.model.source is not None else None
        dialog = QDialog(self.window)
        dialog.setWindowTitle("Compare sessions")
        layout = QVBoxLayout(dialog)
        layout.addWidget(QLabel("Sessions to compare (two or more; an AR session goes first as the baseline):"))
        self.compare_list = QListWidget()
        for s in sessions:
            item = QListWidgetItem(f"{s.id}  {s.method}  {s.n_tokens} tokens  {s.tokens_per_s:.1f} tok/s  "
                                   f"{fork_label(s) or ' '.join(s.prompt_text.split())[:40]}")
            item.setData(Qt.ItemDataRole.UserRole, s.id)
            ticked = cur is not None and (s.id in (cur.id, cur.parent_session) or (
                s.method == "ar" and s.prompt_ids == cur.prompt_ids))
            item.setCheckState(Qt.CheckState.Checked if ticked else Qt.CheckState.Unchecked)
            self.compare_list.addItem(item)
        layout.addWidget(self.compare_list)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Compare")
        buttons.accepted.connect(dialog.accept)
        buttons.rejected.connect(dialog.reject)
        layout.addWidget(buttons)
        methods = {s.id: s.method for s in sessions}

        def chosen() -> None:
            ids = [self.compare_list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.compare_list.count())
                   if self.compare_list.item(i).checkState() == Qt.CheckState.Checked]
            self.compare(Path(db), sorted(ids, key=lambda i: methods[i] != "ar"))  # stable: AR first

        dialog.accepted.connect(chosen)
        self.compare_chooser = dialog
        dialog.open()
        return dialog

    def compare(self, db: Path, ids: list[str]):
        """A Compare window on sessions ``ids`` of ``db`` (the first is the baseline)."""
        from specviz_app.windows.compare.view import CompareWindow
        from specviz_core.viewer.comparison import load_comparison

        try:
            comparison, vocab = load_comparison(db, ids)
        except SpecVizError as e:
            self.show_error(str(e))
            return None
        window = CompareWindow(comparison, vocab, self.window)
        window.view.cycle_requested.connect(lambda sid, c: self._open_cycle(db, sid, c))
        self.compare_windows.append(window)
        window.show()
        return window

    def _open_cycle(self, db: Path, session_id: str, cycle: int) -> None:
        src = self.model.source
        if src is None or src.info.id != session_id:
            if not self.controller.open_session(str(db), session_id):
                return
        self.model.set_cycle(cycle)
        self.window.raise_()
        self.window.activateWindow()

"""The window's race: Run → Race… (Ctrl+Shift+R) opens :class:`~specviz_app.windows.race.dialog.RaceDialog`; the chosen sessions,
or AR and the Run panel's method freshly recorded on the engine thread (:mod:`specviz_app.session.jobs.race`), play in a
:class:`~specviz_app.windows.race.window.RaceWindow`. A part of :class:`~specviz_app.shell.window.MainWindow`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QMainWindow, QMenu

from specviz_app.panels.run.panel import RunPanel
from specviz_app.panels.sessions import SessionsView
from specviz_app.session.controller import SessionController
from specviz_app.session.jobs.race import RaceJob
from specviz_app.session.jobs.reports import RaceFailed, RaceProgress, RaceRecorded
from specviz_app.shell.actions.common import session_file, window_action
from specviz_app.windows.race.dialog import RaceDialog
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.viewer.comparison import stored_curve_of
from specviz_core.viewer.session_model import SessionModel


class RaceActions:
    """Run → Race…, added to ``run_menu``: the dialog and the race windows over ``window``, the sessions of the
    recording ``model`` has open (or ``sessions`` lists), a race recorded on ``controller``'s engine thread with the
    ``run_panel``'s settings."""

    def __init__(self, window: QMainWindow, run_menu: QMenu, model: SessionModel, controller: SessionController,
                 run_panel: RunPanel, sessions: SessionsView, show_error: Callable[[str], None]) -> None:
        self.window, self.model, self.controller = window, model, controller
        self.run_panel, self.sessions, self.show_error = run_panel, sessions, show_error
        self.action = window_action(window, "Ra&ce…", "Ctrl+Shift+R", self.dialog,
                                    "Sessions of one prompt side by side at their recorded pace; or record AR and "
                                    "the Run panel's method on its prompt first")
        run_menu.addAction(self.action)
        self.windows: list = []
        """The race windows open (or closed since the last race)."""
        self.chooser: RaceDialog | None = None
        on = controller.engine.on
        on(RaceProgress, lambda rep: self.chooser and self.chooser.set_progress(rep.stage, rep.fraction))
        on(RaceRecorded, lambda rep: self._race_recorded(rep.db_path, rep.session_ids))
        on(RaceFailed, lambda rep: self._race_failed(rep.text))

    def dialog(self) -> RaceDialog:
        """Choose sessions of the open recording (the one shown and the AR session of its prompt come ticked), or
        record AR and the Run panel's method; then race."""
        db = session_file(self.model) or self.sessions.path
        sessions, problem = [], ""
        if db is not None and Path(db).exists():
            try:
                with Recording(db, read_only=True) as rec:
                    sessions = rec.sessions()
            except SpecVizError as e:
                problem = str(e)
        request, request_error = None, ""
        try:
            request = self.run_panel.request()
        except SpecVizError as e:
            request_error = str(e)
        cur = self.model.source.info if self.model.source is not None else None
        dialog = RaceDialog(sessions, Path(db) if db is not None else None, cur, request, request_error,
                            self.model.recording_path, self.window)
        if problem:
            dialog.show_message(problem)
        dialog.race_requested.connect(lambda ids: self.race(Path(db), ids))
        dialog.record_requested.connect(lambda: self._record_race(dialog))
        dialog.cancel_requested.connect(lambda: (self.controller.engine.pause(), dialog.cancelling()))
        self.chooser = dialog
        dialog.open()
        return dialog

    def _record_race(self, dialog: RaceDialog) -> None:
        if self.controller.busy:
            dialog.show_message("The engine is busy: pause the running session (F6), then record the race.")
            return
        try:
            request = self.run_panel.request()  # read now: the panel may have changed since the dialog opened
        except SpecVizError as e:
            dialog.show_message(str(e))
            return
        db = self.model.recording_path
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            dialog.show_message(f"cannot create {db.parent}: {e.strerror}")
            return
        dialog.set_recording(True)
        self.controller.submit(RaceJob(request, str(db)))

    def _race_recorded(self, db: str, ids: list[str]) -> None:
        self.controller.sessions_changed.emit()
        dialog = self.chooser
        if dialog is not None:
            dialog.set_recording(False)
            dialog.accept()
        self.race(Path(db), ids)

    def _race_failed(self, text: str) -> None:
        self.controller.sessions_changed.emit()
        dialog = self.chooser
        message = text or "Cancelled: the session being decoded was saved as interrupted; nothing raced."
        if dialog is not None and dialog.isVisible():
            dialog.set_recording(False)
            dialog.show_message(message, error=bool(text))
        else:
            self.window.statusBar().showMessage(message, 10000)

    def race(self, db: Path, ids: list[str]):
        """A race window, playing, on sessions ``ids`` of ``db`` (the first is the baseline); None (with a message
        in the window) when they cannot race."""
        from specviz_app.windows.race.window import RaceWindow
        from specviz_core.analysis.race import make_race
        from specviz_core.viewer.comparison import load_comparison

        try:
            comparison, vocab = load_comparison(db, ids)
            if not comparison.same_prompt():
                raise SpecVizError("the sessions decode different prompts: race sessions of one prompt")
            race = make_race(comparison.sessions, curve_of=stored_curve_of)
        except (SpecVizError, ValueError) as e:
            self.show_error(str(e))
            return None
        window = RaceWindow(race, vocab, parent=self.window, export_dir=Path(db).parent)
        self.windows = [w for w in self.windows if w.isVisible()] + [window]
        window.show()
        window.start()
        self.window.statusBar().showMessage("Race: Space plays or pauses, R restarts, F11 full screen, Ctrl+E saves a GIF",
                                     10000)
        return window

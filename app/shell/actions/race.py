"""The window's race: Run → Race… (Ctrl+Shift+R) opens :class:`~specviz_app.windows.race.dialog.RaceDialog`; the chosen sessions,
or AR and the Run panel's method freshly recorded on the engine thread (:mod:`specviz_app.session.jobs.race`), play in a
:class:`~specviz_app.windows.race.window.RaceWindow`. A mixin of :class:`~specviz_app.shell.window.MainWindow`.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from specviz_app.windows.race.dialog import RaceDialog
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording


class RaceJob(QObject):
    """Sends a race recording to the engine worker and relays what it reports (on the UI thread)."""

    _record = Signal(object, str, object)
    progress = Signal(str, float)
    recorded = Signal(str, object)
    failed = Signal(str)

    def __init__(self, controller, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self._worker = None

    def start(self, checked, db: Path) -> None:
        if self._worker is None:
            w = self._worker = self.controller.engine_for(self._record)
            self._record.connect(w.record_race)
            w.race.progress.connect(self.progress)
            w.race.recorded.connect(self.recorded)
            w.race.failed.connect(self.failed)
        self._record.emit(checked, str(db), self._worker.ticket())

    def cancel(self) -> None:
        if self._worker is not None:
            self._worker.pause()


class RaceActions:
    """Race actions for the main window (which provides controller, run_panel, sessions, model, show_error...)."""

    def _build_race(self, run_menu) -> None:
        self.race_action = self._action("Ra&ce…", "Ctrl+Shift+R", self.race_dialog,
                                        "Sessions of one prompt side by side at their recorded pace; or record AR and "
                                        "the Run panel's method on its prompt first")
        run_menu.addAction(self.race_action)
        self.race_windows: list = []
        self.race_chooser: RaceDialog | None = None
        self.race_job = RaceJob(self.controller, self)
        self.race_job.progress.connect(lambda s, f: self.race_chooser and self.race_chooser.set_progress(s, f))
        self.race_job.recorded.connect(self._race_recorded)
        self.race_job.failed.connect(self._race_failed)

    def race_dialog(self) -> RaceDialog:
        """Choose sessions of the open recording (the one shown and the AR session of its prompt come ticked), or
        record AR and the Run panel's method; then race."""
        db = self._session_file() or self.sessions.path
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
                            self.model.recording_path, self)
        if problem:
            dialog.show_message(problem)
        dialog.race_requested.connect(lambda ids: self.race(Path(db), ids))
        dialog.record_requested.connect(lambda: self._record_race(dialog))
        dialog.cancel_requested.connect(lambda: (self.race_job.cancel(), dialog.cancelling()))
        self.race_chooser = dialog
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
        self.race_job.start(request, db)

    def _race_recorded(self, db: str, ids: list[str]) -> None:
        self.controller.sessions_changed.emit()
        dialog = self.race_chooser
        if dialog is not None:
            dialog.set_recording(False)
            dialog.accept()
        self.race(Path(db), ids)

    def _race_failed(self, text: str) -> None:
        self.controller.sessions_changed.emit()
        dialog = self.race_chooser
        message = text or "Cancelled: the session being decoded was saved as interrupted; nothing raced."
        if dialog is not None and dialog.isVisible():
            dialog.set_recording(False)
            dialog.show_message(message, error=bool(text))
        else:
            self.statusBar().showMessage(message, 10000)

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
            race = make_race(comparison.sessions)
        except (SpecVizError, ValueError) as e:
            self.show_error(str(e))
            return None
        window = RaceWindow(race, vocab, parent=self, export_dir=Path(db).parent)
        self.race_windows = [w for w in self.race_windows if w.isVisible()] + [window]
        window.show()
        window.start()
        self.statusBar().showMessage("Race: Space plays or pauses, R restarts, F11 full screen, Ctrl+E saves a GIF",
                                     10000)
        return window

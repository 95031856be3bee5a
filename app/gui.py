"""Starting the window: ``specviz`` (live, on the default model), ``specviz gui --db FILE [--session ID]`` and
``specviz gui --demo`` (the bundled recording)."""

from __future__ import annotations

import sys
from pathlib import Path

from specviz_core.errors import SpecVizError


def make_app(argv: list[str] | None = None, theme: str = "system"):
    from PySide6.QtWidgets import QApplication

    from specviz_app.icons import app_icon
    from specviz_app.theme import apply_system_theme

    app = QApplication.instance()
    if app is None:
        app = QApplication(argv if argv is not None else sys.argv[:1])
        app.setApplicationName("SpecViz")
        app.setOrganizationName("SpecViz")
        apply_system_theme(app, theme)
    if app.windowIcon().isNull():
        app.setWindowIcon(app_icon())
    return app


def open_window(db: Path, session: str | None = None, replay: bool = False):
    """Build the main window on ``db``; with ``replay``, open ``session`` (or the latest) from it."""
    from specviz_app.shell.window import MainWindow

    if replay and not Path(db).exists():
        raise SpecVizError(f"no recording at {db}")
    window = MainWindow(db)
    if replay:
        window.model.set_recording(db)
        if not window.controller.open_session(str(db), session):
            raise SpecVizError(window.run_panel.message.text() or f"cannot open {db}")
    return window


def window_excepthook(window):
    """A ``sys.excepthook`` for the window: an exception that escapes a Qt slot prints one line, writes its
    traceback to a log in the user data folder, and says so in the window's status bar (a bug must not
    print a traceback, nor pass unseen by someone who started the app from a menu)."""
    from PySide6.QtCore import QThread, QTimer

    from specviz_core.crash import one_line

    def hook(kind: type[BaseException], exc: BaseException, tb) -> None:
        if isinstance(exc, KeyboardInterrupt):
            return
        exc.__traceback__ = tb
        line = one_line(exc)
        print(f"specviz: error: {line}", file=sys.stderr)

        def show() -> None:
            try:
                window.show_error(f"Something went wrong: {line}")
            except RuntimeError:  # the window is gone
                pass

        if QThread.currentThread() is window.thread():
            show()
        else:  # the engine thread: widgets belong to the UI thread
            QTimer.singleShot(0, window, show)

    return hook


def run_gui(db: Path, session: str | None = None, replay: bool = False) -> int:
    app = make_app()
    from specviz_app.session.worker import WorkerThread

    window = open_window(db, session, replay)
    window.show()
    previous, sys.excepthook = sys.excepthook, window_excepthook(window)
    try:
        return app.exec()
    finally:
        sys.excepthook = previous
        WorkerThread.join_unfinished()  # a model that was still loading when the window closed

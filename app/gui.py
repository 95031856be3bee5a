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
        quiet_platform_noise()
        app = QApplication(argv if argv is not None else sys.argv[:1])
        app.setApplicationName("SpecViz")
        app.setOrganizationName("SpecViz")
        apply_system_theme(app, theme)
    if app.windowIcon().isNull():
        app.setWindowIcon(app_icon())
    return app


#: What Qt's platform plugins say that is no news to the user: the offscreen plugin (every headless render) cannot
#: resize native windows to size hints and says so on every dock layout.
PLATFORM_NOISE = ("This plugin does not support propagateSizeHints",)


def quiet_platform_noise() -> None:
    """Drop :data:`PLATFORM_NOISE` from Qt's messages; every other message goes on where it went (headless commands
    print nothing but what they mean to)."""
    from PySide6.QtCore import qInstallMessageHandler

    previous = None

    def handler(kind, context, message: str) -> None:
        if message.startswith(PLATFORM_NOISE):
            return
        if previous is not None:
            previous(kind, context, message)
        else:
            print(message, file=sys.stderr)

    previous = qInstallMessageHandler(handler)


def open_window(db: Path, session: str | None = None, replay: bool = False):
    """Build the main window on ``db``; with ``replay``, open ``session`` (or the latest) from it."""
    from specviz_app.shell.window import MainWindow

    if replay:
        if not Path(db).exists():
            raise SpecVizError(f"no recording at {db}")
        # Read it before any window exists: a file that is no recording is refused in one line, and no
        # half-built window is left for the interpreter's exit to tear down (that crashed, issue 30).
        from specviz_core.recording.store import Recording
        from specviz_core.viewer.sources import RecordingSource

        with Recording(db, read_only=True) as rec:
            RecordingSource(rec, session)
    window = MainWindow(db)
    if replay and not window.controller.open_session(str(db), session):
        text = window.run_panel.message.text() or f"cannot open {db}"
        dispose(window)
        raise SpecVizError(text)
    return window


def dispose(window) -> None:
    """Close and delete a window now, on the UI thread (its engine thread and garbage-collector guard stop)."""
    from PySide6.QtWidgets import QApplication

    window.close()
    window.deleteLater()
    QApplication.processEvents()


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
    window = open_window(db, session, replay)
    window.show()
    previous, sys.excepthook = sys.excepthook, window_excepthook(window)
    try:
        return app.exec()
    finally:
        sys.excepthook = previous
        engine = sys.modules.get("specviz_app.session.worker")  # imported with the first live session, if any
        if engine is not None:
            engine.WorkerThread.join_unfinished()  # a model that was still loading when the window closed

"""Starting the window: ``specviz`` (live, on the default model), ``specviz gui --db FILE [--session ID]`` and
``specviz gui --demo`` (the bundled recording)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from specviz_core.errors import SpecVizError


def make_app(argv: list[str] | None = None, theme: str = "system"):
    from PySide6.QtWidgets import QApplication

    from specviz_app.icons import app_icon
    from specviz_app.theme import apply_system_theme

    app = QApplication.instance()
    if app is None:
        check_platform()
        quiet_platform_noise()
        app = QApplication(argv if argv is not None else sys.argv[:1])
        app.setApplicationName("SpecViz")
        app.setOrganizationName("SpecViz")
        apply_system_theme(app, theme)
    if app.windowIcon().isNull():
        app.setWindowIcon(app_icon())
    return app


#: Where Qt opens windows without a screen: any of these needs no display.
HEADLESS = ("offscreen", "minimal", "vnc", "eglfs", "linuxfb")


def check_platform(environ: dict[str, str] | None = None, missing_libraries=None) -> None:
    """Refuse, in one line that says what to do, to start Qt where it would abort with its own message (exit 134):
    on Linux with no display, or with the X11 plugin's system libraries missing. ``missing_libraries``: for tests,
    a stand-in for :func:`xcb_missing_libraries`."""
    env = os.environ if environ is None else environ
    platform = env.get("QT_QPA_PLATFORM", "").split(":")[0].strip()
    if not sys.platform.startswith("linux") or platform in HEADLESS:
        return
    offscreen = ("without a screen, `specviz screenshot` and `specviz race --out` render offscreen "
                 "(QT_QPA_PLATFORM=offscreen)")
    if not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        raise SpecVizError(f"no display to open the window on (DISPLAY and WAYLAND_DISPLAY are not set): run it on "
                           f"a desktop, or over ssh -X; {offscreen}")
    if platform == "wayland" or (not platform and env.get("WAYLAND_DISPLAY") and not env.get("DISPLAY")):
        return
    missing = (missing_libraries or xcb_missing_libraries)()
    if missing:
        packages = " ".join(debian_package(lib) for lib in missing)
        raise SpecVizError(f"Qt cannot open a window here: its X11 (xcb) plugin needs system libraries this machine "
                           f"lacks ({', '.join(missing)}): install them (Debian or Ubuntu: sudo apt install "
                           f"{packages}); {offscreen}")


def xcb_missing_libraries() -> list[str]:
    """The shared libraries Qt's X11 platform plugin links to that the system cannot find (``ldd``), in order."""
    import subprocess

    import PySide6

    plugin = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    if not plugin.is_file():
        return []
    try:
        out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []  # no ldd: Qt will say what it lacks
    found = [line.split("=>")[0].strip() for line in out.splitlines() if "not found" in line]
    return list(dict.fromkeys(found))


def debian_package(library: str) -> str:
    """The Debian package that ships ``library`` by Debian's naming rule: ``libxcb-icccm.so.4`` is in
    ``libxcb-icccm4``, ``libxkbcommon-x11.so.0`` in ``libxkbcommon-x11-0``."""
    stem, _, version = library.partition(".so.")
    version = version.split(".")[0]
    if not version:
        return stem
    return f"{stem}-{version}" if stem[-1].isdigit() else f"{stem}{version}"


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
        # The window deleted while the application lives: one left to the interpreter's exit (the event loop ended
        # by QApplication.quit, not by closing it) is torn down in no set order, and that crashed now and then.
        dispose(window)
        engine = sys.modules.get("specviz_app.session.worker")  # imported with the first live session, if any
        if engine is not None:
            engine.WorkerThread.join_unfinished()  # a model that was still loading when the window closed

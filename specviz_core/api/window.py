"""``specviz.open``: the window on a recording or on sessions decoded from Python, from a script or a notebook.

Qt is imported here only, when ``open`` is called. In IPython or Jupyter the window runs on the shell's Qt event
loop (``%gui qt``, switched on here where it can be) and ``open`` returns at once; in a script it blocks until the
window is closed.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specviz.session import Session
from specviz_core.analysis.cycle_summary import summarize
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.session.capture import GenerateCapture

#: Windows opened from an interactive shell, kept alive while it runs (a window with no reference is deleted).
_OPEN: list[Any] = []


def open(what: str | Path | Session | Sequence[Session] | GenerateCapture,  # noqa: A001 - the API's verb
         session: str | None = None, block: bool | None = None) -> Any:
    """Open the SpecViz window on ``what``: a recording's path (its latest session, or ``session``), a
    :class:`~specviz.Session`, a list of sessions (the first shown; the others in the Sessions panel, for
    Compare and Race), or what :func:`specviz.record` returned (its last ``generate`` call). A session recorded
    with ``db=`` opens from its file; one decoded without is written to a
    temporary recording first.

    ``block``: None (the default) returns at once in IPython/Jupyter, where the shell's Qt event loop runs the
    window, and blocks until it is closed elsewhere. Returns the window (None once a blocking one is closed)."""
    db, session_id = recording_of(what, session)
    shell = _ipython()
    interactive = shell is not None if block is None else not block
    if interactive:
        _qt_loop(shell)
    from specviz_app.gui import dispose, make_app, open_window  # Qt loads here, never on import specviz

    app = make_app()
    window = open_window(db, session_id, replay=True)
    window.show()
    if app.platformName() != "offscreen":  # a headless run has no stacking order to change
        window.raise_()
    if interactive:
        _OPEN.append(window)
        window.destroyed.connect(lambda *_: _OPEN.remove(window) if window in _OPEN else None)
        return window
    app.exec()
    dispose(window)
    return None


def recording_of(what: Any, session: str | None = None) -> tuple[Path, str | None]:
    """The recording file and the session id ``open`` shows for ``what``."""
    if isinstance(what, (str, Path)):
        path = Path(what).expanduser()
        if not path.is_file():
            raise SpecVizError(f"no recording at {path}")
        return path, session
    if isinstance(what, GenerateCapture):
        if not what.sessions:
            raise SpecVizError(f"specviz.record has recorded no generate call to {what.path} yet")
        return what.path, session or what.sessions[-1]
    sessions = [what] if isinstance(what, Session) else list(what) if isinstance(what, (list, tuple)) else None
    if not sessions or not all(isinstance(s, Session) for s in sessions):
        raise SpecVizError("open takes a recording's path, a specviz.Session, a list of sessions or a specviz.record, "
                           "got "
                           f"{type(what).__name__}")
    if any(not s.cycles for s in sessions):
        raise SpecVizError("a session to open has no cycles yet: step() or run() it first")
    dbs = {s.db for s in sessions}
    if len(dbs) == 1 and None not in dbs:  # all recorded in one file (every cycle committed as decoded): open it
        return sessions[0].db, session or sessions[0].info.id  # type: ignore[return-value]
    folder = Path(tempfile.mkdtemp(prefix="specviz-open-"))
    db = folder / "sessions.db"
    with Recording(db, create=True) as rec:
        for s in sessions:
            writer = rec.new_session(s.info)
            for c in s.cycles:
                writer.append(c, summarize(c))
            writer.finish("complete" if s.done else "interrupted", s.stop_reason or "opened before its end",
                          s.session.stats())
    return db, session or sessions[0].info.id


def _ipython() -> Any:
    """The running IPython shell, if any (a notebook's kernel or the terminal IPython)."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None) if ipython is not None else None
    return get() if get is not None else None


def _qt_loop(shell: Any) -> None:
    """Make sure the shell runs Qt's event loop (``%gui qt``), or say in one line how to."""
    if str(getattr(shell, "active_eventloop", "") or "").startswith("qt"):
        return
    try:
        shell.enable_gui("qt")
    except Exception as e:  # noqa: BLE001 - any failure means the same to the user
        raise SpecVizError(f"the window needs the shell's Qt event loop: run %gui qt first ({e})") from None

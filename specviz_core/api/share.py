"""``specviz.share``: a session as one HTML page anyone can open in a browser (``specviz share`` from Python)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specviz.window import recording_of
from specviz_core.share.page import SharedPage
from specviz_core.share.page import share as _share


def share(what: Any, out: str | Path, session: str | None = None) -> SharedPage:
    """Write ``what`` (a recording's path, a :class:`specviz.Session`, or a :func:`specviz.record`) as the page
    ``out``: one self-contained file that replays the session in any browser, no network needed. ``session``: which
    session of a recording (default: the latest, or the one ``what`` is). Returns where it went and its size."""
    db, session_id = recording_of(what, session)
    return _share(db, out, session_id)

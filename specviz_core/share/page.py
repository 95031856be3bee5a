"""Write the page: the template, its style and script and the session's data, in one file that needs no network."""

from __future__ import annotations

import html
import json
import os
import re
import tempfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files
from pathlib import Path
from typing import Any

from specviz_core.errors import SpecVizError
from specviz_core.files import new_file_mode
from specviz_core.recording.store import Recording
from specviz_core.share.payload import page_data

_PLACES = re.compile(r"\{(version|title|css|js|data)\}")


@dataclass(frozen=True)
class SharedPage:
    """A page written: where, which session, and how large the file is."""

    path: Path
    session_id: str
    n_cycles: int
    size_bytes: int


def render(data: dict[str, Any]) -> str:
    """The page's text for ``data`` (:func:`~specviz_core.share.payload.page_data`): one pass over the template's
    places, so nothing inserted is read as a place again."""
    here = files("specviz_core.share")
    s = data["session"]
    try:
        ver = version("specviz")
    except PackageNotFoundError:
        ver = "0+unknown"
    # In a <script> element only "</" can end it early: written as "<\/", which JSON reads as "</".
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    values = {"version": ver, "title": html.escape(f"SpecViz · {s['method']} · {s['model']} · session {s['id']}"),
              "css": (here / "page.css").read_text(encoding="utf-8"),
              "js": (here / "page.js").read_text(encoding="utf-8"), "data": payload}
    return _PLACES.sub(lambda m: values[m.group(1)], (here / "page.html").read_text(encoding="utf-8"))


def share(db: str | os.PathLike, out: str | os.PathLike, session_id: str | None = None) -> SharedPage:
    """Write one recorded session (``session_id``; the latest when None) of the recording ``db`` as the page
    ``out``. The file is written whole or not at all (a temporary file, then renamed)."""
    path = Path(db)
    if not path.is_file():
        raise SpecVizError(f"no recording at {path}")
    with Recording(path, read_only=True) as rec:
        data = page_data(rec, session_id)
    text = render(data)
    target = Path(out)
    if target.is_dir():
        raise SpecVizError(f"{target} is a folder: give the page's file name (e.g. {target / 'session.html'})")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".specviz-share-", suffix=".html", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, new_file_mode())  # a page to share: readable as any file written here, not mkstemp's 0600
        os.replace(tmp, target)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise SpecVizError(f"cannot write {target}: {e.strerror or e}") from None
    return SharedPage(target, data["session"]["id"], data["session"]["n_cycles"], target.stat().st_size)

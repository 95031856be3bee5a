"""The bundled demo recording (``specviz gui --demo``): a real Goose session on the default model, with an
AR session on the same prompt as its speed baseline, replayed with no model loaded.

The shipped file may sit in a read-only install, and opening a recording may write to it (WAL mode, dead
writers marked), so it is always copied first, with the slice of the tokenizer its tokens need (the
default model's own tokenizer may not be on this machine yet).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import specviz_resources

DEMO_DB = "goose-demo.db"
DEMO_TOKENIZER = "tokenizer.json"


def copy_demo(folder: Path) -> Path:
    """Copy the demo recording and its tokenizer into ``folder``; returns the copy, ready to open."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / DEMO_DB
    db.write_bytes(specviz_resources.files("demo", DEMO_DB).read_bytes())
    (folder / DEMO_TOKENIZER).write_bytes(specviz_resources.files("demo", DEMO_TOKENIZER).read_bytes())
    # The shipped sessions name no tokenizer (the recording machine's path means nothing here): the replay
    # reads token text from the folder holding tokenizer.json.
    conn = sqlite3.connect(db)
    try:
        with conn:
            conn.execute("UPDATE sessions SET tokenizer = ?", [str(folder)])
    finally:
        conn.close()
    return db


@contextmanager
def demo_recording() -> Iterator[Path]:
    """A fresh copy of the demo recording in a temporary folder, removed afterwards (live sessions
    started from the demo window are recorded there too, and go with it)."""
    with tempfile.TemporaryDirectory(prefix="specviz-demo-", ignore_cleanup_errors=True) as tmp:
        yield copy_demo(Path(tmp))

"""Unexpected errors: one line for the user, the whole traceback in a log file in the user data folder.

Used by every ``specviz`` command, by the window's engine thread and by the window's exception hook (so it sits
below both, not in the command line), so no
traceback reaches a terminal (issue 15: "no traceback from any specviz command on any input")."""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import TracebackType

from specviz_core.runtime.locations import data_dir


def write_crash_log(exc: BaseException | None = None) -> Path:
    """Write ``exc``'s traceback (default: the exception being handled) to a new log file; returns its path."""
    exc = exc if exc is not None else sys.exc_info()[1]
    text = "".join(traceback.format_exception(exc)) if exc is not None else "no exception\n"
    body = f"specviz {' '.join(sys.argv[1:])}\n\n{text}"
    try:
        folder = data_dir() / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"specviz-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        # Any text, even an argument of undecodable bytes (lone surrogates), is written: escaped, never an error.
        with path.open("a", encoding="utf-8", errors="backslashreplace") as fh:  # two errors a second share a file
            fh.write(body + "\n")
    except OSError:
        path = Path(tempfile.gettempdir()) / f"specviz-{os.getpid()}.log"
        with path.open("a", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(body + "\n")
    return path


def one_line(exc: BaseException) -> str:
    """``unexpected KeyError: 'x' (details in LOG)``: the exception in one line, its traceback logged."""
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"unexpected {type(exc).__name__}: {first} (details in {write_crash_log(exc)})"


def excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """A ``sys.excepthook`` that prints one line and logs the traceback (a KeyboardInterrupt stays quiet)."""
    if isinstance(exc, KeyboardInterrupt):
        return
    exc.__traceback__ = tb
    print(f"specviz: error: {one_line(exc)}", file=sys.stderr)

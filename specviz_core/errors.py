"""The one exception type users see: a clear, one-line message, never a traceback."""

from __future__ import annotations

import os


class SpecVizError(Exception):
    """A problem the user can fix (bad input, missing model, bad file).

    The CLI prints ``str(error)`` on one line and exits non-zero; the GUI shows it
    in a message box.
    """


class DamagedRecording(SpecVizError):
    """A recording file, or one session in it, that does not hold what the record contract
    (docs/record-format.md) says: the message names the file, the session and what is wrong."""

    def __init__(self, path: str | os.PathLike, reason: str, session_id: str | None = None,
                 index: int | None = None, message: str | None = None) -> None:
        self.path = str(path)
        self.reason = reason
        """What is wrong, without the file, session and cycle."""
        self.session_id = session_id
        self.index = index
        where = f"session {session_id}" if session_id is not None else ""
        if index is not None:
            where += f", cycle {index}" if where else f"cycle {index}"
        super().__init__(message or (f"{self.path}: {where} is damaged: {reason}" if where else
                                     f"{self.path} is damaged: {reason}"))


class DamagedCycle(DamagedRecording):
    """One cycle row of a session is damaged; the session's other cycles may still be read."""

    index: int

    def __init__(self, path: str | os.PathLike, session_id: str, index: int, reason: str) -> None:
        super().__init__(path, reason, session_id, index)

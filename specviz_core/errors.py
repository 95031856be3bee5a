"""The one exception type users see: a clear, one-line message, never a traceback."""

from __future__ import annotations


class SpecVizError(Exception):
    """A problem the user can fix (bad input, missing model, bad file).

    The CLI prints ``str(error)`` on one line and exits non-zero; the GUI shows it
    in a message box.
    """

"""Files the product writes: the mode a new file gets (the command line and the window's exports share it)."""

from __future__ import annotations

import os


def new_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask

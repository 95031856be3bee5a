"""The ``--minutes`` of a long command: a limit checked between units of work, with the clock injected.

A long command (``record --samples``, ``bench``, ``reproduce``, ``optimize-tree``) checks its limit before each
unit of work (a cycle, a run, a session) and, once it has passed, stops cleanly: what was finished is kept and
written, and one line says where it stopped. ``minutes=None`` never passes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from specviz_core.errors import SpecVizError

MAX_MINUTES = 7 * 24 * 60
"""The largest ``--minutes`` a command takes (a week)."""


@dataclass
class TimeLimit:
    minutes: float | None
    """The time allowed, in minutes from when the limit is made (None: no limit)."""
    clock: Callable[[], float] = time.monotonic
    """Seconds, monotonic; a test passes its own."""
    start: float = field(init=False)

    def __post_init__(self) -> None:
        if self.minutes is not None and not (math.isfinite(self.minutes) and 0 < self.minutes <= MAX_MINUTES):
            raise SpecVizError(f"--minutes must be above 0 and at most {MAX_MINUTES:,} (a week), got {self.minutes:g}")
        self.start = self.clock()

    def passed(self) -> bool:
        """The time is spent: start no more work."""
        return self.minutes is not None and self.clock() - self.start >= self.minutes * 60

    @property
    def reason(self) -> str:
        """Why the work stopped, for the one line that says so."""
        return f"the time limit (--minutes {self.minutes:g}) was reached"

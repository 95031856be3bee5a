"""Python's cyclic garbage collector runs only on the UI thread while a window is open.

With automatic collection, a collection can start in whichever thread happens to allocate, which
in SpecViz is often the engine thread (loading a tokenizer, decoding). If the cycles it frees hold
Qt wrappers (closed widgets, pyqtgraph items), their C++ destructors then run on the engine
thread while the UI thread waits for the GIL. We saw exactly that: the UI thread stuck at a
Python call, the engine thread inside ``json.load`` of a tokenizer, neither moving, after an
earlier window had been closed. pyqtgraph documents the same hazard (its ``GarbageCollector``).

So, while any window is open, automatic collection is off and a timer on the UI thread collects
the young generation every tick, and the older ones with the interpreter's own thresholds.
Reference counting still frees everything that is not in a cycle at once; only cyclic garbage
waits for the next tick (a second at most).

Every tick, not only when the allocation count has passed its threshold: CPython's count is
allocations *minus* deallocations, so a thread that allocates a million objects and frees them
leaves it near zero while the cycles made on the way are still there. The interpreter would have
collected at the peak; a timer only sees the net count. A young-generation collection costs
microseconds to a few milliseconds.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

_holders = 0
_was_enabled = True


class UiThreadGC(QObject):
    """Held by a window: automatic collection off from ``start`` until ``stop``, collected on a timer."""

    def __init__(self, parent: QObject | None = None, interval_ms: int = 1000) -> None:
        super().__init__(parent)
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.collect)
        self._active = False

    def start(self) -> None:
        global _holders, _was_enabled
        if self._active:
            return
        if _holders == 0:
            _was_enabled = gc.isenabled()
        _holders += 1
        gc.disable()
        self._active = True
        self._timer.start()

    def stop(self) -> None:
        """Collect once more here, on the UI thread; the last holder restores automatic collection."""
        global _holders
        if not self._active:
            return
        self._active = False
        self._timer.stop()
        _holders -= 1
        gc.collect()
        if _holders == 0 and _was_enabled:
            gc.enable()

    @staticmethod
    def collect() -> None:
        """Collect the young generation, and the older ones whose counts passed their thresholds."""
        _, t1, t2 = gc.get_threshold()
        _, c1, c2 = gc.get_count()
        gen = 0
        if c1 > t1:
            gen = 1
            if c2 > t2:
                gen = 2
        gc.collect(gen)

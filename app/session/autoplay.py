"""Autoplay: a timer that steps through cycles at the chosen speed (the controller says what a step is)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

AUTOPLAY_SPEEDS = {"0.5 cycles/s": 2000, "1 cycle/s": 1000, "2 cycles/s": 500, "5 cycles/s": 200, "10 cycles/s": 100}
DEFAULT_SPEED = "2 cycles/s"


class Autoplay(QObject):
    """On or off, at one of :data:`AUTOPLAY_SPEEDS`; calls ``tick`` at that pace while on."""

    changed = Signal(bool)

    def __init__(self, tick: Callable[[], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._ms = AUTOPLAY_SPEEDS[DEFAULT_SPEED]
        self._timer = QTimer(self)
        self._timer.timeout.connect(tick)

    @property
    def on(self) -> bool:
        return self._timer.isActive()

    def set_speed(self, speed: str) -> None:
        """One of :data:`AUTOPLAY_SPEEDS`."""
        self._ms = AUTOPLAY_SPEEDS[speed]
        self._timer.setInterval(self._ms)

    def set(self, on: bool) -> None:
        if on:
            self._timer.start(self._ms)
        else:
            self._timer.stop()
        self.changed.emit(on)

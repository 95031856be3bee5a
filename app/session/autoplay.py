"""Autoplay: a timer that steps through cycles at the chosen speed, a replay's recorded ones or the live session's
next (decoded through the controller, given as a :class:`Stepper`)."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QObject, QTimer, Signal

from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import LiveSource

AUTOPLAY_SPEEDS = {"0.5 cycles/s": 2000, "1 cycle/s": 1000, "2 cycles/s": 500, "5 cycles/s": 200, "10 cycles/s": 100}
DEFAULT_SPEED = "2 cycles/s"


class Stepper(Protocol):
    """What decodes the live session's next cycle (the session controller)."""

    @property
    def busy(self) -> bool:
        """The engine does what the user waits for."""

    @property
    def live_done(self) -> bool:
        """No live session is decoding."""

    def step(self) -> None:
        """Decode one cycle (starting a live session if none is open)."""


class Autoplay(QObject):
    """On or off, at one of :data:`AUTOPLAY_SPEEDS`: each tick shows ``model``'s next recorded cycle, or has
    ``stepper`` decode the next live one; it stops itself at the end."""

    changed = Signal(bool)

    def __init__(self, model: SessionModel, stepper: Stepper, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.stepper = stepper
        self._ms = AUTOPLAY_SPEEDS[DEFAULT_SPEED]
        self._timer = QTimer(self)
        self._timer.timeout.connect(self._tick)

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

    def stop_if_replay(self) -> None:
        """A live session starts: autoplay through a replay stops (through a live one it goes on)."""
        if self.on and not isinstance(self.model.source, LiveSource):
            self.set(False)

    def _tick(self) -> None:
        model = self.model
        if isinstance(model.source, LiveSource) or model.source is None:
            if self.stepper.live_done and model.source is not None:
                self.set(False)
            elif not self.stepper.busy:
                self.stepper.step()
        elif model.index >= model.n_cycles - 1:
            self.set(False)
        else:
            model.move(1)

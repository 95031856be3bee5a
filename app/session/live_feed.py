"""The live session's cycles into the session model: each one as it is decoded when the user steps, at most every
:data:`LIVE_REFRESH_MS` while a Run decodes, so a fast GPU cannot flood the UI."""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer

from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import LiveSource

#: Live cycles arriving faster than this are shown at most this often (ms).
LIVE_REFRESH_MS = 40


class LiveFeed(QObject):
    """Appends the live session's cycles to ``model`` and says when to show the latest (the controller's part)."""

    def __init__(self, model: SessionModel, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(LIVE_REFRESH_MS)
        self._timer.timeout.connect(self.show_latest)

    def append(self, cycle) -> bool:
        """Add a decoded cycle (a :class:`~specviz_core.session.session.RecordedCycle`) to the live session shown; False
        (and nothing done) when the model shows no live session."""
        if not isinstance(self.model.source, LiveSource):
            return False
        record = cycle.record
        follow = self.model.follow_live
        self.model.append(record, cycle.summary, follow=False)  # shown below, or by the refresh timer
        if follow:
            self.model.set_cycle(record.index)
        elif not self._timer.isActive():
            self._timer.start()
        return True

    def show_latest(self) -> None:
        """The live session's last cycle, now."""
        if isinstance(self.model.source, LiveSource):
            self.model.set_cycle(self.model.n_cycles - 1)

    def flush(self) -> None:
        """The engine stopped decoding: the last cycle shows, no refresh is pending."""
        self._timer.stop()
        self.show_latest()

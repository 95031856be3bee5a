"""A one-line label that gives way: it shrinks to any width, shows as much of its text as fits with an ellipsis,
and the whole text in its tooltip. The status bar's lifecycle line is one: beside the cycle's facts in a narrow
window (presentation mode at 1280x720), a plain label kept its full width and the two were drawn one over the
other."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QStatusBar, QWidget


class ElidedLabel(QLabel):
    """A :class:`QLabel` for one line of plain text that elides on the right rather than push its neighbours."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(0)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        super().setText(text)
        self.setToolTip(text if text else "")

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        painter = QPainter(self)
        rect = self.contentsRect()
        shown = self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, rect.width())
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(rect, int(self.alignment() | Qt.AlignmentFlag.AlignVCenter), shown)

    def shown_text(self) -> str:
        """The text as drawn at the label's width now (what a user reads)."""
        return self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, self.contentsRect().width())


class ElidingStatusBar(QStatusBar):
    """A status bar whose passing messages (:meth:`showMessage`) end in an ellipsis where they would run under its
    permanent widgets (Qt draws them whole, one over the other, in a narrow window)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._permanent: list[QWidget] = []

    def addPermanentWidget(self, widget: QWidget, stretch: int = 0) -> None:  # noqa: N802 - Qt's name
        self._permanent.append(widget)
        super().addPermanentWidget(widget, stretch)

    def message_rect(self) -> QRect:
        """Where a passing message is drawn: from the left edge to the first visible permanent widget."""
        right = min((w.geometry().left() for w in self._permanent if w.isVisible()), default=self.width())
        return QRect(6, 0, max(0, right - 12), self.height())

    def shown_message(self) -> str:
        """The passing message as drawn now (elided to :meth:`message_rect`)."""
        return self.fontMetrics().elidedText(self.currentMessage(), Qt.TextElideMode.ElideRight,
                                             self.message_rect().width())

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        if not self.currentMessage():
            super().paintEvent(event)
            return
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(self.message_rect(), int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                         self.shown_message())

"""The spine-break callout of the draft tree: a box above the tree with what the target wanted at the first
rejected spine node and its top-5, and a dashed leader line down to that node."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QPainterPath, QPalette, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene, QGraphicsSimpleTextItem

from specviz_app.panels.tree.text import callout_text
from specviz_app.theme import REJECTED
from specviz_core.analysis.spine import SpineAnalysis
from specviz_core.records import Node
from specviz_core.runtime.vocab import TokenText


class Callout:
    """The callout's scene items; ``place`` puts it above the broken node (or hides it) and grows the bounds."""

    def __init__(self, scene: QGraphicsScene, font: QFont) -> None:
        self._box = scene.addPath(QPainterPath())
        self._box.setZValue(3)
        self._text = QGraphicsSimpleTextItem(self._box)
        self._text.setFont(font)
        self._leader = scene.addPath(QPainterPath())
        self._leader.setZValue(0.5)
        self._box.setToolTip("The target's top-5 tokens at the first rejected spine position (from the verify "
                             "row of its parent)")

    def set_font(self, font: QFont) -> None:
        self._text.setFont(font)

    def text(self) -> str:
        return self._text.text() if self._box.isVisible() else ""

    def visible(self) -> bool:
        return self._box.isVisible()

    def rect(self) -> QRectF:
        return self._box.sceneBoundingRect()

    def hide(self) -> None:
        self._box.setVisible(False)
        self._leader.setVisible(False)

    def place(self, spine: SpineAnalysis, broken: Node | None, item: QGraphicsItem | None, vocab: TokenText,
              pal: QPalette, bounds: QRectF, margin: float) -> QRectF:
        """Above the tree's ``bounds``, its leader down to ``item`` (the broken node's box); the grown bounds."""
        if broken is None or item is None:
            self.hide()
            return bounds
        self._text.setText(callout_text(spine, broken, vocab))
        tr = self._text.boundingRect()
        box = QRectF(0, 0, tr.width() + 12, tr.height() + 8)
        path = QPainterPath()
        path.addRoundedRect(box, 5, 5)
        self._box.setPath(path)
        self._box.setBrush(pal.color(QPalette.ColorRole.Base))
        self._box.setPen(QPen(QColor(REJECTED), 1.5))
        self._text.setBrush(pal.color(QPalette.ColorRole.Text))
        self._text.setPos(6, 4)
        node_rect = item.sceneBoundingRect()
        cx = max(margin, node_rect.center().x() - 24)
        cy = bounds.top() - box.height() - 14
        self._box.setPos(cx, cy)
        leader = QPainterPath(QPointF(node_rect.center().x(), cy + box.height()))
        leader.lineTo(node_rect.center().x(), node_rect.top() - 1)
        self._leader.setPath(leader)
        self._leader.setPen(QPen(QColor(REJECTED), 1.2, Qt.PenStyle.DashLine))
        self._box.setVisible(True)
        self._leader.setVisible(True)
        return bounds.united(QRectF(cx - margin, cy - margin, box.width() + 2 * margin, box.height() + margin))

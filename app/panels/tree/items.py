"""The draft tree's scene items and their look: node boxes, the strip above the drawing, brushes and pens."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QPainterPath, QPen
from PySide6.QtWidgets import (
    QGraphicsPathItem,
    QGraphicsSimpleTextItem,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QWidget,
)

from specviz_app.theme import ACCEPTED, GATED, REJECTED, source_color
from specviz_core.viewer.tree_layout import BONUS

MIN_LABEL_PX = 7.0
"""Below this many screen pixels a label is left out (semantic zoom): the box stays, its tooltip too."""

Style = tuple[QBrush, QPen, QColor] | QPen
"""A node's (brush, pen, text colour), or an edge's pen."""


def _text_color(fill: QColor) -> QColor:
    lum = 0.2126 * fill.redF() + 0.7152 * fill.greenF() + 0.0722 * fill.blueF()
    return QColor("#111111") if lum > 0.55 else QColor("#ffffff")


class NodeItem(QGraphicsPathItem):
    """One node box, the bonus token (``node_id == BONUS``) or a "+N gated" marker (``is_marker(node_id)``).
    Brush and pen are the path item's; the label is a child text item (drawn by Qt, no Python per paint), left
    out by the view when it would be too small to read."""

    _paths: dict[tuple[float, float, bool], QPainterPath] = {}

    def __init__(self, font: QFont) -> None:
        super().__init__()
        self.node_id = BONUS
        self.label = QGraphicsSimpleTextItem(self)
        self.label.setFont(font)
        self.rect = QRectF()
        self._text = ""
        self._fg = QColor()
        self._shape: tuple[float, float, bool] | None = None
        self.setZValue(2)

    @property
    def font(self) -> QFont:
        return self.label.font()

    @font.setter
    def font(self, font: QFont) -> None:
        self.label.setFont(font)

    def text(self) -> str:
        return self._text

    def set_label(self, text: str, width: float, height: float, bonus: bool, fg: QColor, text_w: float,
                  text_h: float) -> None:
        """The box's shape and label; ``text_w`` and ``text_h`` are the label's size in the item's font."""
        if text != self._text:
            self._text = text
            self.label.setText(text)
        if fg != self._fg:
            self._fg = QColor(fg)
            self.label.setBrush(fg)
        self.label.setPos((width - text_w) / 2, (height - text_h) / 2)
        key = (width, height, bonus)
        if self._shape != key:
            self._shape = key
            self.rect = QRectF(0, 0, width, height)
            path = self._paths.get(key)
            if path is None:
                path = QPainterPath()
                r = height * 0.27
                path.addRoundedRect(self.rect, r, r)
                if bonus:  # a double outline: the pen strokes both outlines, the winding fill covers both
                    path.addRoundedRect(QRectF(2.5, 2.5, width - 5, height - 5), r * 0.6, r * 0.6)
                    path.setFillRule(Qt.FillRule.WindingFill)
                self._paths[key] = path
            self.setPath(path)

    def label_shown(self, scale: float) -> bool:
        """Whether the label is drawn at view scale ``scale`` (semantic zoom)."""
        return self.label.isVisible() and label_readable(self.font.pixelSize(), scale)


def label_readable(font_px: float, scale: float) -> bool:
    return font_px * scale >= MIN_LABEL_PX


class TreeHeader(QWidget):
    """The strip above the drawing: a legend of the sources present, the gated toggle and Fit."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setAutoFillBackground(True)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 1, 4, 1)
        lay.setSpacing(4)
        self.legend = QLabel(self)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        # A narrow view clips the legend, never the buttons.
        self.legend.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        lay.addWidget(self.legend, 1)
        self.gated = QToolButton(self, text="Gated", checkable=True, checked=False)
        self.gated.setToolTip("Show every gated node: candidates cut by the confidence gate or the budget, never "
                              "verified.\nOff, each node's gated candidates are one \"+N gated\" box: click it to open it")
        self.gated.setAutoRaise(True)
        self.fit = QToolButton(self, text="Fit")
        self.fit.setToolTip("Fit the tree in the view, labels kept readable: a tree too large for that scrolls "
                            "(or double-click the drawing). Press again to see it whole, its labels as small as that "
                            "takes (hover still names every box)")
        self.fit.setAutoRaise(True)
        lay.addWidget(self.gated)
        lay.addWidget(self.fit)


def make_style(key: tuple[str, str], text_fg: QColor) -> Style:
    """The look of a node (source, state: gated / broken / accepted / plain / bonus), of a "+N gated" marker
    (``("marker", "gated")``), or of an edge (``"edge"``, kind: plain / gated / accepted); ``text_fg`` is the
    palette's text colour."""
    source, state = key
    if source == "marker":
        dim = QColor(text_fg)
        dim.setAlpha(170)
        return QBrush(Qt.BrushStyle.NoBrush), QPen(QColor(GATED), 1.2, Qt.PenStyle.DotLine), dim
    if source == "edge":
        edge = QColor(text_fg)
        edge.setAlpha(110)
        return {"plain": QPen(edge, 1.0), "gated": QPen(QColor(GATED), 1.0, Qt.PenStyle.DashLine),
                "accepted": QPen(QColor(ACCEPTED), 3.0)}[state]
    fill = source_color(source)
    if state == "gated":
        return QBrush(Qt.BrushStyle.NoBrush), QPen(fill, 1.3, Qt.PenStyle.DashLine), text_fg
    pen = {"bonus": QPen(fill.darker(150), 1.2), "broken": QPen(QColor(REJECTED), 2.6),
           "accepted": QPen(QColor(ACCEPTED), 2.6), "plain": QPen(fill.darker(160), 0.8)}[state]
    return QBrush(fill), pen, _text_color(fill)

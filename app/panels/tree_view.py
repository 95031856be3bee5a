"""Draft tree: the current cycle's tree, root on the left, one layer per depth.

Nodes are boxes labelled with their token (whitespace visible) and filled with their source's colour; gated nodes
are hollow and dashed; the accepted path is bold and ends in the bonus token (a double-outlined ★ box); the first
rejected spine node has a red outline and a callout with the token the target wanted there and its top-5.
Wheel zooms, dragging pans, a double-click fits; clicking a node selects it in the model.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QHelpEvent,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
    QResizeEvent,
    QTransform,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QToolTip,
    QWidget,
)

from specviz_core.records import CycleRecord, Node
from specviz_core.spine import SpineAnalysis, analyze_spine
from specviz_core.viewer.session_model import SessionModel

from ..theme import REJECTED
from .base import PanelMixin, placeholder
from .tree_items import NodeItem, Style, TreeHeader, make_style
from .tree_layout import BONUS, MARGIN, MIN_W, NODE_H, layout_tree
from .tree_text import HELP, bonus_tip, callout_text, legend_html, legend_sources, legend_tip, node_tip

log = logging.getLogger(__name__)
FONT_PX, PAD_X = 12, 4.0
MAX_FIT, MIN_ZOOM, MAX_ZOOM = 1.4, 0.08, 8.0


class TreeView(PanelMixin, QGraphicsView):
    """The current cycle's draft tree. ``fit()`` fits it; ``node_items()`` maps node ids to their items."""

    title = "Draft tree"

    def __init__(self, model: SessionModel, parent: QWidget | None = None) -> None:
        QGraphicsView.__init__(self, parent)
        self._scene = QGraphicsScene(self)
        self._scene.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.NoIndex)
        self.setScene(self._scene)
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.FullViewportUpdate)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QGraphicsView.Shape.NoFrame)
        self.setMinimumSize(200, 120)
        self.show_gated = True
        self._font = QFont(self.font())
        self._font.setPixelSize(FONT_PX)
        self._fm = QFontMetricsF(self._font)
        self._widths: dict[str, float] = {}
        self._style: dict[tuple[str, str], Style] = {}
        self._pool: list[NodeItem] = []
        self._items: dict[int, NodeItem] = {}
        self._edges = {k: self._scene.addPath(QPainterPath()) for k in ("plain", "gated", "accepted")}
        for k, z in (("plain", 0), ("gated", 0), ("accepted", 1)):
            self._edges[k].setZValue(z)
        self._halo = self._scene.addPath(QPainterPath())
        self._halo.setZValue(1.5)
        self._leader = self._scene.addPath(QPainterPath())
        self._leader.setZValue(0.5)
        self._callout = self._scene.addPath(QPainterPath())
        self._callout.setZValue(3)
        self._callout_text = QGraphicsSimpleTextItem(self._callout)
        self._callout_text.setFont(self._font)
        self.broken_node: Node | None = None
        """The first rejected spine node of the current cycle, if any."""
        self._auto_fit = True
        self._error: str | None = None
        self._press: QPointF | None = None
        self.header = TreeHeader(self)
        self.header.gated.toggled.connect(self.set_show_gated)
        self.header.fit.clicked.connect(self.fit)
        self.connect_model(model)
        self._redraw()

    # -- model callbacks ----------------------------------------------------------------------------------------------
    def on_session_opened(self, source) -> None:
        self._redraw()

    def on_session_closed(self) -> None:
        self._redraw()

    def on_cycle_changed(self, record: CycleRecord) -> None:
        self._redraw()
        self.fit()

    def on_presentation_changed(self, on: bool) -> None:
        self.fit()

    def on_node_selected(self, node_id: int | None) -> None:
        item = self._items.get(node_id) if node_id is not None else None
        if item is None:
            self._halo.setVisible(False)
            return
        path = QPainterPath()
        path.addRoundedRect(item.mapRectToScene(item.path().boundingRect()).adjusted(-3.5, -3.5, 3.5, 3.5), 6, 6)
        self._halo.setPath(path)
        self._halo.setPen(QPen(self.palette().color(QPalette.ColorRole.Highlight), 3.0))
        self._halo.setVisible(True)

    # -- public -------------------------------------------------------------------------------------------------------
    def node_items(self) -> dict[int, NodeItem]:
        """Visible node items by node id (the bonus token under ``BONUS``)."""
        return dict(self._items)

    def callout_text(self) -> str:
        """The text of the spine-break callout ('' when there is none)."""
        return self._callout_text.text() if self._callout.isVisible() else ""

    def legend_sources(self) -> list[str]:
        rec = self.model.record
        return legend_sources(rec) if rec is not None else []

    def tooltip_for(self, node_id: int) -> str:
        """The hover text of a node (or of the bonus token, ``BONUS``), built when asked."""
        rec = self.model.record
        if rec is None:
            return ""
        nodes = rec.node_by_id
        if node_id == BONUS:
            return bonus_tip(rec, nodes[rec.accepted_path[-1] if rec.accepted_path else 0], self.model.vocab)
        if node_id not in nodes:
            return ""
        broken = self.broken_node is not None and node_id == self.broken_node.id
        return node_tip(nodes[node_id], self.model.vocab, broken)

    def set_show_gated(self, show: bool) -> None:
        self.show_gated = show
        if self.header.gated.isChecked() != show:
            self.header.gated.setChecked(show)
        self._redraw()
        self.fit()

    def fit(self) -> None:
        """Fit the whole tree in the view (never zooming in past 140%); the view refits on resize until zoomed."""
        self._auto_fit = True
        rect = self._scene.sceneRect()
        vp = self.viewport().rect()
        if rect.isEmpty() or vp.width() < 10 or vp.height() < 10:
            return
        s = min(vp.width() / rect.width(), vp.height() / rect.height(), MAX_FIT)
        self.setTransform(QTransform.fromScale(s, s))
        self.centerOn(rect.center())

    # -- drawing ------------------------------------------------------------------------------------------------------
    def _width(self, label: str) -> float:
        w = self._widths.get(label)
        if w is None:
            w = self._widths[label] = max(MIN_W, self._fm.horizontalAdvance(label) + 2 * PAD_X)
        return w

    def _redraw(self) -> None:
        """Rebuild the drawing; a record the panel cannot draw gives a short message, never a traceback."""
        self._error = None
        try:
            self._rebuild()
        except Exception as exc:  # noqa: BLE001 - one odd record must not stop the other panels' updates
            log.exception("draft tree: cannot draw cycle %s", self.model.index)
            self._error = f"Cannot draw this cycle's tree ({type(exc).__name__}: {exc})"
            for item in (*self._pool, self._halo, self._callout, self._leader, *self._edges.values()):
                item.setVisible(False)
            self._items = {}
            self.viewport().update()

    def _rebuild(self) -> None:
        rec = self.model.record
        self._items = {}
        if rec is None:
            for item in (*self._pool, self._halo, self._callout, self._leader, *self._edges.values()):
                item.setVisible(False)
            self._scene.setSceneRect(QRectF(0, 0, 1, 1))
            self._set_legend(None)
            self.viewport().update()
            return
        lay = layout_tree(rec, self.show_gated, self.model.vocab.label, self._width)
        nodes, children, labels, pos = lay.nodes, lay.children, lay.labels, lay.pos
        spine = analyze_spine(rec)
        self.broken_node = broken = rec.node_by_id[spine.broken] if spine.broken is not None else None
        while len(self._pool) < len(pos):
            item = NodeItem(self._font)
            self._scene.addItem(item)
            self._pool.append(item)
        for item, i in zip(self._pool, pos):
            if i == BONUS:
                key = ("bonus", "bonus")
            else:
                n = nodes[i]
                key = (n.source, "gated" if n.gated else "broken" if broken is not None and i == broken.id
                       else "accepted" if n.accepted else "plain")
            brush, pen, fg = self._style_for(key)
            item.node_id = i
            item.set_label(labels[i], self._width(labels[i]), i == BONUS, fg)
            item.setPos(*pos[i])
            item.setBrush(brush)
            item.setPen(pen)
            item.setVisible(True)
            self._items[i] = item
        for item in self._pool[len(pos):]:
            if item.isVisible():
                item.setVisible(False)

        # Edges: parent's right side to child's left side, grouped by style into three path items.
        paths = {k: QPainterPath() for k in self._edges}
        accepted = {0, *rec.accepted_path}
        half = NODE_H / 2
        for parent, kids in children.items():
            ax, ay = pos[parent]
            ax += self._width(labels[parent])
            ay += half
            for k in kids:
                bx, by = pos[k]
                by += half
                kind = ("accepted" if k == BONUS or (k in accepted and parent in accepted)
                        else "gated" if nodes[k].gated else "plain")
                p = paths[kind]
                p.moveTo(ax, ay)
                mx = (ax + bx) / 2
                p.cubicTo(mx, ay, mx, by, bx, by)
        for k, item in self._edges.items():
            item.setPath(paths[k])
            item.setPen(self._style_for(("edge", k)))
            item.setVisible(True)

        bounds = QRectF(0, 0, lay.width, lay.height)
        bounds = self._place_callout(spine, broken, bounds)
        self._scene.setSceneRect(bounds)
        self._set_legend(rec)
        self.header.gated.setEnabled(not self.show_gated or any(n.gated for n in rec.nodes))
        self.on_node_selected(self.model.selected_node)

    def _style_for(self, key: tuple[str, str]) -> Style:
        """A node's or edge's look (see ``make_style``), cached until the palette changes."""
        style = self._style.get(key)
        if style is None:
            style = self._style[key] = make_style(key, self.palette().color(QPalette.ColorRole.Text))
        return style

    def _place_callout(self, spine: SpineAnalysis, broken: Node | None, bounds: QRectF) -> QRectF:
        """The spine-break callout sits above the tree with a leader line down to the broken node."""
        item = self._items.get(broken.id) if broken is not None else None
        if item is None:
            self._callout.setVisible(False)
            self._leader.setVisible(False)
            return bounds
        pal = self.palette()
        self._callout_text.setText(callout_text(spine, broken, self.model.vocab))
        tr = self._callout_text.boundingRect()
        box = QRectF(0, 0, tr.width() + 12, tr.height() + 8)
        path = QPainterPath()
        path.addRoundedRect(box, 5, 5)
        self._callout.setPath(path)
        self._callout.setBrush(pal.color(QPalette.ColorRole.Base))
        self._callout.setPen(QPen(QColor(REJECTED), 1.5))
        self._callout_text.setBrush(pal.color(QPalette.ColorRole.Text))
        self._callout_text.setPos(6, 4)
        node_rect = item.mapRectToScene(item.path().boundingRect())
        cx = max(MARGIN, node_rect.center().x() - 24)
        cy = bounds.top() - box.height() - 14
        self._callout.setPos(cx, cy)
        self._callout.setToolTip("The target's top-5 tokens at the first rejected spine position (from the verify "
                                 "row of its parent)")
        leader = QPainterPath(QPointF(node_rect.center().x(), cy + box.height()))
        leader.lineTo(node_rect.center().x(), node_rect.top() - 1)
        self._leader.setPath(leader)
        self._leader.setPen(QPen(QColor(REJECTED), 1.2, Qt.PenStyle.DashLine))
        self._callout.setVisible(True)
        self._leader.setVisible(True)
        return bounds.united(QRectF(cx - MARGIN, cy - MARGIN, box.width() + 2 * MARGIN, box.height() + MARGIN))

    def _set_legend(self, rec: CycleRecord | None) -> None:
        text = "" if rec is None else legend_html(rec, self.broken_node is not None)
        if self.header.legend.text() != text:
            self.header.legend.setText(text)
            self.header.legend.setToolTip(legend_tip(rec) if rec is not None else HELP)

    # -- interaction --------------------------------------------------------------------------------------------------
    def message(self) -> str:
        """The text shown in place of a tree ('' while a tree is drawn)."""
        if self.model.record is not None and self._error is None:
            return ""
        return self._error or placeholder(self.model)

    def drawForeground(self, painter: QPainter, rect: QRectF) -> None:
        text = self.message()
        if not text:
            return
        painter.save()
        painter.resetTransform()
        painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
        painter.drawText(self.viewport().rect().adjusted(8, 8, -8, -8),
                         Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, text)
        painter.restore()

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            item = self.itemAt(event.pos())
            if isinstance(item, NodeItem):
                QToolTip.showText(event.globalPos(), self.tooltip_for(item.node_id), self.viewport())
                return True
        return super().viewportEvent(event)

    def wheelEvent(self, event: QWheelEvent) -> None:
        cur = self.transform().m11()
        new = min(max(cur * 1.0015 ** event.angleDelta().y(), MIN_ZOOM), MAX_ZOOM)
        self.scale(new / cur, new / cur)
        self._auto_fit = False
        event.accept()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._press = event.position()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._press is not None and (event.position() - self._press).manhattanLength() > 3:
            self._auto_fit = False
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        super().mouseReleaseEvent(event)
        press, self._press = self._press, None
        if press is None or (event.position() - press).manhattanLength() > 3 or \
                event.button() != Qt.MouseButton.LeftButton:
            return
        event.accept()
        item: QGraphicsItem | None = self.itemAt(event.position().toPoint())
        if item is None:
            self.model.select_node(None)
        elif isinstance(item, NodeItem) and item.node_id >= 0:
            self.model.select_node(item.node_id)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        self.fit()
        event.accept()

    def resizeEvent(self, event: QResizeEvent) -> None:
        h = self.header.sizeHint().height()
        self.setViewportMargins(0, h, 0, 0)
        self.header.setGeometry(0, 0, self.width(), h)
        super().resizeEvent(event)
        if self._auto_fit:
            self.fit()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._style.clear()
            self._redraw()


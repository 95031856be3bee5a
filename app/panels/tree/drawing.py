"""The draft tree's scene: node boxes (pooled across cycles), the three edge paths, the selection halo, the keyboard
cursor and the spine-break callout, built from a :class:`~.tree_layout.TreeLayout`."""

from __future__ import annotations

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QFont, QFontInfo, QFontMetricsF, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsPathItem, QGraphicsScene

from specviz_app.panels.tree.callout import Callout
from specviz_app.panels.tree.items import NodeItem, Style, label_readable, make_style
from specviz_core.records import CycleRecord, Node
from specviz_core.viewer.tree_layout import BONUS, Metrics, TreeLayout, is_marker

MinimapBox = tuple[QRectF, QColor]


class PathItem(QGraphicsPathItem):
    """A path item whose bounds are its control points plus the pen, not its stroked outline: Qt strokes the whole
    path to bound it, which for an edge path of a hundred curves costs more than drawing it."""

    def __init__(self) -> None:
        super().__init__()
        self._bounds = QRectF()

    def setPath(self, path: QPainterPath) -> None:  # noqa: N802 - Qt's name
        self.prepareGeometryChange()
        super().setPath(path)
        self._grow()

    def setPen(self, pen: QPen) -> None:  # noqa: N802 - Qt's name
        self.prepareGeometryChange()
        super().setPen(pen)
        self._grow()

    def _grow(self) -> None:
        w = self.pen().widthF() / 2 + 1
        self._bounds = self.path().controlPointRect().adjusted(-w, -w, w, w)

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return self._bounds


class TreeDrawing:
    """Everything drawn in the tree's scene. ``items`` maps each drawn box's id to its item."""

    def __init__(self, scene: QGraphicsScene, font: QFont) -> None:
        self.scene = scene
        self.items: dict[int, NodeItem] = {}
        self._pool: list[NodeItem] = []
        self._style: dict[tuple[str, str], Style] = {}
        self._text_fg = QColor()
        self.edges = {k: PathItem() for k in ("plain", "gated", "accepted")}
        for item in self.edges.values():
            scene.addItem(item)
        self.edges["accepted"].setZValue(1)
        self.halo = scene.addPath(QPainterPath())
        self.halo.setZValue(1.5)
        self.cursor = scene.addPath(QPainterPath())
        self.cursor.setZValue(1.6)
        self.callout = Callout(scene, font)
        self._widths: dict[str, tuple[float, float]] = {}
        self.labels_on = True
        self.set_font(font)

    # -- fonts and looks ---------------------------------------------------------------------------------------------
    def set_font(self, font: QFont) -> None:
        """Labels in ``font`` at its pixel size; the boxes and gaps scale with it (``metrics``)."""
        px = QFontInfo(font).pixelSize()
        self.font = QFont(font)
        self.font.setPixelSize(px)
        self._fm = QFontMetricsF(self.font)
        self.metrics = Metrics(float(px))
        self._widths.clear()
        for item in self._pool:
            item.font = self.font
        self.callout.set_font(self.font)

    def set_text_color(self, fg: QColor) -> None:
        """The palette's text colour changed: every look is made again."""
        self._text_fg = QColor(fg)
        self._style.clear()

    def _sizes(self, label: str) -> tuple[float, float]:
        """(box width, text width) of a label, cached per font."""
        sizes = self._widths.get(label)
        if sizes is None:
            adv = self._fm.horizontalAdvance(label)
            sizes = self._widths[label] = (max(self.metrics.min_w, adv + self.font.pixelSize() * 0.7), adv)
        return sizes

    def box_width(self, label: str) -> float:
        return self._sizes(label)[0]

    def show_labels(self, scale: float) -> None:
        """Semantic zoom: labels drawn only where ``scale`` makes them readable."""
        on = label_readable(self.font.pixelSize(), scale)
        if on != self.labels_on:
            self.labels_on = on
            for item in self._pool:
                item.label.setVisible(on)

    def style(self, key: tuple[str, str]) -> Style:
        """A node's or edge's look (see ``make_style``), cached until the palette changes."""
        style = self._style.get(key)
        if style is None:
            style = self._style[key] = make_style(key, self._text_fg)
        return style

    # -- building ----------------------------------------------------------------------------------------------------
    def hide(self) -> None:
        for item in (*self._pool, self.halo, self.cursor, *self.edges.values()):
            item.setVisible(False)
        self.callout.hide()
        self.items = {}

    def build(self, rec: CycleRecord, lay: TreeLayout, broken: Node | None) -> list[MinimapBox]:
        """Boxes and edges for ``lay``; ``broken`` is the first rejected spine node. Returns the overview's boxes."""
        nodes, pos, labels = lay.nodes, lay.pos, lay.labels
        text_h = self._fm.height()
        self.items = {}
        minimap = []
        for i, item in self._assign(pos, labels).items():
            if i == BONUS:
                key = ("bonus", "bonus")
            elif is_marker(i):
                key = ("marker", "gated")
            else:
                n = nodes[i]
                key = (n.source, "gated" if n.gated else "broken" if broken is not None and i == broken.id
                       else "accepted" if n.accepted else "plain")
            brush, pen, fg = self.style(key)
            item.node_id = i
            item.set_label(labels[i], lay.widths[i], lay.node_h, i == BONUS, fg, self._sizes(labels[i])[1], text_h)
            item.setPos(*pos[i])
            item.setBrush(brush)
            item.setPen(pen)
            if not item.isVisible():
                item.setVisible(True)
            self.items[i] = item
            minimap.append((QRectF(*lay.rect(i)), brush.color() if key[1] != "gated" else pen.color()))
        self._build_edges(rec, lay)
        return minimap

    def _assign(self, boxes, labels: dict[int, str]) -> dict[int, NodeItem]:
        """A pooled item for every box, one that already shows the box's label where there is one: laying a
        label's text out again is most of the cost of drawing a new cycle. Items left over are hidden."""
        free: dict[str, list[NodeItem]] = {}
        for item in self._pool:
            free.setdefault(item.text(), []).append(item)
        out: dict[int, NodeItem] = {}
        rest = []
        for i in boxes:
            same = free.get(labels[i])
            if same:
                out[i] = same.pop()
            else:
                rest.append(i)
        spare = [item for items in free.values() for item in items]
        for i in rest:
            if spare:
                out[i] = spare.pop()
            else:
                item = out[i] = NodeItem(self.font)
                item.label.setVisible(self.labels_on)
                self.scene.addItem(item)
                self._pool.append(item)
        for item in spare:
            if item.isVisible():
                item.setVisible(False)
        return out

    def _build_edges(self, rec: CycleRecord, lay: TreeLayout) -> None:
        """Parent's right side to child's left side, grouped by style into three path items."""
        paths = {k: QPainterPath() for k in self.edges}
        accepted = {0, *rec.accepted_path}
        half = lay.node_h / 2
        for parent, kids in lay.children.items():
            ax, ay = lay.pos[parent]
            ax += lay.widths[parent]
            ay += half
            for k in kids:
                bx, by = lay.pos[k]
                by += half
                kind = ("accepted" if k == BONUS or (k in accepted and parent in accepted)
                        else "gated" if is_marker(k) or lay.nodes[k].gated else "plain")
                p = paths[kind]
                p.moveTo(ax, ay)
                mx = (ax + bx) / 2
                p.cubicTo(mx, ay, mx, by, bx, by)
        for k, item in self.edges.items():
            item.setPath(paths[k])
            item.setPen(self.style(("edge", k)))
            item.setVisible(True)

    @staticmethod
    def ring(ring: QGraphicsPathItem, item: NodeItem | None, pen: QPen, pad: float) -> None:
        """Outline ``item`` with ``ring`` (the halo or the cursor), ``pad`` pixels out; None hides it."""
        if item is None:
            ring.setVisible(False)
            return
        path = QPainterPath()
        path.addRoundedRect(item.mapRectToScene(item.path().boundingRect()).adjusted(-pad, -pad, pad, pad), 6, 6)
        ring.setPath(path)
        ring.setPen(pen)
        ring.setVisible(True)

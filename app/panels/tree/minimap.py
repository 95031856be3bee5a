"""The draft tree's overview: the whole tree in miniature in a corner of the view, with the part in view
outlined, shown while the tree is larger than the view. Click or drag in it to move the view there.

It covers the nodes under it, so the view scrolls past the tree's right and bottom edges by its size
(:meth:`TreeMinimap.scroll_room`): any node can be scrolled clear of it, and :meth:`TreeMinimap.clearance` says
how far to scroll to uncover the ones that matter (the accepted path, the selection)."""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPainterPath, QPaintEvent, QPalette, QPen, QPixmap
from PySide6.QtWidgets import QWidget

MAX_W, MAX_H, PAD = 190, 130, 4
GAP = 6
"""Pixels between the overview and the viewport's edges."""
SHARE = 0.3
"""The overview takes at most this share of the view's width and height."""


class TreeMinimap(QWidget):
    """``set_tree`` the boxes (scene rectangles and fills) and the scene rectangle, ``set_view`` the part in view;
    emits ``moved`` with the scene point to centre on."""

    moved = Signal(QPointF)

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("The whole tree: the outlined part is in view. Click or drag to move there")
        self._boxes: list[tuple[QRectF, QColor]] = []
        self._scene = QRectF()
        self._view = QRectF()
        self._scale = 1.0
        self._room = (MAX_W, MAX_H)
        self._picture: QPixmap | None = None
        """The boxes drawn once per tree: a repaint only draws the outline of the part in view over it."""
        self.hide()

    def set_tree(self, boxes: list[tuple[QRectF, QColor]], scene: QRectF) -> None:
        self._boxes, self._scene = boxes, QRectF(scene)
        self._resize()

    def set_room(self, view_w: int, view_h: int) -> None:
        """The view's size: the overview takes a corner of it."""
        room = (min(MAX_W, int(view_w * SHARE)), min(MAX_H, int(view_h * SHARE)))
        if room != self._room:
            self._room = room
            self._resize()

    def _resize(self) -> None:
        scene = self._scene
        if scene.isEmpty():
            return
        w, h = self._room
        self._scale = max(1e-3, min((w - 2 * PAD) / scene.width(), (h - 2 * PAD) / scene.height()))
        self.resize(round(scene.width() * self._scale) + 2 * PAD, round(scene.height() * self._scale) + 2 * PAD)
        self._picture = None
        self.update()

    def follow(self, visible: QRectF, viewport: QRect, has_tree: bool) -> None:
        """Show the overview in the viewport's bottom-right corner while a tree is larger than the part of it in
        view (``visible``, scene coordinates), outlining that part; hidden otherwise or where there is no room."""
        scene = self._scene
        big = has_tree and not visible.adjusted(-2, -2, 2, 2).contains(scene)
        if big:
            self.set_room(viewport.width(), viewport.height())
            self.set_view(visible)
            self.move(viewport.width() - self.width() - GAP, viewport.height() - self.height() - GAP)
            self.raise_()
        self.setVisible(big and self._fits())

    def _fits(self) -> bool:
        return self.width() > 40 and self.height() > 24

    def scroll_room(self, tree: QRectF, scale: float, viewport: QRect) -> QRectF:
        """The part of the scene a view ``scale`` times the tree's size scrolls over: while the overview shows, the
        tree and past its right and bottom edges the overview's width and height, so that every node can be
        scrolled beside it or above it, never only under it."""
        room = QRectF(tree)
        if tree.isEmpty() or scale <= 0:
            return room
        self.set_room(viewport.width(), viewport.height())
        big = tree.width() * scale > viewport.width() + 4 or tree.height() * scale > viewport.height() + 4
        if big and self._fits():
            room.setRight(tree.right() + (self.width() + 2 * GAP) / scale)
            room.setBottom(tree.bottom() + (self.height() + 2 * GAP) / scale)
        return room

    def clearance(self, rects: list[QRectF], room: tuple[int, int]) -> tuple[int, int]:
        """How far to scroll (viewport pixels to the right and down, at most ``room``) so that none of ``rects``
        (viewport coordinates) lies under the overview: of scrolling just past it sideways or upwards, the way
        that uncovers most and keeps most of them in view, then the shorter; (0, 0) when that uncovers nothing."""
        mine = QRectF(self.geometry())
        hit = [r for r in rects if r.intersects(mine)]
        if self.isHidden() or not hit:
            return 0, 0
        dx = math.ceil(max(r.right() for r in hit) - mine.left()) + GAP
        dy = math.ceil(max(r.bottom() for r in hit) - mine.top()) + GAP
        view = QRectF(self.parentWidget().rect())

        def cost(way: tuple[int, int]) -> tuple[int, int, int]:
            moved = [r.translated(-way[0], -way[1]) for r in rects]
            covered = sum(m.intersects(mine) for m in moved)
            lost = sum(view.contains(r) and not view.contains(m) for r, m in zip(rects, moved))
            return covered, lost, sum(way)

        ways = [w for w in ((dx, 0), (0, dy)) if w[0] <= room[0] and w[1] <= room[1]]
        best = min(ways, key=cost, default=(0, 0))
        return best if cost(best)[0] < len(hit) else (0, 0)

    def set_view(self, visible: QRectF) -> None:
        self._view = QRectF(visible)
        self.update()

    def view_rect(self) -> QRectF:
        """The outlined part (scene coordinates)."""
        return QRectF(self._view)

    def _to_map(self, r: QRectF) -> QRectF:
        s = self._scale
        return QRectF(PAD + (r.x() - self._scene.x()) * s, PAD + (r.y() - self._scene.y()) * s,
                      r.width() * s, r.height() * s)

    def to_scene(self, p: QPointF) -> QPointF:
        s = self._scale
        return QPointF(self._scene.x() + (p.x() - PAD) / s, self._scene.y() + (p.y() - PAD) / s)

    def _draw_tree(self) -> QPixmap:
        pix = QPixmap(self.size())
        pix.fill(Qt.GlobalColor.transparent)
        p = QPainter(pix)
        try:
            pal = self.palette()
            bg = QColor(pal.color(QPalette.ColorRole.Base))
            bg.setAlpha(235)
            p.fillRect(self.rect(), bg)
            p.setPen(QPen(pal.color(QPalette.ColorRole.Mid), 1))
            p.drawRect(self.rect().adjusted(0, 0, -1, -1))
            paths: dict[int, tuple[QColor, QPainterPath]] = {}
            for r, color in self._boxes:  # one path per colour: a few fills, not one per box
                m = self._to_map(r)
                path = paths.setdefault(color.rgba(), (color, QPainterPath()))[1]
                path.addRect(m.adjusted(0, 0, 0, max(0.0, 1.5 - m.height())))
            p.setPen(Qt.PenStyle.NoPen)
            for color, path in paths.values():
                p.fillPath(path, color)
        finally:
            p.end()
        return pix

    def changeEvent(self, e: QEvent) -> None:
        if e.type() == QEvent.Type.PaletteChange:
            self._picture = None
        super().changeEvent(e)

    def paintEvent(self, event: QPaintEvent) -> None:
        if self._picture is None or self._picture.size() != self.size():
            self._picture = self._draw_tree()
        p = QPainter(self)
        try:
            pal = self.palette()
            p.drawPixmap(0, 0, self._picture)
            p.setRenderHint(QPainter.RenderHint.Antialiasing)
            p.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 1.5))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(self._to_map(self._view.intersected(self._scene)).adjusted(0.5, 0.5, -0.5, -0.5))
        finally:
            p.end()

    def mousePressEvent(self, e: QMouseEvent) -> None:
        self.moved.emit(self.to_scene(e.position()))
        e.accept()

    def mouseMoveEvent(self, e: QMouseEvent) -> None:
        if e.buttons() & Qt.MouseButton.LeftButton:
            self.moved.emit(self.to_scene(e.position()))
        e.accept()

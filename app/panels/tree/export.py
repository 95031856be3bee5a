"""Saving the draft tree as PNG or SVG: the whole tree, never the part the view scrolled to, at the scale the view
fits it at or at the panel's font (labels readable) in an image as large as it needs, below the legend."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QRect, QRectF, QSize
from PySide6.QtGui import QImage, QPainter, QPalette
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsView

from specviz_app.panels.base import export_widget, write_atomically

MIN_FIT, MAX_FIT = 1.0, 1.4
"""Fit keeps labels at the panel's font size at least (1.0) and at most 140% of it (the view fits so too)."""
EXPORT_MAX_PX = 6000
"""The largest side of an exported tree image; a tree larger than that at the panel's font is scaled down."""


def export_tree(view: QGraphicsView, path: Path) -> Path:
    """Save the whole tree of ``view`` (the draft tree panel: its scene, legend strip, drawing and message) to
    ``path`` (PNG or SVG by its suffix, atomically); a view showing a message instead of a tree is saved as it is."""
    rect = view.scene().sceneRect()
    if view.message() or rect.isEmpty():
        return export_widget(view, path, view.title)
    vp = view.viewport().rect()
    fit = min(vp.width() / rect.width(), vp.height() / rect.height()) * 0.995
    s = min(max(fit, MIN_FIT), MAX_FIT)
    s = min(s, EXPORT_MAX_PX / max(rect.width(), rect.height()))  # a giant tree is scaled to fit the largest image
    legend = view.header.grab()
    margin = 12
    w = max(view.width(), int(rect.width() * s) + 2 * margin)
    h = max(view.height(), legend.height() + int(rect.height() * s) + 2 * margin)
    labels_were = view.drawing.labels_on
    view.drawing.show_labels(s)
    try:
        def draw(painter: QPainter) -> None:
            painter.fillRect(QRectF(0, 0, w, h), view.palette().color(QPalette.ColorRole.Base))
            painter.drawPixmap(0, 0, legend)
            top = legend.height() + max(margin, (h - legend.height() - rect.height() * s) / 2)
            target = QRectF((w - rect.width() * s) / 2, top, rect.width() * s, rect.height() * s)
            painter.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
            view.scene().render(painter, target, rect)

        def write(tmp: str) -> None:
            if path.suffix.lower() == ".svg":
                gen = QSvgGenerator()
                gen.setFileName(tmp)
                gen.setSize(QSize(w, h))
                gen.setViewBox(QRect(0, 0, w, h))
                gen.setTitle(view.title)
                painter = QPainter(gen)
                try:
                    draw(painter)
                finally:
                    painter.end()
            else:
                dpr = view.devicePixelRatioF()
                image = QImage(int(w * dpr), int(h * dpr), QImage.Format.Format_ARGB32_Premultiplied)
                image.setDevicePixelRatio(dpr)
                painter = QPainter(image)
                try:
                    draw(painter)
                finally:
                    painter.end()
                if not image.save(tmp):
                    raise OSError(f"could not write {path}")

        return write_atomically(path, write)
    finally:
        view.drawing.show_labels(view.transform().m11() if labels_were else 0.0)

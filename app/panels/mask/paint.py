"""Drawing the mask panel: the note, the legend, the heatmap, and each row's label, position id and source.

The panel works out the rows (:class:`MaskRows`) and where everything goes (:class:`MaskGeometry`);
:func:`paint_mask` draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from PySide6.QtCore import QLine, QPointF, QRect, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter, QPalette

from specviz_app.theme import ACCEPTED, is_dark, source_color
from specviz_core.records import CycleRecord, Node

MARGIN, GAP = 6, 4


@dataclass
class MaskRows:
    """What the panel derives once per record: nodes in verify order and their label texts."""

    record: CycleRecord
    nodes: list[Node]
    labels: list[str]
    col_labels: list[str]
    accepted: list[bool]
    image: QImage | None = None
    image_dark: bool | None = None
    sizes: dict = field(default_factory=dict)
    """Label sizes by (font pixels, font key), measured once."""


@dataclass
class MaskGeometry:
    """Where everything goes on the canvas (pixels); ``cell`` is the side of one heatmap cell."""

    cell: int
    font_px: int
    note_y: int
    legend_y: int
    label_x: int
    label_w: int
    pos_x: int
    pos_w: int
    swatch_x: int
    bar_x: int
    gx: int
    gy: int
    width: int
    height: int
    stride: int = 1
    """Every ``stride``-th row and column is labelled: labels are never drawn smaller than readable."""


def _blend(a: QColor, b: QColor, t: float) -> QColor:
    return QColor(round(a.red() + (b.red() - a.red()) * t), round(a.green() + (b.green() - a.green()) * t),
                  round(a.blue() + (b.blue() - a.blue()) * t))


def plain_attend(pal: QPalette) -> QColor:
    """Colour of a cell whose (not accepted) row attends to its column."""
    return QColor("#aeb8c8") if is_dark(pal) else QColor("#4a5568")


def fonts(font: QFont, px: int) -> tuple[QFont, QFont]:
    """``font`` at ``px`` pixels, regular and bold."""
    f = QFont(font)
    f.setPixelSize(px)
    b = QFont(f)
    b.setBold(True)
    return f, b


def mask_image(rows: MaskRows, pal: QPalette) -> QImage:
    """The mask as an n x n image, transparent where a row does not attend (drawn scaled, nearest); kept in
    ``rows`` until the palette turns dark or light."""
    dark = is_dark(pal)
    if rows.image is None or rows.image_dark != dark:
        n = len(rows.nodes)
        plain, acc = plain_attend(pal), QColor(ACCEPTED)
        argb = np.zeros((n, n), dtype=np.uint32)
        colors = np.where(np.array(rows.accepted), acc.rgba(), plain.rgba()).astype(np.uint32)
        argb[:] = colors[:, None]
        argb[~rows.record.mask] = 0
        img = QImage(argb.tobytes(), n, n, 4 * n, QImage.Format.Format_ARGB32_Premultiplied)
        rows.image, rows.image_dark = img.copy(), dark
    return rows.image


def fitting_text(fm: QFontMetrics, texts: Sequence[str], room: int) -> str:
    """The first of ``texts`` (longest wording first) that fits ``room`` pixels: a shorter wording rather than a cut
    one; the shortest, elided, where none fits."""
    fits = next((t for t in texts if fm.horizontalAdvance(t) <= room), None)
    return fits if fits is not None else fm.elidedText(texts[-1], Qt.TextElideMode.ElideRight, room)


def paint_mask(p: QPainter, area: QRect, pal: QPalette, font0: QFont, rows: MaskRows | None,
               g: MaskGeometry | None, notes: Sequence[str], sel: int | None, shown: QRect | None = None) -> None:
    """Draw the canvas ``area``: the note (the first of ``notes``, longest first, that fits), the legend, the heatmap
    with its row and column labels; ``sel`` is the selected row, ``font0`` the panel's font; with no rows, the hint. ``shown`` is the part of the canvas in
    view: the row labels stay at its left and the column labels at its top when the grid is scrolled."""
    text = pal.color(QPalette.ColorRole.Text)
    dim = pal.color(QPalette.ColorRole.PlaceholderText)
    window = pal.color(QPalette.ColorRole.Window)
    p.fillRect(area, window)
    if rows is None or g is None:
        p.setPen(dim)
        p.drawText(area.adjusted(8, 8, -8, -8), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, notes[0])
        return
    sx, sy = (shown.x(), shown.y()) if shown is not None else (0, 0)
    view_w = shown.width() if shown is not None else area.width()
    n, c = len(rows.nodes), g.cell
    _paint_grid(p, g, rows, pal, sel)
    # The row band (labels, positions, sources, accepted bars), then the column band over it, pinned.
    if sx:
        p.fillRect(QRect(sx, g.gy, g.gx, n * c), window)
    p.save()
    p.translate(sx, 0)
    _paint_row_band(p, g, rows, pal, font0, sel)
    p.restore()
    if sy or sx:
        p.fillRect(QRect(sx, sy, max(view_w, g.gx + n * c - sx), g.gy), window)
    p.save()
    p.translate(0, sy)
    _paint_col_band(p, g, rows, pal, font0, sel)
    p.restore()
    head_fm = QFontMetrics(font0)
    p.save()
    p.translate(sx, sy)
    p.fillRect(QRect(0, 0, g.gx if sx or sy else 0, g.gy), window)
    p.setPen(text)
    room = view_w - 2 * MARGIN
    p.drawText(QRect(MARGIN, g.note_y, room, head_fm.height()), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
               fitting_text(head_fm, notes, room))
    _paint_legend(p, g, head_fm, pal, dim)
    p.restore()


def _paint_grid(p: QPainter, g: MaskGeometry, rows: MaskRows, pal: QPalette, sel: int | None) -> None:
    """The cells, their grid lines and the selected row and column."""
    base, text = pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text)
    n, c = len(rows.nodes), g.cell
    grid = QRect(g.gx, g.gy, n * c, n * c)
    p.fillRect(grid, base)
    hl = QColor(pal.color(QPalette.ColorRole.Highlight))
    if sel is not None:
        hl.setAlpha(70)
        p.fillRect(QRect(g.gx, g.gy + sel * c, n * c, c), hl)
        p.fillRect(QRect(g.gx + sel * c, g.gy, c, n * c), hl)
    p.drawImage(grid, mask_image(rows, pal))
    if c >= 6:
        p.setPen(_blend(base, text, 0.13))
        lines = [QLine(g.gx + k * c, g.gy, g.gx + k * c, g.gy + n * c) for k in range(n + 1)]
        lines += [QLine(g.gx, g.gy + k * c, g.gx + n * c, g.gy + k * c) for k in range(n + 1)]
        p.drawLines(lines)
    if sel is not None:
        hl.setAlpha(255)
        p.setPen(hl)
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(QRect(g.gx, g.gy + sel * c, n * c, c))
        p.drawRect(QRect(g.gx + sel * c, g.gy, c, n * c))


def _labelled(g: MaskGeometry, n: int) -> range:
    return range(0, n, g.stride)


def _paint_row_band(p: QPainter, g: MaskGeometry, rows: MaskRows, pal: QPalette, font0: QFont, sel: int | None) -> None:
    """Left of the grid: each row's token (every ``stride``-th), position id, source swatch and accepted bar."""
    text, dim = pal.color(QPalette.ColorRole.Text), pal.color(QPalette.ColorRole.PlaceholderText)
    rec, n, c = rows.record, len(rows.nodes), g.cell
    if sel is not None:
        hl = QColor(pal.color(QPalette.ColorRole.Highlight))
        hl.setAlpha(70)
        p.fillRect(QRect(MARGIN, g.gy + sel * c, g.gx - MARGIN, c), hl)
    font, bold = fonts(font0, g.font_px)
    fms = {False: QFontMetrics(font), True: QFontMetrics(bold)}
    base_dy = (c + fms[False].ascent() - fms[False].descent()) / 2
    acc = QColor(ACCEPTED)
    sw = min(10, c - 2)
    label_right, pos_right = g.label_x + g.label_w, g.pos_x + g.pos_w
    labelled = _labelled(g, n)
    for bold_rows in (False, True):  # one font switch per weight, not per row
        p.setFont(bold if bold_rows else font)
        p.setPen(text)
        fm = fms[bold_rows]
        for i in labelled:
            if rows.accepted[i] == bold_rows:
                lab = rows.labels[i]
                p.drawText(QPointF(label_right - fm.horizontalAdvance(lab), g.gy + i * c + base_dy), lab)
    p.setFont(font)
    p.setPen(dim)
    fm = fms[False]
    for i in labelled:
        pos = str(rec.positions[i])
        p.drawText(QPointF(pos_right - fm.horizontalAdvance(pos), g.gy + i * c + base_dy), pos)
    for i in range(n):
        y = g.gy + i * c
        if sw >= 2:
            p.fillRect(QRect(g.swatch_x, y + (c - sw) // 2, sw, sw), source_color(rows.nodes[i].source))
        if rows.accepted[i]:
            p.fillRect(QRect(g.bar_x, y, 3, c), acc)


def _paint_col_band(p: QPainter, g: MaskGeometry, rows: MaskRows, pal: QPalette, font0: QFont, sel: int | None) -> None:
    """Above the grid: each column's token (every ``stride``-th), rotated to read bottom-up."""
    n, c = len(rows.nodes), g.cell
    if sel is not None:
        hl = QColor(pal.color(QPalette.ColorRole.Highlight))
        hl.setAlpha(70)
        p.fillRect(QRect(g.gx + sel * c, g.legend_y + 20, c, g.gy - g.legend_y - 20), hl)
    font, bold = fonts(font0, g.font_px)
    fm = QFontMetrics(font)
    base_dy = (c + fm.ascent() - fm.descent()) / 2
    p.save()
    p.translate(g.gx, g.gy - 3)
    p.rotate(-90)
    p.setPen(pal.color(QPalette.ColorRole.Text))
    for bold_rows in (False, True):
        p.setFont(bold if bold_rows else font)
        for j in _labelled(g, n):
            if rows.accepted[j] == bold_rows:
                p.drawText(QPointF(0, j * c + base_dy), rows.col_labels[j])
    p.restore()

def _paint_legend(p: QPainter, g: MaskGeometry, fm: QFontMetrics, pal: QPalette, dim: QColor) -> None:
    x, y, s = MARGIN, g.legend_y + 3, fm.height() - 6
    base = pal.color(QPalette.ColorRole.Base)
    items = [(plain_attend(pal), "attends"), (None, "masked"), (QColor(ACCEPTED), "accepted row")]
    p.setPen(dim)
    for color, label in items:
        p.fillRect(QRect(x, y, s, s), color if color is not None else base)
        if color is None:
            p.drawRect(QRect(x, y, s - 1, s - 1))
        x += s + 4
        p.drawText(QRect(x, g.legend_y, 400, fm.height()), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, label)
        x += fm.horizontalAdvance(label) + 12

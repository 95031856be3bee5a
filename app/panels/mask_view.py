"""The current cycle's tree attention mask as a heatmap, rows and columns in verify order.

Row i of the verify block may attend to column j when ``record.mask[i, j]``; every row also attends to all
``record.cache_len`` cached positions (not drawn, said in the note). Rows carry their token, position id and
source colour; accepted rows (root included) have a green bar and bold labels, and their cells are green.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QEvent, QLine, QObject, QPoint, QPointF, QRect, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QHelpEvent,
    QImage,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QWheelEvent,
)
from PySide6.QtWidgets import QFrame, QScrollArea, QStyle, QToolTip, QVBoxLayout, QWidget

from specviz_core.records import CycleRecord, Node

from ..theme import ACCEPTED, SOURCE_LABELS, is_dark, source_color
from .base import PanelMixin

HINT = "Step a cycle (F10) or open a recording"
MIN_CELL, MAX_CELL = 7, 28
MARGIN, GAP = 6, 4
COL_LABEL_CHARS = 8


@dataclass
class _Rows:
    """What the panel derives once per record: nodes in verify order and their label texts."""

    record: CycleRecord
    nodes: list[Node]
    labels: list[str]
    col_labels: list[str]
    accepted: list[bool]
    image: QImage | None = None
    image_dark: bool | None = None


@dataclass
class _Geometry:
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


def _blend(a: QColor, b: QColor, t: float) -> QColor:
    return QColor(round(a.red() + (b.red() - a.red()) * t), round(a.green() + (b.green() - a.green()) * t),
                  round(a.blue() + (b.blue() - a.blue()) * t))


class _Canvas(QWidget):
    """The drawing surface inside the scroll area; everything is delegated to the panel."""

    def __init__(self, panel: MaskView) -> None:
        super().__init__()
        self.panel = panel
        self.setMouseTracking(True)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        try:
            self.panel._paint(p)
        finally:
            p.end()

    def event(self, e: QEvent) -> bool:
        if e.type() == QEvent.Type.ToolTip and isinstance(e, QHelpEvent):
            tip = self.panel.tooltip_at(e.pos())
            if tip:
                QToolTip.showText(e.globalPos(), tip, self)
            else:
                QToolTip.hideText()
                e.ignore()
            return True
        return super().event(e)

    def mousePressEvent(self, e: QMouseEvent) -> None:
        if e.button() == Qt.MouseButton.LeftButton:
            self.panel.click_at(e.position().toPoint())
        super().mousePressEvent(e)

    def mouseDoubleClickEvent(self, e: QMouseEvent) -> None:
        if self.panel.hit(e.position().toPoint()) is None:
            self.panel.fit()

    def wheelEvent(self, e: QWheelEvent) -> None:
        if e.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.panel.set_zoom(self.panel.zoom * 1.25 ** (e.angleDelta().y() / 120))
            e.accept()
        else:
            e.ignore()


class MaskView(PanelMixin, QWidget):
    """Heatmap of ``record.mask``; click a row, cell or column to select its node. Ctrl+wheel zooms."""

    title = "Tree attention mask"

    def __init__(self, model, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.zoom = 1.0
        self._rows: _Rows | None = None
        self._geom: tuple[tuple, _Geometry] | None = None
        self.scroll = QScrollArea(self)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setWidgetResizable(False)
        self.canvas = _Canvas(self)
        self.scroll.setWidget(self.canvas)
        self.scroll.viewport().installEventFilter(self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.scroll)
        self.setToolTip("")
        self.connect_model(model)
        self._relayout()

    # -- model events ------------------------------------------------------------
    def on_session_opened(self, source) -> None:
        self._relayout()

    def on_session_closed(self) -> None:
        self._relayout()

    def on_cycle_changed(self, record: CycleRecord) -> None:
        self._relayout()

    def on_node_selected(self, node_id: int | None) -> None:
        self.canvas.update()

    def export_target(self) -> QWidget:
        return self.canvas

    # -- zoom --------------------------------------------------------------------
    def fit(self) -> None:
        """Cells as large as fit the panel (the default)."""
        self.set_zoom(1.0)

    def set_zoom(self, zoom: float) -> None:
        """Cell size relative to fit-to-panel (1.0); larger values scroll."""
        self.zoom = max(1.0, min(zoom, 8.0))
        self._relayout()

    def eventFilter(self, obj: QObject, e: QEvent) -> bool:
        if obj is self.scroll.viewport() and e.type() == QEvent.Type.Resize:
            self._relayout()
        return False

    def changeEvent(self, e: QEvent) -> None:
        if e.type() in (QEvent.Type.PaletteChange, QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._rows = None
            self._geom = None
            self.canvas.update()
        super().changeEvent(e)

    # -- derived data --------------------------------------------------------------
    def rows(self) -> _Rows | None:
        """Per-row nodes and labels of the model's current record (rebuilt when the record changes)."""
        rec = self.model.record
        if rec is None or not rec.verify_order:
            return None
        if self._rows is None or self._rows.record is not rec:
            by_id = rec.node_by_id
            nodes = [by_id[nid] for nid in rec.verify_order]
            label = self.model.vocab.label
            accepted = {0, *rec.accepted_path}
            self._rows = _Rows(rec, nodes, [label(n.token) for n in nodes],
                               [label(n.token, COL_LABEL_CHARS) for n in nodes], [n.id in accepted for n in nodes])
        return self._rows

    def row_texts(self) -> list[tuple[str, int, bool]]:
        """What each row shows beside the grid: (token label, position id, accepted)."""
        rows = self.rows()
        if rows is None:
            return []
        return [(t, p, a) for t, p, a in zip(rows.labels, rows.record.positions, rows.accepted)]

    def note_text(self) -> str:
        rec = self.model.record
        if rec is None:
            return HINT
        n = rec.n_verified
        return (f"Cycle {rec.index} ({rec.mode}): {n} × {n} in verify order; "
                f"every row also attends to all {rec.cache_len:,} cached positions")

    def _plain_attend(self) -> QColor:
        return QColor("#aeb8c8") if is_dark(self.palette()) else QColor("#4a5568")

    def attend_color(self, row: int) -> QColor:
        """Colour of a cell whose row attends to its column: green on accepted rows."""
        rows = self.rows()
        if rows is not None and rows.accepted[row]:
            return QColor(ACCEPTED)
        return self._plain_attend()

    def _image(self, rows: _Rows) -> QImage:
        """The mask as an n x n image, transparent where a row does not attend (drawn scaled, nearest)."""
        dark = is_dark(self.palette())
        if rows.image is None or rows.image_dark != dark:
            n = len(rows.nodes)
            plain, acc = self._plain_attend(), QColor(ACCEPTED)
            argb = np.zeros((n, n), dtype=np.uint32)
            colors = np.where(np.array(rows.accepted), acc.rgba(), plain.rgba()).astype(np.uint32)
            argb[:] = colors[:, None]
            argb[~rows.record.mask] = 0
            img = QImage(argb.tobytes(), n, n, 4 * n, QImage.Format.Format_ARGB32_Premultiplied)
            rows.image, rows.image_dark = img.copy(), dark
        return rows.image

    # -- geometry -------------------------------------------------------------------
    def _fonts(self, px: int) -> tuple[QFont, QFont]:
        f = QFont(self.font())
        f.setPixelSize(px)
        b = QFont(f)
        b.setBold(True)
        return f, b

    def geometry_for(self, avail_w: int, avail_h: int) -> _Geometry | None:
        rows = self.rows()
        if rows is None:
            return None
        key = (id(rows.record), avail_w, avail_h, self.zoom)
        if self._geom is not None and self._geom[0] == key:
            return self._geom[1]
        n = len(rows.nodes)
        head = QFontMetrics(self.font()).height() + 4
        font_px, cell = 11, MIN_CELL
        for _ in range(2):  # label sizes depend on the font, the font on the cell size
            _, bold = self._fonts(font_px)
            fm = QFontMetrics(bold)
            label_w = max(fm.horizontalAdvance(t) for t in rows.labels) + 2
            pos_w = fm.horizontalAdvance(str(max(rows.record.positions, default=0))) + 2
            col_h = min(max(fm.horizontalAdvance(t) for t in rows.col_labels) + 6, 80)
            left = MARGIN + label_w + GAP + pos_w + GAP + 10 + 3 + 4 + 2
            top = MARGIN + 2 * head + 4 + col_h
            fit = min((avail_w - left - MARGIN) // n, (avail_h - top - MARGIN) // n)
            cell = max(MIN_CELL, min(MAX_CELL, int(fit * self.zoom)))
            font_px = max(8, min(12, cell - 1))
        gx, gy = left, top
        pos_x = MARGIN + label_w + GAP
        g = _Geometry(cell=cell, font_px=font_px, note_y=MARGIN, legend_y=MARGIN + head, label_x=MARGIN, label_w=label_w,
                      pos_x=pos_x, pos_w=pos_w, swatch_x=pos_x + pos_w + GAP, bar_x=gx - 5, gx=gx, gy=gy,
                      width=max(gx + n * cell + MARGIN, 520), height=gy + n * cell + MARGIN)
        self._geom = (key, g)
        return g

    def geometry(self) -> _Geometry | None:
        size = self.scroll.maximumViewportSize()
        return self.geometry_for(size.width(), size.height())

    def _relayout(self) -> None:
        size = self.scroll.maximumViewportSize()
        g = self.geometry()
        w, h = size.width(), size.height()
        if g is not None:
            bar = self.scroll.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
            # A scroll bar in one direction takes room from the other; fill what is left, do not overflow it.
            w, h = (w - bar if g.height > h else w), (h - bar if g.width > w else h)
            w, h = max(w, g.width), max(h, g.height)
        if self.canvas.size().width() != w or self.canvas.size().height() != h:
            self.canvas.resize(w, h)
        self.canvas.update()

    def cell_rect(self, i: int, j: int) -> QRect:
        """Canvas rectangle of cell (row i, column j)."""
        g = self.geometry()
        if g is None:
            return QRect()
        return QRect(g.gx + j * g.cell, g.gy + i * g.cell, g.cell, g.cell)

    def row_label_rect(self, i: int) -> QRect:
        g = self.geometry()
        return QRect(g.label_x, g.gy + i * g.cell, g.label_w, g.cell) if g else QRect()

    def col_label_rect(self, j: int) -> QRect:
        g = self.geometry()
        return QRect(g.gx + j * g.cell, g.legend_y + 20, g.cell, g.gy - g.legend_y - 20) if g else QRect()

    def hit(self, pos: QPoint) -> tuple[str, int, int] | None:
        """('cell', i, j), ('row', i, -1), ('col', -1, j) or None for a canvas point."""
        g, rows = self.geometry(), self.rows()
        if g is None or rows is None:
            return None
        n, c = len(rows.nodes), g.cell
        i = (pos.y() - g.gy) // c if pos.y() >= g.gy else -1
        j = (pos.x() - g.gx) // c if pos.x() >= g.gx else -1
        if 0 <= i < n and 0 <= j < n:
            return ("cell", i, j)
        if 0 <= i < n and MARGIN <= pos.x() < g.gx:
            return ("row", i, -1)
        if 0 <= j < n and g.legend_y + 20 <= pos.y() < g.gy:
            return ("col", -1, j)
        return None

    # -- interaction ----------------------------------------------------------------------
    def click_at(self, pos: QPoint) -> None:
        h, rows = self.hit(pos), self.rows()
        if h is None or rows is None:
            return
        kind, i, j = h
        self.model.select_node(rows.nodes[j if kind == "col" else i].id)

    def tooltip_at(self, pos: QPoint) -> str:
        h, rows, g = self.hit(pos), self.rows(), self.geometry()
        if rows is None or g is None:
            return ""
        if h is None:
            if pos.y() < g.legend_y + 20:
                return ("Row i may attend to column j (filled) or not (empty): the tree part of the attention mask,\n"
                        "rows and columns in verify order. Every row also sees the whole KV cache.\n"
                        "Click a row, cell or column to select its node; Ctrl+wheel zooms, double-click the background fits.")
            return ""
        kind, i, j = h
        rec, label = rows.record, self.model.vocab.label
        if kind == "cell":
            a, b = rows.nodes[i], rows.nodes[j]
            verb = "attends to" if rec.mask[i, j] else "does not attend to"
            return (f"row {i} (token '{label(a.token, 24)}', pos {rec.positions[i]}) {verb} column {j} "
                    f"(token '{label(b.token, 24)}')\nclick: select node {a.id}")
        node = rows.nodes[i if kind == "row" else j]
        k = i if kind == "row" else j
        status = "accepted" if rows.accepted[k] else ("rejected" if node.target_token >= 0 else "verified")
        seen = int(rec.mask[k].sum()) if kind == "row" else int(rec.mask[:, k].sum())
        what = (f"attends to {seen} block rows + {rec.cache_len:,} cached positions" if kind == "row"
                else f"attended by {seen} of {len(rows.nodes)} rows")
        return (f"{kind} {k}: node {node.id}, token '{label(node.token, 24)}' (id {node.token})\n"
                f"{SOURCE_LABELS.get(node.source, node.source)}, depth {node.depth}, pos {rec.positions[k]}, {status}\n"
                f"{what}\nclick: select node {node.id}")

    def selected_row(self) -> int | None:
        rows, sel = self.rows(), self.model.selected_node
        if rows is None or sel is None:
            return None
        return next((k for k, n in enumerate(rows.nodes) if n.id == sel), None)

    # -- drawing ---------------------------------------------------------------------------
    def _paint(self, p: QPainter) -> None:
        pal = self.palette()
        base, text = pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text)
        dim = pal.color(QPalette.ColorRole.PlaceholderText)
        p.fillRect(self.canvas.rect(), pal.color(QPalette.ColorRole.Window))
        rows, g = self.rows(), self.geometry()
        if rows is None or g is None:
            p.setPen(dim)
            p.drawText(self.canvas.rect(), Qt.AlignmentFlag.AlignCenter, HINT)
            return
        rec, n, c = rows.record, len(rows.nodes), g.cell
        head_fm = QFontMetrics(self.font())
        p.setPen(text)
        p.drawText(QRect(MARGIN, g.note_y, self.canvas.width() - 2 * MARGIN, head_fm.height()),
                   Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, self.note_text())
        self._paint_legend(p, g, head_fm, text, dim)

        grid = QRect(g.gx, g.gy, n * c, n * c)
        p.fillRect(grid, base)
        sel = self.selected_row()
        hl = QColor(pal.color(QPalette.ColorRole.Highlight))
        if sel is not None:
            hl.setAlpha(70)
            p.fillRect(QRect(MARGIN, g.gy + sel * c, g.gx + n * c - MARGIN, c), hl)
            p.fillRect(QRect(g.gx + sel * c, g.legend_y + 20, c, g.gy - g.legend_y - 20 + n * c), hl)
        p.drawImage(grid, self._image(rows))
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

        font, bold = self._fonts(g.font_px)
        fms = {False: QFontMetrics(font), True: QFontMetrics(bold)}
        base_dy = (c + fms[False].ascent() - fms[False].descent()) / 2
        acc = QColor(ACCEPTED)
        sw = min(10, c - 2)
        label_right, pos_right = g.label_x + g.label_w, g.pos_x + g.pos_w
        for bold_rows in (False, True):  # one font switch per weight, not per row
            p.setFont(bold if bold_rows else font)
            p.setPen(text)
            fm = fms[bold_rows]
            for i in range(n):
                if rows.accepted[i] == bold_rows:
                    lab = rows.labels[i]
                    p.drawText(QPointF(label_right - fm.horizontalAdvance(lab), g.gy + i * c + base_dy), lab)
        p.setFont(font)
        p.setPen(dim)
        fm = fms[False]
        for i in range(n):
            y = g.gy + i * c
            pos = str(rec.positions[i])
            p.drawText(QPointF(pos_right - fm.horizontalAdvance(pos), y + base_dy), pos)
            p.fillRect(QRect(g.swatch_x, y + (c - sw) // 2, sw, sw), source_color(rows.nodes[i].source))
            if rows.accepted[i]:
                p.fillRect(QRect(g.bar_x, y, 3, c), acc)

        # Column labels, rotated to read bottom-up, one per column.
        p.save()
        p.translate(g.gx, g.gy - 3)
        p.rotate(-90)
        p.setPen(text)
        for bold_rows in (False, True):
            p.setFont(bold if bold_rows else font)
            for j in range(n):
                if rows.accepted[j] == bold_rows:
                    p.drawText(QPointF(0, j * c + base_dy), rows.col_labels[j])
        p.restore()

    def _paint_legend(self, p: QPainter, g: _Geometry, fm: QFontMetrics, text: QColor, dim: QColor) -> None:
        x, y, s = MARGIN, g.legend_y + 3, fm.height() - 6
        base = self.palette().color(QPalette.ColorRole.Base)
        items = [(self._plain_attend(), "attends"), (QColor(ACCEPTED), "attends (accepted row)"), (None, "masked")]
        p.setPen(dim)
        for color, label in items:
            p.fillRect(QRect(x, y, s, s), color if color is not None else base)
            if color is None:
                p.drawRect(QRect(x, y, s - 1, s - 1))
            x += s + 4
            p.drawText(QRect(x, g.legend_y, 400, fm.height()), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, label)
            x += fm.horizontalAdvance(label) + 12
        p.fillRect(QRect(x, y, 3, s), QColor(ACCEPTED))
        x += 7
        label = "accepted row (root included)"
        p.drawText(QRect(x, g.legend_y, 400, fm.height()), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, label)

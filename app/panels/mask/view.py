"""The current cycle's tree attention mask as a heatmap, rows and columns in verify order.

Row i of the verify block may attend to column j when ``record.mask[i, j]``; every row also attends to all
``record.cache_len`` cached positions (not drawn, said in the note). Rows carry their token, position id and
source colour; accepted rows (root included) have a green bar and bold labels, and their cells are green.
Labels are never drawn smaller than readable: while the cells are small only every few rows and columns are
labelled, zooming in (Ctrl+wheel, Ctrl+plus/minus) labels them all; scrolled, the row and column labels stay
at the panel's left and top. Hovering a cell names its row's and column's tokens and positions.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Qt
from PySide6.QtGui import (
    QFontMetrics,
    QHelpEvent,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import QFrame, QScrollArea, QStyle, QToolTip, QVBoxLayout, QWidget

from specviz_app.panels.base import HINT as HINT  # what the canvas says with no cycle (tests read it here)
from specviz_app.panels.base import PanelMixin, placeholder
from specviz_app.panels.mask.paint import GAP, MARGIN, MaskGeometry, MaskRows, fonts, paint_mask
from specviz_app.theme import SOURCE_LABELS
from specviz_core.records import CycleRecord

MIN_CELL, MAX_CELL = 7, 28
COL_LABEL_CHARS = 8
MIN_LABEL_PX = 8
"""The smallest label font: rows narrower than this plus one pixel are labelled every few rows."""


class _Canvas(QWidget):
    """The drawing surface inside the scroll area; everything is delegated to the panel."""

    def __init__(self, panel: MaskView) -> None:
        super().__init__()
        self.panel = panel
        self.setMouseTracking(True)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        try:
            panel = self.panel
            paint_mask(p, self.rect(), panel.palette(), panel.font(), panel.rows(), panel.geometry(), panel.note_texts(),
                       panel.selected_row(), panel.shown_rect())
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

    def keyPressEvent(self, e: QKeyEvent) -> None:
        step = {Qt.Key.Key_Plus: 1.25, Qt.Key.Key_Equal: 1.25, Qt.Key.Key_Minus: 0.8}.get(e.key())
        if step and e.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.panel.set_zoom(self.panel.zoom * step)
            e.accept()
        elif e.key() == Qt.Key.Key_0 and e.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.panel.fit()
            e.accept()
        else:
            super().keyPressEvent(e)


class MaskView(PanelMixin, QWidget):
    """Heatmap of ``record.mask``; click a row, cell or column to select its node. Ctrl+wheel zooms."""

    title = "Tree attention mask"

    def __init__(self, model, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.zoom = 1.0
        self._rows: MaskRows | None = None
        self._geom: tuple[tuple, MaskGeometry] | None = None
        self._advances: dict[tuple, dict[str, int]] = {}
        self.scroll = QScrollArea(self)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setWidgetResizable(False)
        self.canvas = _Canvas(self)
        self.scroll.setWidget(self.canvas)
        self.scroll.viewport().installEventFilter(self)
        for bar in (self.scroll.horizontalScrollBar(), self.scroll.verticalScrollBar()):
            bar.valueChanged.connect(self.canvas.update)  # the label bands follow the scrolled grid
        self.canvas.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
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
        i = self.selected_row()
        if i is not None:  # zoomed in, the selected row and column scroll into view
            r = self.cell_rect(i, i)
            self.scroll.ensureVisible(r.center().x(), r.center().y(), r.width() + 40, r.height() + 40)
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
    def rows(self) -> MaskRows | None:
        """Per-row nodes and labels of the model's current record (rebuilt when the record changes)."""
        rec = self.model.record
        if rec is None or not rec.verify_order:
            return None
        if self._rows is None or self._rows.record is not rec:
            by_id = rec.node_by_id
            nodes = [by_id[nid] for nid in rec.verify_order]
            label = self.model.vocab.label
            accepted = {0, *rec.accepted_path}
            self._rows = MaskRows(rec, nodes, [label(n.token) for n in nodes],
                               [label(n.token, COL_LABEL_CHARS) for n in nodes], [n.id in accepted for n in nodes])
        return self._rows

    def row_texts(self) -> list[tuple[str, int, bool]]:
        """What each row shows beside the grid: (token label, position id, accepted)."""
        rows = self.rows()
        if rows is None:
            return []
        return [(t, p, a) for t, p, a in zip(rows.labels, rows.record.positions, rows.accepted)]

    def note_text(self) -> str:
        return self.note_texts()[0]

    def note_texts(self) -> list[str]:
        """The note over the mask, longest first: the panel shows the first that fits its width."""
        rec = self.model.record
        if rec is None:
            return [placeholder(self.model)]
        n = rec.n_verified
        return [f"Cycle {rec.index} ({rec.mode}): {n} × {n} in verify order; "
                f"every row also attends to all {rec.cache_len:,} cached positions",
                f"Cycle {rec.index}: {n} × {n}; every row also sees the {rec.cache_len:,} cached",
                f"Cycle {rec.index}: {n} × {n} + {rec.cache_len:,} cached"]

    # -- geometry -------------------------------------------------------------------
    def geometry_for(self, avail_w: int, avail_h: int) -> MaskGeometry | None:
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
            label_w, pos_w, col_h = self._label_sizes(rows, font_px)
            left = MARGIN + label_w + GAP + pos_w + GAP + 10 + 3 + 4 + 2
            top = MARGIN + 2 * head + 4 + col_h
            fit = min((avail_w - left - MARGIN) // n, (avail_h - top - MARGIN) // n)
            cell = max(MIN_CELL, min(MAX_CELL, int(fit * self.zoom)))
            font_px = max(MIN_LABEL_PX, min(12, cell - 1))
        stride = -(-(font_px + 1) // cell)  # rows per label: a label needs its font's height and a pixel
        gx, gy = left, top
        pos_x = MARGIN + label_w + GAP
        g = MaskGeometry(cell=cell, font_px=font_px, note_y=MARGIN, legend_y=MARGIN + head, label_x=MARGIN, label_w=label_w,
                      pos_x=pos_x, pos_w=pos_w, swatch_x=pos_x + pos_w + GAP, bar_x=gx - 5, gx=gx, gy=gy,
                      width=gx + n * cell + MARGIN, height=gy + n * cell + MARGIN, stride=stride)
        self._geom = (key, g)
        return g

    def _label_sizes(self, rows: MaskRows, font_px: int) -> tuple[int, int, int]:
        """(row label width, position width, column label height) at ``font_px``, measured once per record."""
        key = (font_px, self.font().key())
        sizes = rows.sizes.get(key)
        if sizes is None:
            fm = QFontMetrics(fonts(self.font(), font_px)[1])
            adv = self._advances.setdefault(key, {})  # token widths, kept across cycles (tokens repeat)

            def width(t: str) -> int:
                w = adv.get(t)
                if w is None:
                    w = adv[t] = fm.horizontalAdvance(t)
                return w

            sizes = rows.sizes[key] = (
                max(width(t) for t in rows.labels) + 2,
                fm.horizontalAdvance(str(max(rows.record.positions, default=0))) + 2,
                min(max(width(t) for t in rows.col_labels) + 6, 80))
        return sizes

    def geometry(self) -> MaskGeometry | None:
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

    def shown_rect(self) -> QRect:
        """The part of the canvas in view (canvas coordinates)."""
        vp = self.scroll.viewport()
        return QRect(self.scroll.horizontalScrollBar().value(), self.scroll.verticalScrollBar().value(),
                     vp.width(), vp.height())

    def cell_rect(self, i: int, j: int) -> QRect:
        """Canvas rectangle of cell (row i, column j)."""
        g = self.geometry()
        if g is None:
            return QRect()
        return QRect(g.gx + j * g.cell, g.gy + i * g.cell, g.cell, g.cell)

    def row_label_rect(self, i: int) -> QRect:
        """Where row ``i``'s label is drawn (it stays at the panel's left when the grid scrolls)."""
        g, sx = self.geometry(), self.shown_rect().x()
        return QRect(sx + g.label_x, g.gy + i * g.cell, g.label_w, g.cell) if g else QRect()

    def col_label_rect(self, j: int) -> QRect:
        g, sy = self.geometry(), self.shown_rect().y()
        return QRect(g.gx + j * g.cell, sy + g.legend_y + 20, g.cell, g.gy - g.legend_y - 20) if g else QRect()

    def hit(self, pos: QPoint) -> tuple[str, int, int] | None:
        """('cell', i, j), ('row', i, -1), ('col', -1, j) or None for a canvas point (the label bands, pinned
        at the left and top of the view, come first)."""
        g, rows = self.geometry(), self.rows()
        if g is None or rows is None:
            return None
        shown = self.shown_rect()
        x, y = pos.x() - shown.x(), pos.y() - shown.y()  # in the view
        n, c = len(rows.nodes), g.cell
        i = (pos.y() - g.gy) // c if pos.y() >= g.gy else -1
        j = (pos.x() - g.gx) // c if pos.x() >= g.gx else -1
        if y < g.gy:  # the column band
            return ("col", -1, j) if 0 <= j < n and y >= g.legend_y + 20 and x >= g.gx else None
        if x < g.gx:  # the row band
            return ("row", i, -1) if 0 <= i < n and x >= MARGIN else None
        if 0 <= i < n and 0 <= j < n:
            return ("cell", i, j)
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
                        "Click a row, cell or column to select its node; Ctrl+wheel or Ctrl+plus/minus zooms (small\n"
                        "cells label every few rows; zoomed in, every row), double-click the background fits.")
            return ""
        kind, i, j = h
        rec, label = rows.record, self.model.vocab.label
        if kind == "cell":
            a, b = rows.nodes[i], rows.nodes[j]
            verb = "attends to" if rec.mask[i, j] else "does not attend to"
            return (f"row {i} (token '{label(a.token, 24)}', pos {rec.positions[i]}) {verb} column {j} "
                    f"(token '{label(b.token, 24)}', pos {rec.positions[j]})\nclick: select node {a.id}")
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

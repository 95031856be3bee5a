"""The KV cache around the current cycle: before the forward, the verify block, after the trim.

The cells and where they go are worked out in :mod:`.layout`; this panel follows the model, draws them,
and answers hovers and clicks.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint, QPointF, QRect, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetrics,
    QHelpEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QPen,
)
from PySide6.QtWidgets import QToolTip, QWidget

from specviz_app.panels.base import PanelMixin, placeholder
from specviz_app.panels.kv.layout import (
    MARGIN,
    STRIP_NAMES,
    STRIPS,
    Cell,
    KVLayout,
    OldPosition,
    layout_kv,
    old_positions,
    sized_font,
)
from specviz_app.theme import ACCEPTED, GATED, SOURCE_COLORS, SOURCE_LABELS, source_color
from specviz_core.records import CycleRecord

STRIP_HELP = {
    "header": "Cache slot p holds context token p. The forward writes the verify block after the cache; the trim keeps\n"
              "the root and the accepted rows, moved to the slots right after the old ones, and drops the rest.",
    "before": "The KV cache before this cycle's forward: the prompt and every committed token but the root.\n"
              "Colour: how each token was committed. Long caches show their last positions only.",
    "verify": "The verify block: one row per verified node, written at the slots after the cache.\n"
              "Colour: the node's source; a green bar marks the rows whose KV is kept. Click to select a node.",
    "after": "The cache after the trim: the old positions, the kept rows compacted after them,\n"
             "then the dropped (rejected) rows, hatched grey.",
}


class KVView(PanelMixin, QWidget):
    """Three strips: the cache before the forward, the verify block, and the cache after the trim."""

    title = "KV cache"

    def __init__(self, model, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout: KVLayout | None = None
        self._old: tuple[int, list[tuple[int, int, str, int]]] | None = None
        self.setMouseTracking(True)
        self.setMinimumSize(280, 170)
        self.connect_model(model)

    # -- model events -------------------------------------------------------------------
    def on_session_opened(self, source) -> None:
        self.update()

    def on_session_closed(self) -> None:
        self.update()

    def on_cycle_changed(self, record: CycleRecord) -> None:
        self.update()

    def on_node_selected(self, node_id: int | None) -> None:
        self.update()

    def changeEvent(self, e: QEvent) -> None:
        if e.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._layout = None
        super().changeEvent(e)

    # -- what is shown --------------------------------------------------------------------
    def counts(self) -> tuple[int, int, int, int] | None:
        """(cache before, cache after, kept rows, dropped rows) of the current cycle."""
        rec = self.model.record
        if rec is None:
            return None
        kept = len(rec.kv_keep)
        return rec.cache_len, rec.cache_len + kept, kept, rec.n_verified - kept

    def counts_text(self) -> str:
        c = self.counts()
        if c is None:
            return ""
        before, after, kept, dropped = c
        rec = self.model.record
        root = bool(rec.kv_keep) and rec.kv_keep[0] == 0
        kept_s = (f"root + {kept - 1} accepted" if kept > 1 else "root") if root else f"{kept} rows"
        dropped_s = f"{dropped} rejected" if dropped else "none"
        return f"cache {before:,} → {after:,} positions: kept {kept_s}, dropped {dropped_s}"

    def fitted_counts_text(self, fm: QFontMetrics, width: int) -> str:
        """The counts line at ``width``: in words where it fits, else in numbers (a narrow dock cut the words to
        "dropped 59 rejec…"), elided only when even that does not fit."""
        c = self.counts()
        if c is None:
            return ""
        full = self.counts_text()
        if fm.horizontalAdvance(full) <= width:
            return full
        before, after, kept, dropped = c
        short = f"cache {before:,} → {after:,}: kept {kept}, dropped {dropped}"
        return short if fm.horizontalAdvance(short) <= width else fm.elidedText(short, Qt.TextElideMode.ElideRight,
                                                                                  width)

    def strip_subtitles(self) -> tuple[str, str, str]:
        """The line under each strip's name: cache lengths and the block's slots."""
        c = self.counts()
        if c is None:
            return ("", "", "")
        before, after, _, _ = c
        n = self.model.record.n_verified
        at = f"at {before:,}" + (f"–{before + n - 1:,}" if n > 1 else "")
        return (f"{before:,} positions", at, f"{after:,} positions")

    def old_positions(self, count: int) -> list[OldPosition]:
        """The last ``count`` cached positions before this cycle: (slot, token, kind, committing cycle or -1)."""
        rec = self.model.record
        if rec is None:
            return []
        key = (id(rec), count)
        if self._old is None or self._old[0] != key:
            self._old = (key, old_positions(rec, self.model.source, count))
        return self._old[1]

    # -- layout -------------------------------------------------------------------------------
    def layout_cells(self) -> KVLayout | None:
        rec = self.model.record
        if rec is None or not rec.verify_order:
            return None
        key = (id(rec), self.width(), self.height(), self.font().key())
        if self._layout is None or self._layout.key != key:
            self._layout = layout_kv(rec, self.width(), self.height(), self.font(), self.strip_subtitles(),
                                     self.old_positions, self.model.vocab.label, key)
        return self._layout

    def cell(self, strip: str, row: int = -1, slot: int = -1) -> Cell | None:
        """The cell of verify ``row`` in a strip, or of cache ``slot`` (old positions)."""
        lay = self.layout_cells()
        for c in lay.cells if lay else ():
            if c.strip == strip and ((row >= 0 and c.row == row) or (row < 0 and c.slot == slot and c.row < 0)):
                return c
        return None

    def selected_cells(self) -> list[Cell]:
        """The cells of the selected node (its verify row, and where the trim put it)."""
        lay, sel = self.layout_cells(), self.model.selected_node
        return [c for c in lay.cells if c.node is not None and c.node.id == sel] if lay and sel is not None else []

    def cell_at(self, pos: QPoint) -> Cell | None:
        lay = self.layout_cells()
        for c in lay.cells if lay else ():
            if c.rect.adjusted(0, 0, 1, 0).contains(pos):
                return c
        return None

    # -- interaction ------------------------------------------------------------------------------
    def tooltip_at(self, pos: QPoint) -> str:
        lay, rec = self.layout_cells(), self.model.record
        if lay is None or rec is None:
            return ""
        for r in lay.elided.values():
            if r.contains(pos):
                return f"positions 0–{lay.n_elided - 1:,}: {lay.n_elided:,} earlier tokens in the cache (not drawn)"
        c = self.cell_at(pos)
        if c is None:
            if pos.x() < lay.x0:
                for strip, y in lay.strip_y.items():
                    if y <= pos.y() < y + lay.strip_h:
                        return STRIP_HELP[strip]
            if pos.y() < lay.strip_y["before"]:
                return STRIP_HELP["header"]
            return ""
        label = self.model.vocab.label
        tok = f"'{label(c.token, 24)}'" if c.token >= 0 else "(token unknown)"
        if c.node is None:
            how = "prompt" if c.cycle < 0 else f"{c.kind}, committed in cycle {c.cycle}"
            return f"position {c.slot:,}: {tok} ({how})\nin the cache before this cycle, kept"
        node = c.node
        what = f"node {node.id} {tok} ({SOURCE_LABELS.get(node.source, node.source)}), depth {node.depth}"
        fate = ("dropped: rejected, its KV is discarded" if c.dropped
                else f"kept: compacted to position {rec.cache_len + rec.kv_keep.index(c.row):,}")
        if c.strip == "verify":
            return (f"row {c.row} at position {c.slot:,} (position id {rec.positions[c.row]:,}): {what}\n{fate}"
                    f"\nclick: select node {node.id}")
        where = f"position {c.slot:,}" if not c.dropped else f"row {c.row}"
        return f"{where}: {what}\n{fate}\nclick: select node {node.id}"

    def event(self, e: QEvent) -> bool:
        if e.type() == QEvent.Type.ToolTip and isinstance(e, QHelpEvent):
            tip = self.tooltip_at(e.pos())
            if tip:
                QToolTip.showText(e.globalPos(), tip, self)
            else:
                QToolTip.hideText()
                e.ignore()
            return True
        return super().event(e)

    def mousePressEvent(self, e: QMouseEvent) -> None:
        c = self.cell_at(e.position().toPoint())
        if e.button() == Qt.MouseButton.LeftButton and c is not None and c.node is not None:
            self.model.select_node(c.node.id)
        super().mousePressEvent(e)

    # -- drawing ----------------------------------------------------------------------------------
    def dropped_color(self) -> QColor:
        """Fill of a dropped row's cell (hatched over with the gated grey)."""
        base = self.palette().color(QPalette.ColorRole.Base)
        g = QColor(GATED)
        return QColor((base.red() + g.red()) // 2, (base.green() + g.green()) // 2, (base.blue() + g.blue()) // 2)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        try:
            self._paint(p)
        finally:
            p.end()

    def _paint(self, p: QPainter) -> None:
        pal = self.palette()
        text, dim = pal.color(QPalette.ColorRole.WindowText), pal.color(QPalette.ColorRole.PlaceholderText)
        p.fillRect(self.rect(), pal.color(QPalette.ColorRole.Window))
        lay, rec = self.layout_cells(), self.model.record
        if lay is None or rec is None:
            p.setPen(dim)
            p.drawText(self.rect().adjusted(8, 8, -8, -8), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
                       placeholder(self.model))
            return
        fm = QFontMetrics(self.font())
        lh = fm.height() + 4
        bold = QFont(self.font())
        bold.setBold(True)
        p.setFont(bold)
        p.setPen(text)
        p.drawText(QPointF(MARGIN, MARGIN + fm.ascent()), self.fitted_counts_text(QFontMetrics(bold),
                                                                               self.width() - 2 * MARGIN))
        p.setFont(self.font())
        self._paint_legend(p, lay, MARGIN + lh, fm, text)

        sh = lay.strip_h
        right = Qt.AlignmentFlag.AlignRight
        for strip, sub in zip(STRIPS, self.strip_subtitles()):
            r = QRect(MARGIN, lay.strip_y[strip] + sh // 2 - fm.height(), lay.x0 - MARGIN - 6, fm.height())
            p.setPen(text)
            p.drawText(r, right | Qt.AlignmentFlag.AlignBottom, STRIP_NAMES[strip])
            p.setPen(dim)
            p.drawText(r.translated(0, fm.height()), right | Qt.AlignmentFlag.AlignTop, sub)
        for r in lay.elided.values():
            p.setPen(QPen(dim, 1, Qt.PenStyle.DashLine))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(r.adjusted(0, 0, -1, -1))
            p.drawText(r, Qt.AlignmentFlag.AlignCenter, f"… {lay.n_elided:,} earlier")

        sel = self.model.selected_node
        dropped_fill = self.dropped_color()
        gated = QColor(GATED)
        hatch = QBrush(gated, Qt.BrushStyle.BDiagPattern)
        accepted = QColor(ACCEPTED)
        colors: dict[str, QColor] = {}
        labels: dict[bool, list[tuple[QRect, str]]] = {True: [], False: []}
        highlight: list[QRect] = []
        p.setPen(QPen(gated, 1))
        for c in lay.cells:
            r = c.rect
            if c.dropped and c.strip == "after":
                p.fillRect(r, dropped_fill)
                p.fillRect(r, hatch)
                p.drawLine(r.left(), r.center().y(), r.right(), r.center().y())
            else:
                color = colors.get(c.kind)
                if color is None:
                    color = colors[c.kind] = source_color(c.kind)
                p.fillRect(r, color)
                if c.text:
                    labels[c.node is not None].append((r, c.text))
            if c.strip == "verify" and not c.dropped:
                p.fillRect(QRect(r.left(), r.bottom() + 2, r.width(), 3), accepted)
            if c.node is not None and c.node.id == sel:
                highlight.append(r)
        # Token labels read bottom-up inside their cells: one rotation for all of them.
        p.save()
        p.rotate(-90)
        p.setPen(QColor("#ffffff"))
        for is_block, px in ((True, lay.font_px), (False, lay.old_font_px)):
            if labels[is_block]:
                font = sized_font(self.font(), px)
                p.setFont(font)
                fmc = QFontMetrics(font)
                off = (fmc.ascent() - fmc.descent()) / 2
                for r, t in labels[is_block]:
                    p.drawText(QPointF(-(r.bottom() - 3), r.left() + r.width() / 2 + off), t)
        p.restore()
        self._paint_connectors(p, lay, rec)
        self._paint_ticks(p, lay, rec, fm, dim)
        if highlight:
            p.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 2))
            p.setBrush(Qt.BrushStyle.NoBrush)
            for r in highlight:
                p.drawRect(r.adjusted(-2, -2, 2, 2))

    def _paint_connectors(self, p: QPainter, lay: KVLayout, rec: CycleRecord) -> None:
        """A line from each kept verify row to its compacted slot after the trim."""
        src = {c.row: c.rect for c in lay.cells if c.strip == "verify"}
        dst = {c.row: c.rect for c in lay.cells if c.strip == "after" and not c.dropped}
        p.setPen(QPen(QColor(ACCEPTED), 1.5))
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        for row in rec.kv_keep:
            a, b = src.get(row), dst.get(row)
            if a is not None and b is not None:
                p.drawLine(QPointF(a.center().x() + 0.5, a.bottom() + 6), QPointF(b.center().x() + 0.5, b.top() - 2))
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)

    def _paint_ticks(self, p: QPainter, lay: KVLayout, rec: CycleRecord, fm: QFontMetrics, dim: QColor) -> None:
        """Position numbers where they matter: the shown old slots and the new cache end."""
        p.setPen(dim)
        sh = lay.strip_h
        before = [c for c in lay.cells if c.strip == "before"]
        kept = [c for c in lay.cells if c.strip == "after" and c.node is not None and not c.dropped]

        def tick(x: int, y: int, s: str, right: bool = False) -> None:
            w = fm.horizontalAdvance(s)
            p.drawText(QPointF(x - w if right else x, y + fm.ascent() + 1), s)

        if before:
            first, last = f"{before[0].slot:,}", f"{before[-1].slot:,}"
            tick(before[-1].rect.right() + 1, lay.strip_y["before"] + sh, last, right=True)
            room = before[-1].rect.right() - before[0].rect.left() - fm.horizontalAdvance(first + last)
            if len(before) > 1 and room > 8:
                tick(before[0].rect.left(), lay.strip_y["before"] + sh, first)
        y = lay.strip_y["after"] + sh
        if kept:
            end = kept[-1].rect.right() + 1
            p.drawLine(end, lay.strip_y["after"] - 3, end, y + fm.height())
            s = f"new length {rec.cache_len + len(kept):,}"
            fits = end + 3 + fm.horizontalAdvance(s) <= self.width() - MARGIN
            tick(end + 3 if fits else end - 3, y, s, right=not fits)
        nxt = (f"next root: bonus '{self.model.vocab.label(rec.bonus_token, 16)}' at position "
               f"{rec.cache_len + len(kept):,} (its KV is written by the next forward)")
        p.drawText(QPointF(MARGIN, y + fm.height() + fm.ascent() + 2),
                   fm.elidedText(nxt, Qt.TextElideMode.ElideRight, self.width() - 2 * MARGIN))

    def _paint_legend(self, p: QPainter, lay: KVLayout, y: int, fm: QFontMetrics, text: QColor) -> None:
        """Colours present in the strips (how each token got there), then the kept and dropped marks."""
        s = fm.height() - 6
        x = MARGIN
        present = {c.kind for c in lay.cells}
        kinds = [k for k in SOURCE_COLORS if k in present] + sorted(present - set(SOURCE_COLORS))
        p.setPen(text)
        for name in kinds + ["kept", "dropped"]:
            r = QRect(x, y + 3, s, s)
            if name == "kept":
                p.fillRect(QRect(x, y + 3 + s - 3, s, 3), QColor(ACCEPTED))
            elif name == "dropped":
                p.fillRect(r, self.dropped_color())
                p.fillRect(r, QBrush(QColor(GATED), Qt.BrushStyle.BDiagPattern))
            else:
                p.fillRect(r, source_color(name))
            x += s + 4
            p.drawText(QPointF(x, y + fm.ascent()), name)
            x += fm.horizontalAdvance(name) + 10

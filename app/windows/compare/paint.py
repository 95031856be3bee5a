"""Painting the Compare view's pictures: outputs aligned by token position, time to token, accepted per cycle.

Plain QPainter on a given rectangle and font size, so the window, presentation mode and ``specviz compare --out``
draw the same thing at any scale. The data is :class:`specviz_core.analysis.compare.Comparison`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QPainterPath, QPen

from specviz_app.theme import REJECTED, SOURCE_COLORS
from specviz_app.windows.race.view import LANE_COLORS
from specviz_core.analysis.compare import Comparison
from specviz_core.runtime.vocab import TokenText

FORK_COLOR = "#8e44ad"


def lane_color(i: int) -> QColor:
    return QColor(LANE_COLORS[i % len(LANE_COLORS)])


@dataclass(frozen=True)
class Cell:
    """One token of one session in the aligned outputs."""

    rect: QRectF
    row: int
    position: int
    cycle: int


class AlignedLayout:
    """Where every token of every session goes: columns by output position (one width for all sessions, the widest
    token's), wrapped into bands of one row per session."""

    def __init__(self, comparison: Comparison, vocab: TokenText, font: QFont, width: float) -> None:
        self.font = font
        fm = QFontMetricsF(font)
        self.row_h = fm.height() * 1.45
        sessions = comparison.sessions
        self.labels = [f"{s.info.method} {s.info.id[:6]}" for s in sessions]
        self.label_w = max(fm.horizontalAdvance(t) for t in self.labels) + fm.height() * 0.6
        self.tokens = [s.token_cycles() for s in sessions]
        self.texts = [[vocab.text([t]).replace("\n", "↵") for t, *_ in toks] for toks in self.tokens]
        n = max(len(t) for t in self.tokens)
        pad = fm.height() * 0.5
        widths = []
        for pos in range(n):
            w = max((fm.horizontalAdvance(txt[pos]) for txt in self.texts if pos < len(txt)), default=0.0)
            widths.append(min(max(w + pad, fm.height() * 0.9), fm.height() * 7))
        self.cells: list[Cell] = []
        self.bands: list[tuple[float, int, int]] = []  # (top, first position, end position)
        x, top, band_start = self.label_w, 0.0, 0
        band_h = self.row_h * len(sessions) + fm.height() * 0.6
        xs = []
        for pos, w in enumerate(widths):
            if x + w > width and pos > band_start:
                self.bands.append((top, band_start, pos))
                top += band_h
                x, band_start = self.label_w, pos
            xs.append((x, top, w))
            x += w
        self.bands.append((top, band_start, n))
        self.height = top + band_h
        for row, toks in enumerate(self.tokens):
            for pos, (_, _, cycle, _) in enumerate(toks):
                cx, ct, w = xs[pos]
                self.cells.append(Cell(QRectF(cx, ct + row * self.row_h, w, self.row_h - 2), row, pos, cycle))

    def cell_at(self, p: QPointF) -> Cell | None:
        return next((c for c in self.cells if c.rect.contains(p)), None)


def paint_aligned(p: QPainter, layout: AlignedLayout, comparison: Comparison, fg: QColor, dark: bool,
                  selected: int | None = None) -> None:
    """Tokens coloured by how each session committed them, a bar at every cycle boundary, the first difference
    outlined in red, a fork's own part starting at a purple marker, the ``selected`` position framed in every row."""
    p.setFont(layout.font)
    sessions = comparison.sessions
    diff = comparison.first_difference() if comparison.same_prompt() else None
    for top, _, _ in layout.bands:
        for row, s in enumerate(sessions):
            p.setPen(lane_color(row))
            p.drawText(QRectF(0, top + row * layout.row_h, layout.label_w, layout.row_h - 2),
                       Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, layout.labels[row])
    forks = [s.fork_position for s in sessions]
    for cell in layout.cells:
        tok, kind, cycle, first = layout.tokens[cell.row][cell.position]
        color = QColor(SOURCE_COLORS.get(kind, "#7f8c8d"))
        color.setAlpha(110 if dark else 70)
        p.fillRect(cell.rect, color)
        if first:
            p.fillRect(QRectF(cell.rect.left(), cell.rect.top(), 2.5, cell.rect.height()), fg)
        p.setPen(fg)
        p.drawText(cell.rect.adjusted(3, 0, -1, 0), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                   layout.texts[cell.row][cell.position])
        if cell.position == diff:
            p.setPen(QPen(QColor(REJECTED), 2.5))
            p.drawRect(cell.rect.adjusted(1, 1, -1, -1))
        if forks[cell.row] is not None and cell.position == forks[cell.row]:
            p.fillRect(QRectF(cell.rect.left() - 2, cell.rect.top() - 3, 5, cell.rect.height() + 6),
                       QColor(FORK_COLOR))
        if cell.position == selected:
            p.setPen(QPen(fg, 2.0, Qt.PenStyle.DashLine))
            p.drawRect(cell.rect.adjusted(0.5, 0.5, -0.5, -0.5))


def _axes(p: QPainter, r: QRectF, font: QFont, fg: QColor, title: str, x_label: str, y_max: float,
          x_max: float) -> QRectF:
    """Title, axes with end labels; returns the plotting rectangle."""
    fm = QFontMetricsF(font)
    p.setFont(font)
    p.setPen(fg)
    p.drawText(QRectF(r.left(), r.top(), r.width(), fm.height() * 1.3), Qt.AlignmentFlag.AlignLeft, title)
    left = fm.horizontalAdvance(f"{y_max:g}") + fm.height() * 0.6
    plot = QRectF(r.left() + left, r.top() + fm.height() * 1.5, r.width() - left - fm.height() * 0.5,
                  r.height() - fm.height() * 3.0)
    axis = QColor(fg)
    axis.setAlpha(140)
    p.setPen(QPen(axis, 1))
    p.drawLine(plot.bottomLeft(), plot.bottomRight())
    p.drawLine(plot.bottomLeft(), plot.topLeft())
    p.setPen(fg)
    p.drawText(QRectF(r.left(), plot.top() - fm.height() / 2, left - 4, fm.height()), Qt.AlignmentFlag.AlignRight,
               f"{y_max:g}")
    p.drawText(QRectF(r.left(), plot.bottom() - fm.height() / 2, left - 4, fm.height()), Qt.AlignmentFlag.AlignRight,
               "0")
    p.drawText(QRectF(plot.left(), plot.bottom() + 2, plot.width(), fm.height() * 1.3),
               Qt.AlignmentFlag.AlignHCenter, x_label)
    if x_label:
        p.drawText(QRectF(plot.left(), plot.bottom() + 2, plot.width(), fm.height() * 1.3),
                   Qt.AlignmentFlag.AlignRight, f"{x_max:g}")
    return plot


def paint_time_to_token(p: QPainter, r: QRectF, comparison: Comparison, font: QFont, fg: QColor) -> None:
    """Tokens committed against wall-clock seconds, one line per session (decode time; prefill excluded)."""
    lines = [s.time_to_token() for s in comparison.sessions]
    t_max = max((pts[-1][0] for pts in lines), default=0.0) / 1000 or 1.0
    n_max = max((pts[-1][1] for pts in lines), default=0) or 1
    plot = _axes(p, r, font, fg, "Tokens committed over time", "seconds", n_max, round(t_max, 1))
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    for i, pts in enumerate(lines):
        path = QPainterPath()
        for k, (ms, n) in enumerate(pts):
            pt = QPointF(plot.left() + plot.width() * (ms / 1000) / t_max, plot.bottom() - plot.height() * n / n_max)
            path.moveTo(pt) if k == 0 else path.lineTo(pt)
        p.setPen(QPen(lane_color(i), max(2.0, font.pointSizeF() / 4)))
        p.drawPath(path)
    _legend(p, plot, comparison, font)


def paint_accepted(p: QPainter, r: QRectF, comparison: Comparison, font: QFont, fg: QColor) -> None:
    """Share of cycles that accepted 0, 1, 2, ... draft tokens, grouped bars per session."""
    hists = [s.accepted_per_cycle() for s in comparison.sessions]
    k_max = max((max(h) for h in hists if h), default=0)
    shares = [[h[k] / max(1, sum(h.values())) for k in range(k_max + 1)] for h in hists]
    top = max((max(sh) for sh in shares if sh), default=1.0) or 1.0
    plot = _axes(p, r, font, fg, "Share of cycles accepting k draft tokens", "", round(top, 2), k_max)
    n = len(shares)
    slot = plot.width() / (k_max + 1)
    bar = slot * 0.8 / n
    for i, sh in enumerate(shares):
        for k, v in enumerate(sh):
            h = plot.height() * v / top
            p.fillRect(QRectF(plot.left() + k * slot + slot * 0.1 + i * bar, plot.bottom() - h, bar * 0.9, h),
                       lane_color(i))
    fm = QFontMetricsF(font)
    p.setPen(fg)
    for k in range(k_max + 1):
        if k_max < 12 or k % 5 == 0 or k == k_max:
            p.drawText(QRectF(plot.left() + k * slot - slot, plot.bottom() + 2, 3 * slot, fm.height()),
                       Qt.AlignmentFlag.AlignHCenter, str(k))


def _legend(p: QPainter, plot: QRectF, comparison: Comparison, font: QFont) -> None:
    """Bottom right, where lines rising from the origin leave room."""
    fm = QFontMetricsF(font)
    y = plot.bottom() - fm.height() * (len(comparison.sessions) + 0.3)
    for i, s in enumerate(comparison.sessions):
        p.setPen(lane_color(i))
        p.drawText(QRectF(plot.left(), y, plot.width() - fm.height() * 0.3, fm.height()), Qt.AlignmentFlag.AlignRight,
                   f"{s.label} ——")
        y += fm.height()

"""The Compare view: sessions side by side (docs/compare-race.md).

The summary table (ratios against the first session), the outputs aligned by token position (coloured by how each
session committed each token, cycle boundaries drawn, the first difference outlined, a fork's own part marked),
tokens over time and accepted per cycle. Clicking a token asks to open that cycle of that session
(``cycle_requested``). :func:`render_png` draws it without a screen for ``specviz compare --out``.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QKeySequence, QMouseEvent, QPainter, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from specviz_core.compare import Comparison, fork_label
from specviz_core.vocab import TokenText

from .compare_paint import FORK_COLOR, AlignedLayout, lane_color, paint_accepted, paint_aligned, paint_time_to_token
from .panels.base import export_widget
from .theme import REJECTED, SOURCE_COLORS, is_dark

COLUMNS = ("Session", "Method", "Tokens", "Forwards", "Tokens/fwd", "Tokens/s", "Speed-up", "Tau ×", "Accepted by source")


def _fg_bg(widget: QWidget) -> tuple[QColor, QColor, bool]:
    dark = is_dark(widget.palette())
    return (QColor("#e8eaed"), QColor("#1e2227"), True) if dark else (QColor("#1d2125"), QColor("#ffffff"), False)


class AlignedOutputs(QWidget):
    """The outputs, one row per session, aligned by token position; click a token for its cycle."""

    clicked = Signal(int, int)
    """(session row, cycle index)"""

    def __init__(self, comparison: Comparison, vocab: TokenText, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.comparison, self.vocab = comparison, vocab
        self.pt = 10.0
        self.layout_: AlignedLayout | None = None
        self.setMouseTracking(True)
        self.setToolTip("Each session's output by token position: colour = how the token was committed, a dark bar "
                        "= a cycle boundary, red box = first difference, purple bar = where a fork's own settings "
                        "start. Click a token to open its cycle.")

    def set_pt(self, pt: float) -> None:
        self.pt = pt
        self._relayout()

    def _relayout(self) -> None:
        font = QFont(self.font())
        font.setPointSizeF(self.pt)
        self.layout_ = AlignedLayout(self.comparison, self.vocab, font, max(200.0, self.width() - 4))
        self.setMinimumHeight(int(self.layout_.height) + 4)
        self.update()

    def resizeEvent(self, e) -> None:  # noqa: N802
        self._relayout()
        super().resizeEvent(e)

    def paintEvent(self, _e) -> None:  # noqa: N802
        if self.layout_ is None:
            self._relayout()
        fg, bg, dark = _fg_bg(self)
        p = QPainter(self)
        try:
            p.fillRect(self.rect(), bg)
            paint_aligned(p, self.layout_, self.comparison, fg, dark)
        finally:
            p.end()

    def mousePressEvent(self, e: QMouseEvent) -> None:  # noqa: N802
        cell = self.layout_.cell_at(e.position()) if self.layout_ else None
        if cell is not None:
            self.clicked.emit(cell.row, cell.cycle)

    def mouseMoveEvent(self, e: QMouseEvent) -> None:  # noqa: N802
        cell = self.layout_.cell_at(e.position()) if self.layout_ else None
        if cell is not None:
            tok, kind, cycle, _ = self.layout_.tokens[cell.row][cell.position]
            s = self.comparison.sessions[cell.row]
            self.setToolTip(f"{s.info.method} {s.info.id}: position {cell.position}, token {tok} "
                            f"{self.layout_.texts[cell.row][cell.position]!r}, {kind}, cycle {cycle} (click opens it)")


class ChartsStrip(QWidget):
    """Tokens over time and accepted per cycle, side by side."""

    def __init__(self, comparison: Comparison, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.comparison = comparison
        self.pt = 10.0
        self.setMinimumHeight(180)

    def paintEvent(self, _e) -> None:  # noqa: N802
        fg, bg, _ = _fg_bg(self)
        font = QFont(self.font())
        font.setPointSizeF(self.pt)
        p = QPainter(self)
        try:
            p.fillRect(self.rect(), bg)
            r = QRectF(self.rect()).adjusted(6, 4, -6, -4)
            half = r.width() / 2
            paint_time_to_token(p, QRectF(r.left(), r.top(), half - 10, r.height()), self.comparison, font, fg)
            paint_accepted(p, QRectF(r.left() + half + 10, r.top(), half - 10, r.height()), self.comparison, font, fg)
        finally:
            p.end()


class CompareView(QWidget):
    """Summary table, aligned outputs, charts; ``set_presentation(True)`` makes everything large."""

    cycle_requested = Signal(str, int)
    """(session id, cycle index): open that cycle in the usual panels."""

    def __init__(self, comparison: Comparison, vocab: TokenText, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.comparison = comparison
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.headline = QLabel(self._headline())
        self.headline.setWordWrap(True)
        layout.addWidget(self.headline)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self._fill_table()
        self.outputs = AlignedOutputs(comparison, vocab)
        self.outputs.clicked.connect(lambda row, c: self.cycle_requested.emit(comparison.sessions[row].info.id, c))
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.outputs)
        self.charts = ChartsStrip(comparison)
        self.legend = QLabel(legend_html())
        self.legend.setWordWrap(True)
        layout.addWidget(self.table)
        layout.addWidget(self.legend)
        layout.addWidget(scroll, 1)
        layout.addWidget(self.charts)
        self.set_presentation(False)

    def _headline(self) -> str:
        c = self.comparison
        if not c.same_prompt():
            return "The sessions decode different prompts: their outputs are not comparable token by token."
        i = c.first_difference()
        forks = [f"{s.info.id} is a {fork_label(s.info)}" for s in c.sessions if s.info.parent_session]
        what = (f"Identical outputs ({len(c.base.output)} tokens)." if i is None else
                f"Outputs first differ at position {i}" + (" (sampled sessions)." if any(
                    s.info.temperature > 0 for s in c.sessions) else "."))
        return "  ".join([what, *(f + "." for f in forks), "Ratios are against the first session; click a token "
                          "to open its cycle."])

    def _fill_table(self) -> None:
        rows = self.comparison.rows()
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            src = ", ".join(f"{k} {v['accepted']}/{v['verified']}" for k, v in r["by_source"].items()) or "—"
            values = (r["session"], self.comparison.sessions[i].label.rsplit(" ", 1)[0], str(r["tokens"]),
                      str(r["forwards"]), f"{r['tau']:.2f}", f"{r['tokens_per_s']:.1f}",
                      "—" if r["speedup"] is None else f"{r['speedup']:.2f}×",
                      "—" if r["tau_ratio"] is None else f"{r['tau_ratio']:.2f}", src)
            for col, v in enumerate(values):
                item = QTableWidgetItem(v)
                if col == 0:
                    item.setForeground(lane_color(i))
                if 2 <= col <= 7:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, col, item)

    def set_presentation(self, on: bool) -> None:
        pt = 16.0 if on else 10.0
        font = QFont(self.font())
        font.setPointSizeF(pt)
        for w in (self.table, self.headline, self.legend):
            w.setFont(font)
        self.table.resizeRowsToContents()
        row_h = int(QFontMetricsF(font).height() * 1.5)
        self.table.verticalHeader().setMinimumSectionSize(row_h)
        self.table.setFixedHeight(int(self.table.horizontalHeader().sizeHint().height() + row_h * self.table.rowCount()
                                      + 8))
        self.outputs.set_pt(pt)
        self.charts.pt = pt * 0.9
        self.charts.setFixedHeight(int(pt * 17))
        self.charts.update()


def legend_html() -> str:
    kinds = (("spine", "spine"), ("branch", "branch"), ("ngram", "n-gram"), ("recycle", "recycled"),
             ("draft", "draft model"), ("bonus", "bonus"), ("ar", "AR"))
    def tint(hex_color: str) -> str:  # as the cells draw it: 70/255 of the colour over white
        c = QColor(hex_color)
        return QColor(*(round(255 + (v - 255) * 70 / 255) for v in (c.red(), c.green(), c.blue()))).name()

    sw = "".join(f"<span style='background:{tint(SOURCE_COLORS[k])}'>&nbsp;{t}&nbsp;</span> " for k, t in kinds)
    return (f"{sw}&nbsp; <b>|</b> cycle boundary &nbsp; <span style='color:{REJECTED}'>&#9633;</span> first "
            f"difference &nbsp; <span style='color:{FORK_COLOR}'>&#9646;</span> where a fork's own settings start")


class CompareWindow(QWidget):
    """The Compare view in its own window: F11 presentation (large, full screen), Esc closes."""

    def __init__(self, comparison: Comparison, vocab: TokenText, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("SpecViz — compare " + " · ".join(s.info.method for s in comparison.sessions))
        self.view = CompareView(comparison, vocab)
        QVBoxLayout(self).addWidget(self.view)
        self.presentation = False
        QShortcut(QKeySequence("F11"), self, self.toggle_presentation)
        QShortcut(QKeySequence("Esc"), self, self.close)
        self.resize(1100, 700)

    def toggle_presentation(self) -> None:
        self.presentation = not self.presentation
        self.view.set_presentation(self.presentation)
        self.showFullScreen() if self.presentation else self.showNormal()


def render_png(comparison: Comparison, vocab: TokenText, out: Path, size: tuple[int, int],
               presentation: bool = False) -> Path:
    """The Compare view at ``size`` as a PNG, without a screen."""
    view = CompareView(comparison, vocab)
    view.set_presentation(presentation)
    view.resize(*size)
    view.show()
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()
    view.outputs.set_pt(view.outputs.pt)  # laid out at its final width
    QApplication.processEvents()
    export_widget(view, out)
    view.close()
    return out


def click_position(view: CompareView, row: int, position: int) -> None:
    """Click the token at ``position`` of session ``row`` (tests, and keyboard users' future navigation)."""
    cell = next(c for c in view.outputs.layout_.cells if c.row == row and c.position == position)
    view.outputs.clicked.emit(cell.row, cell.cycle)

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
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from specviz_app.panels.base import export_widget
from specviz_app.theme import REJECTED, SOURCE_COLORS, is_dark
from specviz_app.windows.compare.paint import (
    FORK_COLOR,
    AlignedLayout,
    lane_color,
    paint_accepted,
    paint_aligned,
    paint_time_to_token,
)
from specviz_core.analysis.compare import Comparison, fork_label
from specviz_core.runtime.vocab import TokenText

COLUMNS = ("Session", "Method", "Tokens", "Forwards", "Tokens/fwd", "Tokens/s", "Speed-up", "Tau ×", "Accepted by source")


def _fg_bg(widget: QWidget) -> tuple[QColor, QColor, bool]:
    dark = is_dark(widget.palette())
    return (QColor("#e8eaed"), QColor("#1e2227"), True) if dark else (QColor("#1d2125"), QColor("#ffffff"), False)


class AlignedOutputs(QWidget):
    """The outputs, one row per session, aligned by token position; click a token for its cycle."""

    clicked = Signal(int, int)
    """(session row, cycle index)"""
    position_clicked = Signal(int)
    """The output position clicked (any row)."""
    height_changed = Signal(int)
    """The height the rows need at the current width (they rewrap on resize)."""

    def __init__(self, comparison: Comparison, vocab: TokenText, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.comparison, self.vocab = comparison, vocab
        self.pt = 10.0
        self.selected: int | None = None
        self.layout_: AlignedLayout | None = None
        self.setMouseTracking(True)
        self.setToolTip("Each session's output by token position: colour = how the token was committed, a dark bar "
                        "= a cycle boundary, red box = first difference, purple bar = where a fork's own settings "
                        "start. Click a token to open its cycle; the strip below then offers that position's cycle in every "
                        "session.")

    def set_pt(self, pt: float) -> None:
        self.pt = pt
        self._relayout()

    def _relayout(self) -> None:
        font = QFont(self.font())
        font.setPointSizeF(self.pt)
        self.layout_ = AlignedLayout(self.comparison, self.vocab, font, max(200.0, self.width() - 4))
        self.setMinimumHeight(int(self.layout_.height) + 4)
        self.height_changed.emit(self.minimumHeight())
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
            paint_aligned(p, self.layout_, self.comparison, fg, dark, self.selected)
        finally:
            p.end()

    def mousePressEvent(self, e: QMouseEvent) -> None:  # noqa: N802
        cell = self.layout_.cell_at(e.position()) if self.layout_ else None
        if cell is not None:
            self.selected = cell.position
            self.update()
            self.position_clicked.emit(cell.position)
            self.clicked.emit(cell.row, cell.cycle)

    def mouseMoveEvent(self, e: QMouseEvent) -> None:  # noqa: N802
        cell = self.layout_.cell_at(e.position()) if self.layout_ else None
        if cell is not None:
            tok, kind, cycle, _ = self.layout_.tokens[cell.row][cell.position]
            s = self.comparison.sessions[cell.row]
            self.setToolTip(f"{s.info.method} {s.info.id}: position {cell.position}, token {tok} "
                            f"{self.layout_.texts[cell.row][cell.position]!r}, {kind}, cycle {cycle} (click opens it)")


class PositionStrip(QWidget):
    """After a click on output position i: the cycle that committed position i in each session, one button each,
    so that cycle of every session opens in the usual panels."""

    cycle_requested = Signal(str, int)

    def __init__(self, comparison: Comparison, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.comparison = comparison
        self.row = QHBoxLayout(self)
        self.row.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel("Click a token above: its cycle in every session is offered here.")
        self.row.addWidget(self.label)
        self.buttons: list[QPushButton] = []
        self.row.addStretch(1)

    def show_position(self, position: int) -> None:
        for b in self.buttons:
            self.row.removeWidget(b)
            b.deleteLater()
        self.buttons = []
        self.label.setText(f"Position {position}:")
        for i, s in enumerate(self.comparison.sessions):
            toks = s.token_cycles()
            if position >= len(toks):
                continue
            _, kind, cycle, _ = toks[position]
            n = sum(1 for t in toks if t[2] == cycle)
            b = QPushButton(f"{s.info.method} cycle {cycle} ({n} token{'' if n == 1 else 's'})")
            b.setToolTip(f"Open cycle {cycle} of {s.info.method} {s.info.id} in the main window: it committed "
                         f"position {position} as {kind}")
            b.setStyleSheet(f"color: {lane_color(i).name()}")
            b.clicked.connect(lambda _=False, sid=s.info.id, c=cycle: self.cycle_requested.emit(sid, c))
            self.row.insertWidget(self.row.count() - 1, b)
            self.buttons.append(b)


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
        self.presentation = False
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
        self.at_position = PositionStrip(comparison)
        self.at_position.cycle_requested.connect(self.cycle_requested)
        self.outputs.position_clicked.connect(self.at_position.show_position)
        self.scroll = scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.outputs)
        # The outputs take the height they need (up to what is left), the charts the rest.
        self.outputs.height_changed.connect(lambda h: scroll.setMaximumHeight(h + 2 * scroll.frameWidth() + 2))
        self.charts = ChartsStrip(comparison)
        self.legend = QLabel(legend_html())
        self.legend.setWordWrap(True)
        layout.addWidget(self.table)
        layout.addWidget(self.legend)
        layout.addWidget(scroll, 3)
        layout.addWidget(self.at_position)
        layout.addWidget(self.charts, 1)  # short outputs leave their room to the charts
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

    def resizeEvent(self, e) -> None:  # noqa: N802
        super().resizeEvent(e)
        if self.presentation and abs(self._presentation_pt() - self.outputs.pt) > 0.5:
            self.set_presentation(True)  # full screen on a projector: text grows with the screen

    def _presentation_pt(self) -> float:
        """Large enough to read from the back of a room: 16 pt, more on a larger screen (22 pt at 1080 rows)."""
        return max(16.0, min(30.0, self.height() / 49))

    def set_presentation(self, on: bool) -> None:
        self.presentation = on
        pt = self._presentation_pt() if on else 10.0
        font = QFont(self.font())
        font.setPointSizeF(pt)
        for w in (self.table, self.headline, self.legend, self.at_position):
            w.setFont(font)
        self.table.resizeRowsToContents()
        row_h = int(QFontMetricsF(font).height() * 1.5)
        self.table.verticalHeader().setMinimumSectionSize(row_h)
        self.table.setFixedHeight(int(self.table.horizontalHeader().sizeHint().height() + row_h * self.table.rowCount()
                                      + 8))
        self.outputs.set_pt(pt)
        self.charts.pt = pt * 0.9
        self.charts.setMinimumHeight(int(pt * 12))
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
    from PySide6.QtTest import QTest

    cell = next(c for c in view.outputs.layout_.cells if c.row == row and c.position == position)
    QTest.mouseClick(view.outputs, Qt.MouseButton.LeftButton, pos=cell.rect.center().toPoint())

"""The timeline: every cycle as a bar (tokens it committed), the current one marked; drag to scrub, filter cycles."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QContextMenuEvent, QMouseEvent, QPainter, QPaintEvent, QPen, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QMenu, QToolButton, QToolTip, QWidget

from specviz_app.panels.base import PanelMixin
from specviz_app.panels.filter_editor import FilterEditor
from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.records import CycleRecord
from specviz_core.viewer.filters import CycleFilter
from specviz_core.viewer.sources import CycleSource

MODE_COLORS = {"ar": "#8a8f98", "chain": "#159a8c", "tree": "#e07b00", "bypass": "#1f77d0"}
DAMAGED_COLOR = "#c62828"
"""A cycle its recording could not give back: a full-height red bar."""


class TimelineStrip(QWidget):
    """Bars of committed tokens per cycle, bucketed to pixels; matching cycles bright, others faded."""

    def __init__(self, panel: TimelinePanel) -> None:
        super().__init__()
        self.panel = panel
        self.setMinimumHeight(34)
        self.setMouseTracking(True)
        self.setToolTip("Drag to scrub cycles; bar height = tokens committed, colour = mode; red = damaged; "
                        "right-click to fork from a cycle")
        self._committed = np.zeros(0, dtype=np.int32)
        self._damaged = np.zeros(0, dtype=bool)
        self._mode = np.zeros(0, dtype=np.int8)
        self._match = np.zeros(0, dtype=bool)
        self._modes = list(MODE_COLORS)
        self._bars: tuple[tuple, QPixmap] | None = None  # the bars drawn once per data and size
        self._version = 0
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)  # paints every pixel: no parent background

    def _changed(self) -> None:
        self._version += 1
        self.update()

    def set_data(self, summaries: list[CycleSummary], matching: np.ndarray) -> None:
        self._committed = np.fromiter((s.n_committed for s in summaries), dtype=np.int32, count=len(summaries))
        self._mode = np.fromiter((self._modes.index(s.mode) if s.mode in self._modes else 0 for s in summaries),
                                 dtype=np.int8, count=len(summaries))
        self._match = matching
        self._damaged = np.fromiter((bool(s.damaged) for s in summaries), dtype=bool, count=len(summaries))
        self._changed()

    def mark_damaged(self, index: int) -> None:
        """Cycle ``index`` turned out damaged when it was read."""
        if 0 <= index < len(self._damaged) and not self._damaged[index]:
            self._damaged[index] = True
            self._changed()

    def damaged_indices(self) -> list[int]:
        return [int(i) for i in np.flatnonzero(self._damaged)]

    def append(self, summaries: list[CycleSummary], matching: list[bool]) -> None:
        self._committed = np.concatenate([self._committed, [s.n_committed for s in summaries]]).astype(np.int32)
        self._mode = np.concatenate([self._mode, [self._modes.index(s.mode) if s.mode in self._modes else 0
                                                  for s in summaries]]).astype(np.int8)
        self._match = np.concatenate([self._match, np.asarray(matching, dtype=bool)])
        self._damaged = np.concatenate([self._damaged, [bool(s.damaged) for s in summaries]]).astype(bool)
        self._changed()

    def cycle_at(self, x: float) -> int:
        n = len(self._committed)
        if n == 0:
            return -1
        return int(np.clip(x / max(self.width(), 1) * n, 0, n - 1))

    @property
    def matching(self) -> int:
        """Cycles the filter matches."""
        return int(self._match.sum())

    def paintEvent(self, e: QPaintEvent) -> None:
        p = QPainter(self)
        n = len(self._committed)
        if n == 0:
            p.fillRect(self.rect(), self.palette().base())
            p.setPen(self.palette().placeholderText().color())
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "no cycles yet")
            p.end()
            return
        p.drawPixmap(0, 0, self._bars_pixmap())  # moving the cursor redraws no bar
        idx, w = self.panel.model.index, self.width()
        if 0 <= idx < n:
            x = (idx + 0.5) * w / n
            p.setPen(QPen(self.palette().text().color(), 2))
            p.drawLine(QPointF(x, 0), QPointF(x, self.height()))
        p.end()

    def _bars_pixmap(self) -> QPixmap:
        """Every bar and damaged mark, drawn once for this data, size and palette."""
        ratio = self.devicePixelRatioF()
        key = (self._version, self.width(), self.height(), ratio, self.palette().base().color().rgba())
        if self._bars is not None and self._bars[0] == key:
            return self._bars[1]
        pix = QPixmap(max(1, round(self.width() * ratio)), max(1, round(self.height() * ratio)))
        pix.setDevicePixelRatio(ratio)
        p = QPainter(pix)
        self._paint_bars(p, self.width(), self.height())
        p.end()
        self._bars = (key, pix)
        return pix

    def _paint_bars(self, p: QPainter, w: int, h: int) -> None:
        p.fillRect(QRectF(0, 0, w, h), self.palette().base())
        n = len(self._committed)
        top = max(int(self._committed.max()), 1)
        per_px = n / w
        if per_px <= 1:  # one bar per cycle
            bw = w / n
            for i in range(n):
                self._bar(p, i * bw, bw, self._committed[i], top, h, int(self._mode[i]), bool(self._match[i]))
        else:  # several cycles per pixel: the tallest bar, and matching if any is
            cols = np.minimum((np.arange(n) / per_px).astype(np.int64), w - 1)
            height = np.zeros(w, dtype=np.int32)
            np.maximum.at(height, cols, self._committed)
            match = np.zeros(w, dtype=bool)
            np.logical_or.at(match, cols, self._match)
            mode = np.zeros(w, dtype=np.int8)
            mode[cols] = self._mode
            for x in range(w):
                if height[x]:
                    self._bar(p, x, 1, height[x], top, h, int(mode[x]), bool(match[x]))
        for i in np.flatnonzero(self._damaged):  # over the bars: a damaged cycle has no height to show
            p.fillRect(QRectF(int(i) * w / n, 0, max(w / n - (1 if w / n > 3 else 0), 1), h), QColor(DAMAGED_COLOR))

    def _bar(self, p: QPainter, x: float, bw: float, value: int, top: int, h: int, mode: int, match: bool) -> None:
        color = QColor(MODE_COLORS[self._modes[mode]])
        if not match:
            color.setAlpha(50)
        bh = max(2.0, (h - 4) * value / top)
        p.fillRect(QRectF(x, h - bh, max(bw - (1 if bw > 3 else 0), 1), bh), color)

    def mousePressEvent(self, e: QMouseEvent) -> None:
        if e.button() == Qt.MouseButton.LeftButton:
            self.panel.scrub_to(self.cycle_at(e.position().x()))

    def contextMenuEvent(self, e: QContextMenuEvent) -> None:
        """Fork from the cycle under the pointer."""
        i = self.cycle_at(e.pos().x())
        if i < 0:
            return
        menu = QMenu(self)
        a = menu.addAction(f"Fork from cycle {i}…")
        a.setToolTip("A new session continues this one from this cycle with other settings")
        a.triggered.connect(lambda: self.panel.fork_requested.emit(i))
        self.panel.context_menu = menu
        menu.popup(e.globalPos())

    def mouseMoveEvent(self, e: QMouseEvent) -> None:
        i = self.cycle_at(e.position().x())
        if e.buttons() & Qt.MouseButton.LeftButton:
            self.panel.scrub_to(i)
        elif i >= 0:
            s = self.panel.model.summaries()[i]
            text = (f"cycle {i} is damaged: {s.damaged}" if s.damaged else
                    f"cycle {i} · {s.mode} · {s.n_committed} tokens ({s.n_accepted} accepted + bonus)")
            QToolTip.showText(e.globalPosition().toPoint(), text, self)


class TimelinePanel(PanelMixin, QWidget):
    """Scrub, step and filter cycles; the filter also decides which cycles Left/Right visit."""

    title = "Timeline"
    fork_requested = Signal(int)
    """Fork from this cycle… (the context menu)."""
    context_menu: QMenu | None = None

    def __init__(self, model, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(4, 2, 4, 2)
        self.prev_button = QToolButton()
        self.prev_button.setText("◀")
        self.prev_button.setToolTip("Previous cycle (Left)")
        self.next_button = QToolButton()
        self.next_button.setText("▶")
        self.next_button.setToolTip("Next cycle (Right)")
        self.prev_button.clicked.connect(lambda: self.model.move(-1))
        self.next_button.clicked.connect(lambda: self.model.move(1))
        self.strip = TimelineStrip(self)
        self.label = QLabel("—")
        self.label.setMinimumWidth(130)
        self.label.setToolTip("Current cycle / cycles in the session")
        self.filter_editor = FilterEditor("Filter:", "Show only cycles that match; Left/Right skip the others")
        self.matches = QLabel()
        self.matches.setToolTip("Cycles that match the filter")
        for w in (self.prev_button, self.next_button):
            row.addWidget(w)
        row.addWidget(self.strip, 1)
        row.addWidget(self.label)
        row.addSpacing(16)  # "cycle 5 · 36 cycles" and "Filter:" are two things: in large fonts they ran together
        row.addWidget(self.filter_editor)
        row.addWidget(self.matches)
        self.filter_editor.changed.connect(self._filter_edited)
        # Scrubbing fast: keep only the newest requested cycle, apply it when the UI is free.
        self._pending: int | None = None
        self._scrub_timer = QTimer(self)
        self._scrub_timer.setSingleShot(True)
        self._scrub_timer.setInterval(0)
        self._scrub_timer.timeout.connect(self._apply_scrub)
        self.connect_model(model)

    # -- model callbacks ----------------------------------------------------------------------
    def on_session_opened(self, source: CycleSource) -> None:
        self._refresh()

    def on_session_closed(self) -> None:
        self.strip.set_data([], np.zeros(0, dtype=bool))
        self.label.setText("—")
        self.matches.setText("")

    def on_cycles_appended(self, summaries: list[CycleSummary]) -> None:
        f = self.model.filter
        self.strip.append(summaries, [f(s) for s in summaries])
        self._update_label()

    def on_cycle_changed(self, record: CycleRecord | None) -> None:
        if record is None and self.model.damage_text:
            self.strip.mark_damaged(self.model.index)
        self._update_label()
        self.strip.update()

    # -- actions ------------------------------------------------------------------------------------
    def scrub_to(self, index: int) -> None:
        if index < 0:
            return
        self._pending = index
        self._scrub_timer.start()

    def _apply_scrub(self) -> None:
        if self._pending is not None:
            index, self._pending = self._pending, None
            self.model.set_cycle(index)

    def _filter_edited(self, f: CycleFilter) -> None:
        self.model.set_filter(f)
        self._refresh()

    def _refresh(self) -> None:
        summaries = self.model.summaries()
        f = self.model.filter
        self.strip.set_data(summaries, np.fromiter((f(s) for s in summaries), dtype=bool, count=len(summaries)))
        self._update_label()

    def _update_label(self) -> None:
        n = self.model.n_cycles
        damaged = " (damaged)" if self.model.damage_text else ""
        # Cycles are numbered from 0 everywhere (the tree, the title, --cycle); the count says how many there are.
        self.label.setText(f"cycle {self.model.index} · {n} cycle{'s' * (n != 1)}{damaged}" if n and self.model.index >= 0
                           else f"{n} cycle{'s' * (n != 1)}")
        if self.model.filter.kind != "all":
            self.matches.setText(f"{self.strip.matching} match")
        else:
            self.matches.setText("")

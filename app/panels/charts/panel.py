"""Charts: how a session's speculation went, cycle by cycle (pyqtgraph).

The charts are the registry's (:mod:`specviz_app.panels.charts.registry`, one module each), shown in a grid
(:mod:`.layout`) when they apply to the session: tau, tokens/s and the speed-up against the AR baseline, acceptance
per node source, by depth and rank and by draft position, why cycles stopped and the headroom, each cycle's time
against plain decoding, the verify cost curve, Goose's spine, TALON's delta, transformers' assistant schedule and
STAND's samples. The panel owns two parts: the drawing (:class:`~specviz_app.panels.charts.draw.ChartsDraw`: the
charts and what they draw from) and the mouse (:class:`~specviz_app.panels.charts.mouse.ChartsMouse`: click a per-cycle
chart to go to that cycle, double-click a chart to see it alone, again to see all). Plot items are made once and fed
with ``setData``/``setImage``; long series are clipped to the view and peak-downsampled. A vertical line marks the
current cycle; "Open in a window" asks the window to float the panel at full size. The numbers come from
:class:`~specviz_app.panels.charts.data.ChartData`.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QStackedLayout,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from specviz_app.panels.base import PanelMixin
from specviz_app.panels.charts.breakdown import CostActions, session_arithmetic
from specviz_app.panels.charts.chart import Chart, ChartInputs
from specviz_app.panels.charts.data import ChartData, cost_points
from specviz_app.panels.charts.draw import ChartsDraw
from specviz_app.panels.charts.layout import columns_for, grid_cells
from specviz_app.panels.charts.mouse import ChartsMouse
from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.records import CycleRecord
from specviz_core.viewer.samples import samples_of
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import CycleSource

HINT = "Step a cycle (F10) or open a recording"
REDRAW_MS = 40  # live appends are drawn at most this often
ROW_MIN_PX = 165  # below this a plot is unreadable: the grid scrolls instead


#: The charts presentation mode keeps: tokens per forward and tokens/s with the speed-up (every session has both).
STORY = ("tau", "tps")

class ChartsPanel(PanelMixin, QWidget):
    """Charts of the current session; the AR baseline and the cost curve are the session model's. For the main
    window: ``set_ar_baseline``, ``set_cost_curve``,
    ``set_font_scale``; ``flush`` draws pending live cycles now."""

    title = "Charts"
    pop_out_requested = Signal()
    """The user asked for the charts in their own window."""

    def __init__(self, model: SessionModel, parent: QWidget | None = None) -> None:
        QWidget.__init__(self, parent)
        self.columns = 0
        self.shown: list[str] = []
        """The charts that apply to the session, by name in the registry's order."""
        self.solo: str | None = None
        """The one chart shown alone (double-click), if any."""
        self.presenting = False
        """Presentation mode: only the charts that tell the story (:data:`STORY`), side by side."""
        self._placed: tuple = ()
        self._in_grid: list[Chart] = []
        self._font_scale = 1.0
        self._base_pt = self.font().pointSizeF()  # the app font grows in presentation mode: so do the charts

        self.glw = pg.GraphicsLayoutWidget()
        self.hint = QLabel(HINT)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll.setWidget(self.glw)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        bar = QHBoxLayout()
        bar.setContentsMargins(6, 1, 4, 1)
        self.tip = QLabel("Double-click a chart to see it alone")
        self.tip.setEnabled(False)
        bar.addWidget(self.tip, 1)
        self.pop_out = QToolButton(text="Open in a window")
        self.pop_out.setAutoRaise(True)
        self.pop_out.setToolTip("Show the charts in their own window, as large as you like")
        self.pop_out.clicked.connect(self.pop_out_requested.emit)
        bar.addWidget(self.pop_out)
        outer.addLayout(bar)
        self.actions = CostActions()
        """The "why slower" sentence and the Measure AR baseline / Measure cost curve buttons."""
        outer.addWidget(self.actions)
        stack_host = QWidget()
        outer.addWidget(stack_host, 1)
        self._stack = QStackedLayout(stack_host)
        self._stack.addWidget(self.hint)
        self._stack.addWidget(self.scroll)
        self.drawing = ChartsDraw(self.glw.scene())
        """The charts and what they draw from."""
        self.data: ChartData = self.drawing.inputs.data
        """The session's per-cycle numbers (reset in place: the same object for the panel's life)."""
        self.mouse = ChartsMouse(self.glw.scene(), self.drawing, lambda i: self.model.set_cycle(i), self._toggle_solo)
        """Click to go to a cycle, double-click to see a chart alone."""
        self._set_shown()
        self._layout(3)
        self._timer = QTimer(self, singleShot=True, interval=REDRAW_MS)
        self._timer.timeout.connect(self._redraw)
        self._why_timer = QTimer(self, singleShot=True, interval=300)  # the sentence reads every cycle: not per frame
        self._why_timer.timeout.connect(self._update_why)
        self._apply_palette()
        self.connect_model(model)
        model.baseline_changed.connect(self.set_ar_baseline)
        model.cost_curve_changed.connect(self.set_cost_curve)
        self.set_ar_baseline(*model.ar_baseline)
        if model.source is not None:
            self.on_session_opened(model.source)
            if model.record is not None:
                self.on_cycle_changed(model.record)

    # -- the charts --------------------------------------------------------------------------
    @property
    def inputs(self) -> ChartInputs:
        return self.drawing.inputs

    @property
    def cost_points(self) -> list[tuple[int, float]] | None:
        """The session's verify-cost curve as the charts have it: (block size N, forward ms) pairs."""
        return self.inputs.cost_points

    def chart(self, name: str) -> Chart:
        """The registered chart ``name``."""
        return self.drawing.charts[name]

    @property
    def plots(self) -> list[Chart]:
        """Every registered chart, in the registry's order (shown or not)."""
        return list(self.drawing.charts.values())

    def _toggle_solo(self, name: str) -> None:
        self.set_solo(None if self.solo else name)

    def _set_shown(self) -> bool:
        """Work out which charts apply; True if that changed."""
        shown = self.drawing.applicable()
        if self.solo not in shown:
            self.solo = None
        changed = shown != self.shown
        self.shown = shown
        return changed

    def _layout(self, columns: int) -> None:
        """The shown charts in ``columns`` columns (the wide per-cycle plots span two of three); one alone when
        double-clicked."""
        story = [n for n in self.shown if n in STORY] if self.presenting else []
        names = [self.solo] if self.solo else story or self.shown
        if story and not self.solo:
            columns = min(len(story), 2)
        placed = (tuple(names), columns)
        self.columns = columns
        if placed == self._placed:
            return
        grid = self.glw.ci.layout
        for p in self._in_grid:  # take every plot out first: a cell may still hold a plot that moves later
            grid.removeItem(p)
        cells = grid_cells(names, columns, () if story and not self.solo else self.drawing.wide)
        self._in_grid = []
        for name, p in self.drawing.charts.items():
            if name in cells:
                r, c, span = cells[name]
                grid.addItem(p, r, c, 1, span)
                self._in_grid.append(p)
                p.show()
            else:
                p.hide()
        rows = 1 + max((r for r, _, _ in cells.values()), default=0)
        for i in range(4):
            grid.setColumnStretchFactor(i, 1 if i < columns else 0)
            grid.setRowStretchFactor(i, 1 if i < rows else 0)
        self.glw.setMinimumHeight(rows * round(ROW_MIN_PX * self._font_scale))
        self._placed = placed
        grid.activate()  # place the plots now, not at the next event loop turn: what is drawn follows at once

    def on_presentation_changed(self, on: bool) -> None:
        """Presentation mode: the story's charts alone, no hint line; back to every chart after."""
        self.presenting = on
        self.tip.setVisible(not on)
        self._placed = ()
        self._layout(1 if self.solo else columns_for(self.width()))

    def set_solo(self, name: str | None) -> None:
        """Show chart ``name`` alone in the panel (None: all of them)."""
        self.solo = name if name in self.shown else None
        self._layout(1 if self.solo else columns_for(self.width()))

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._layout(1 if self.solo else columns_for(event.size().width()))
        super().resizeEvent(event)

    # -- theme -------------------------------------------------------------------------------
    def _apply_palette(self) -> None:
        pal, s = self.palette(), self._font_scale
        bg, fg = pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text)
        grey, hi = pal.color(QPalette.ColorRole.PlaceholderText), pal.color(QPalette.ColorRole.Highlight)
        self.glw.setBackground(bg)
        self.hint.setStyleSheet(f"color: {grey.name()}; font-size: {round(11 * s)}pt;")
        self.drawing.apply_theme(fg, grey, hi, s)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._apply_palette()
        elif event.type() == QEvent.Type.FontChange and self._base_pt > 0:
            self.set_font_scale(self.font().pointSizeF() / self._base_pt)
        super().changeEvent(event)

    def set_font_scale(self, scale: float) -> None:
        """Larger (presentation mode) or smaller chart fonts; 1.0 is the default. Follows the widget's font."""
        if scale == self._font_scale:
            return
        self._font_scale = scale
        self._apply_palette()
        self._placed = ()
        self._layout(self.columns)

    # -- inputs from the main window ------------------------------------------------------------
    def set_ar_baseline(self, tokens_per_s: float | None, note: str = "", forward_ms: float | None = None) -> None:
        """The AR rate (tokens/s) to compare against, measured on the same prompt, and its median forward (ms); None:
        no baseline."""
        self._take_baseline(tokens_per_s, note, forward_ms)
        self.drawing.draw()
        self._update_why()

    def set_cost_curve(self, points: list[tuple[int, float]] | dict | None) -> None:
        """Forward ms against verify block size N (pairs, or a stored curve's dict); None: not measured."""
        self.inputs.cost_points = cost_points(points)
        self.drawing.draw()
        if self._set_shown():
            self._layout(self.columns)
        self._update_why()

    def _take_baseline(self, tokens_per_s: float | None, note: str, forward_ms: float | None = None) -> None:
        self.inputs.ar_tokens_per_s = float(tokens_per_s) if tokens_per_s and tokens_per_s > 0 else None
        self.inputs.ar_note = note
        self.inputs.ar_forward_ms = forward_ms

    # -- model events ---------------------------------------------------------------------------
    def on_session_opened(self, source: CycleSource) -> None:
        self._timer.stop()
        self.data.reset()
        self.data.extend(source.summaries())
        s, info = self.inputs, source.info
        s.method = info.method
        rec = getattr(source, "recording", None)  # a live session is not one of a group
        s.samples = samples_of(rec, info) if rec is not None and getattr(info, "group_id", None) else []
        s.session_id = getattr(info, "id", "")
        self._stack.setCurrentWidget(self.scroll if self.data.n else self.hint)
        # The session's facts, as the session model holds them (a curve of another model or device does not apply).
        self._take_baseline(*self.model.ar_baseline)
        s.cost_points = cost_points(self.model.cost_curve)
        self._redraw()
        self._update_why()

    def on_session_closed(self) -> None:
        self._timer.stop()
        self.data.reset()
        self.inputs.samples, self.inputs.session_id = [], ""
        self._redraw()
        self.drawing.show_cycle(None, None)
        self._stack.setCurrentWidget(self.hint)

    def on_cycles_appended(self, summaries: list[CycleSummary]) -> None:
        self.data.extend(summaries)
        self._stack.setCurrentWidget(self.scroll)
        if not self._timer.isActive():
            self._timer.start()

    def on_cycle_changed(self, record: CycleRecord | None) -> None:
        self.drawing.show_cycle(self.model.index, record)

    def flush(self) -> None:
        """Draw appended cycles now instead of at the next redraw tick."""
        if self._timer.isActive():
            self._timer.stop()
            self._redraw()

    # -- drawing --------------------------------------------------------------------------------
    def _redraw(self) -> None:
        self.drawing.draw()
        if not self._why_timer.isActive():
            self._why_timer.start()
        if self._set_shown():
            self._layout(self.columns)

    def _update_why(self) -> None:
        """The session's "why slower" sentence and breakdown (after the data or the baseline or curve changed)."""
        self._why_timer.stop()
        s, source = self.inputs, self.model.source
        summaries = source.summaries() if source is not None else []
        is_ar = source is not None and source.info.method == "ar"
        # An AR session is its own baseline: it is the unit, so its speed-up says nothing.
        s.arithmetic = session_arithmetic(summaries, s.cost_points, None if is_ar else s.ar_tokens_per_s, s.ar_note,
                                          s.ar_forward_ms)
        self.actions.show_state(s.arithmetic, has_session=bool(summaries), is_ar=is_ar,
                                has_baseline=s.ar_tokens_per_s is not None, has_curve=bool(s.cost_points))
        self.drawing.arithmetic_changed()

    def export_target(self) -> QWidget:
        return self.glw

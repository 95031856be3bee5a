"""Charts: how a session's speculation went, cycle by cycle (pyqtgraph).

Up to eight plots in a grid, only those that apply to the session (:mod:`.charts_layout`): tau per cycle and
its rolling mean; tokens/s with the speed-up against a measured AR baseline; cumulative acceptance per node
source (Goose's p_s and p_t); Goose's spine ratio and EMA with bypass cycles marked; TALON's delta against tau;
acceptance by depth and sibling rank; the verify cost curve once measured; transformers' assistant schedule
(:mod:`.chart_schedule`). Plot items are made once and fed
with ``setData``/``setImage``; long series are clipped to the view and peak-downsampled. A vertical line marks
the current cycle; clicking a per-cycle plot jumps there; double-clicking a plot shows it alone (again: all);
"Open in a window" asks the window to float the panel at full size. The numbers come from
:class:`~specviz_app.panels.charts.data.ChartData`.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPalette, QResizeEvent
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
from specviz_app.panels.charts.breakdown import CostActions, CostPlot, update_why
from specviz_app.panels.charts.causes import CausePlot
from specviz_app.panels.charts.data import WINDOW, ChartData, cost_points
from specviz_app.panels.charts.draw import SPINE_Y, ChartsDraw
from specviz_app.panels.charts.headroom import HeadroomPlot
from specviz_app.panels.charts.heat import HeatmapPlot
from specviz_app.panels.charts.layout import applicable, columns_for, grid_cells
from specviz_app.panels.charts.mouse import PLOT_HELP, ChartsMouse
from specviz_app.panels.charts.plot import ChartPlot
from specviz_app.panels.charts.positions import PositionPlot
from specviz_app.panels.charts.samples import SamplesPlot
from specviz_app.panels.charts.schedule import SchedulePlot
from specviz_app.panels.charts.speed import SpeedPlot
from specviz_app.theme import ACCEPTED, SOURCE_COLORS
from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.records import CycleRecord
from specviz_core.viewer.samples import samples_of
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import CycleSource

HINT = "Step a cycle (F10) or open a recording"
REDRAW_MS = 40  # live appends are drawn at most this often
ROW_MIN_PX = 165  # below this a plot is unreadable: the grid scrolls instead


class ChartsPanel(ChartsDraw, ChartsMouse, PanelMixin, QWidget):
    """Charts of the current session; the AR baseline and the cost curve are the session model's. For the main
    window: ``set_ar_baseline``, ``set_cost_curve``,
    ``set_font_scale``; ``flush`` draws pending live cycles now."""

    title = "Charts"
    pop_out_requested = Signal()
    """The user asked for the charts in their own window."""

    def __init__(self, model: SessionModel, parent: QWidget | None = None) -> None:
        QWidget.__init__(self, parent)
        self.data = ChartData()
        self.cost_points: list[tuple[int, float]] | None = None
        self.columns = 0
        self.shown: list[str] = []
        """The charts in the grid, by name (see :mod:`.charts_layout`)."""
        self.solo: str | None = None
        """The one chart shown alone (double-click), if any."""
        self._placed: tuple = ()
        self._in_grid: list[ChartPlot] = []
        self._font_scale = 1.0
        self._base_pt = self.font().pointSizeF()  # the app font grows in presentation mode: so do the charts
        self._method = ""
        self._syncing_x = False
        self._source_curves: dict[str, pg.PlotDataItem] = {}
        self._why_speedup: float | None = None

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
        self._build()
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

    # -- building ----------------------------------------------------------------------------
    def _build(self) -> None:
        cyc = "cycle"
        self.p_tau = ChartPlot("accepted tokens per cycle (τ)", cyc, "tokens / forward", PLOT_HELP)
        self.p_src = ChartPlot("acceptance by source (cumulative)", cyc, "accepted / verified", PLOT_HELP)
        self.p_tps = SpeedPlot(self.glw.scene(), WINDOW, PLOT_HELP)
        self.p_heat = HeatmapPlot("Acceptance by depth and sibling rank, all cycles so far")
        self.p_spine = ChartPlot("Goose spine ratio & EMA p_s", cyc, "ratio", PLOT_HELP)
        self.p_delta = ChartPlot("TALON δ vs τ", cyc, "per target forward", PLOT_HELP)
        self.p_cost = ChartPlot("verify cost", "block size N (tokens)", "forward ms",
                                "Target forward time against the verify block size N; the line is this cycle's N")
        self.p_why = CostPlot(PLOT_HELP)
        self.p_sched = SchedulePlot(self.glw.scene(), PLOT_HELP)
        self.p_causes, self.p_room, self.p_pos = CausePlot(), HeadroomPlot(), PositionPlot()
        self.p_samples = SamplesPlot()
        self.plots = [self.p_tau, self.p_src, self.p_tps, self.p_heat, self.p_spine, self.p_delta, self.p_cost,
                      self.p_why, self.p_sched, self.p_causes, self.p_room, self.p_pos, self.p_samples]
        self.by_name = dict(zip(("tau", "sources", "tps", "heat", "spine", "delta", "cost", "why", "schedule",
                                 "causes", "headroom", "positions", "samples"), self.plots))
        self.cycle_plots = [self.p_tau, self.p_tps, self.p_src, self.p_spine, self.p_delta, self.p_why, self.p_sched]
        # pyqtgraph's x link aligns screen positions, wrong for plots of different widths: copy the range instead.
        for p in self.cycle_plots:
            p.vb.sigXRangeChanged.connect(self._sync_x)
        self.cursors = {p: pg.InfiniteLine(angle=90, movable=False) for p in self.cycle_plots}
        for p, line in self.cursors.items():
            line.hide()
            line.setZValue(-1)  # under the series, whichever was added first
            p.addItem(line, ignoreBounds=True)

        green = QColor(ACCEPTED)
        self.c_tau = self.p_tau.curve(stepMode="right", fillLevel=0, pen=pg.mkPen(green),
                                      brush=QColor(green.red(), green.green(), green.blue(), 90))
        self.c_tau_roll = self.p_tau.curve()
        self.p_tau.keys = [("▆", ACCEPTED, "n_accepted + 1"), ("━", "fg", f"rolling mean ({WINDOW})")]

        spine, branch, ngram = SOURCE_COLORS["spine"], SOURCE_COLORS["branch"], SOURCE_COLORS["ngram"]
        self.c_ratio = self.p_spine.curve(pen=pg.mkPen(spine, width=2))
        self.c_ema = self.p_spine.curve(pen=pg.mkPen(branch, width=2))
        self.s_bypass = pg.ScatterPlotItem(symbol="|", size=12, pen=pg.mkPen(ngram, width=2), brush=ngram)
        self.p_spine.addItem(self.s_bypass)
        self.p_spine.keys = [("━", spine, "spine ratio"), ("━", branch, "EMA p_s"), ("┃", ngram, "bypass cycle")]
        self.p_spine.setYRange(*SPINE_Y, padding=0)
        self.p_spine.vb.enableAutoRange(y=False)

        self.c_delta = self.p_delta.curve(pen=pg.mkPen(SOURCE_COLORS["draft"], width=2))
        self.c_tau_cum = self.p_delta.curve(pen=pg.mkPen(ACCEPTED, width=2))
        self.p_delta.keys = [("━", SOURCE_COLORS["draft"], "δ draft steps"), ("━", ACCEPTED, "τ tokens")]

        self.c_cost = self.p_cost.plot(symbol="o", symbolSize=5, pen=pg.mkPen(SOURCE_COLORS["root"], width=2))
        self.n_line = pg.InfiniteLine(angle=90, movable=False)
        self.n_line.hide()
        self.p_cost.addItem(self.n_line, ignoreBounds=True)

        self.glw.scene().sigMouseClicked.connect(self._on_click)
        self.glw.scene().sigMouseMoved.connect(self._on_hover)

    def _set_shown(self) -> bool:
        """Work out which charts apply; True if that changed."""
        d = self.data
        shown = applicable(self._method, has_sources=bool(d.sources), has_heat=bool(d.heat_verified.sum()),
                           has_spine=d.has_spine, has_delta=d.has_delta, has_cost=bool(self.cost_points),
                           has_timings=d.has_timings, has_schedule=d.has_schedule,
                           has_causes=any(d.metrics.causes.values()), has_positions=bool(d.metrics.accepted_at),
                           has_samples=len(self.p_samples.taus) > 1)
        if self.solo not in shown:
            self.solo = None
        changed = shown != self.shown
        self.shown = shown
        return changed

    def _layout(self, columns: int) -> None:
        """The shown charts in ``columns`` columns (the wide per-cycle plots span two of three); one alone when
        double-clicked."""
        names = [self.solo] if self.solo else self.shown
        placed = (tuple(names), columns)
        self.columns = columns
        if placed == self._placed:
            return
        grid = self.glw.ci.layout
        for p in self._in_grid:  # take every plot out first: a cell may still hold a plot that moves later
            grid.removeItem(p)
        cells = grid_cells(names, columns)
        self._in_grid = []
        for name, p in self.by_name.items():
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
        for p in self.plots:
            p.apply_theme(fg, grey, s)
        self.c_tau_roll.setPen(pg.mkPen(fg, width=2))
        for line in (*self.cursors.values(), self.n_line):
            line.setPen(pg.mkPen(hi, width=2))

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
    def set_ar_baseline(self, tokens_per_s: float | None, note: str = "") -> None:
        """The AR rate (tokens/s) to compare against, measured on the same prompt; None: no baseline."""
        self.p_tps.set_baseline(tokens_per_s, note)
        self._draw_tps()
        self._update_why()

    def set_cost_curve(self, points: list[tuple[int, float]] | dict | None) -> None:
        """Forward ms against verify block size N (pairs, or a stored curve's dict); None: not measured."""
        self.cost_points = cost_points(points)
        if self.cost_points:
            n, ms = np.array(self.cost_points, dtype=float).T
            self.c_cost.setData(n, ms)
        else:
            self.c_cost.setData([], [])
        self.n_line.setVisible(bool(self.cost_points) and self.model.record is not None)
        if self._set_shown():
            self._layout(self.columns)
        self._update_why()

    # -- model events ---------------------------------------------------------------------------
    def on_session_opened(self, source: CycleSource) -> None:
        self._timer.stop()
        self.data.reset()
        self.data.extend(source.summaries())
        self._method = source.info.method
        rec, info = getattr(source, "recording", None), source.info  # a live session is not one of a group
        grouped = rec is not None and getattr(info, "group_id", None)
        self.p_samples.draw(samples_of(rec, info) if grouped else [], getattr(info, "id", ""))
        self._stack.setCurrentWidget(self.scroll if self.data.n else self.hint)
        # The session's facts, as the session model holds them (a curve of another model or device does not apply).
        self.p_tps.set_baseline(*self.model.ar_baseline)
        self.set_cost_curve(self.model.cost_curve)
        self._redraw()
        self._update_why()

    def on_session_closed(self) -> None:
        self._timer.stop()
        self.data.reset()
        self.p_samples.draw([], "")
        self._redraw()
        for line in (*self.cursors.values(), self.n_line):
            line.hide()
        self._stack.setCurrentWidget(self.hint)

    def on_cycles_appended(self, summaries: list[CycleSummary]) -> None:
        self.data.extend(summaries)
        self._stack.setCurrentWidget(self.scroll)
        if not self._timer.isActive():
            self._timer.start()

    def on_cycle_changed(self, record: CycleRecord | None) -> None:
        for line in self.cursors.values():
            line.setValue(self.model.index)
            line.show()
        if record is not None:  # a damaged cycle has no verify block to mark on the cost curve
            self.n_line.setValue(record.n_verified)
        self.n_line.setVisible(bool(self.cost_points) and record is not None)

    def flush(self) -> None:
        """Draw appended cycles now instead of at the next redraw tick."""
        if self._timer.isActive():
            self._timer.stop()
            self._redraw()

    # -- drawing --------------------------------------------------------------------------------
    def _redraw(self) -> None:
        d = self.data
        x = np.arange(d.n, dtype=float)
        tau = d.series("tau")
        # Step mode "right" draws y[i] from x[i] to x[i+1]: bars centred on each cycle, the last one repeated.
        self.c_tau.setData(np.arange(d.n + 1) - 0.5, np.append(tau, tau[-1])) if d.n else self.c_tau.setData([], [])
        self.c_tau_roll.setData(x, d.series("tau_rolling"))
        self.p_tau.set_header(f"accepted tokens per cycle · mean τ {d.mean_tau:.2f}" if d.n
                              else "accepted tokens per cycle (τ)")
        self._draw_tps()
        self._draw_sources(x)
        self._draw_spine(x)
        self._draw_delta(x)
        self.p_sched.draw(*(d.series(k) for k in ("num_assistant_tokens", "candidate_length", "n_matches",
                                                  "assistant_confidence_threshold")))
        self.p_heat.set_counts(d.heat_verified, d.heat_accepted)
        metrics = d.metrics.result()
        self.p_causes.draw(metrics)
        self.p_room.draw(metrics, d.accepted_by_source())
        self.p_pos.draw(metrics)
        self.p_why.draw(d, self.p_why.t_ar, None if self.p_why.t_ar is None else self._why_speedup)
        if not self._why_timer.isActive():
            self._why_timer.start()
        if self._set_shown():
            self._layout(self.columns)

    def _update_why(self) -> None:
        """The session's "why slower" sentence and breakdown (after the data or the baseline or curve changed)."""
        self._why_timer.stop()
        self._why_speedup = update_why(self.model.source, self.cost_points, self.p_tps, self.p_why, self.data,
                                       self.actions)

    def _draw_tps(self) -> None:
        d = self.data
        self.p_tps.draw(d.series("tps"), d.series("tps_rolling"), d.total_tokens_per_s)

    def _sync_x(self, vb: pg.ViewBox, rng: tuple[float, float]) -> None:
        if self._syncing_x:
            return
        self._syncing_x = True
        try:
            for p in self.cycle_plots:
                if p.vb is not vb:
                    p.vb.setXRange(*rng, padding=0)
        finally:
            self._syncing_x = False

    def export_target(self) -> QWidget:
        return self.glw

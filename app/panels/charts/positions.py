"""Acceptance by draft position (issue 16): accepted at each position over the cycles that drafted (vLLM's rate,
bars) and over those that reached it (line). The definitions are the core's
(:data:`~specviz_core.analysis.metrics.DEFINITIONS`), shown as the plot's tooltip."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import Chart, ChartInputs
from specviz_app.theme import ACCEPTED, SOURCE_COLORS
from specviz_core.analysis.metrics import DEFINITIONS, SessionMetrics


class PositionPlot(Chart):
    """Acceptance at each draft position: accepted / drafting cycles (bars) and accepted / reached (line)."""

    name = "positions"

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("acceptance by draft position", "position", "rate",
                         f"Bars: {DEFINITIONS['acceptance_at_position']}\n"
                         f"Line: {DEFINITIONS['conditional_acceptance_at_position']}\n"
                         f"Draft acceptance rate: {DEFINITIONS['draft_acceptance_rate']}\n"
                         f"Mean acceptance length: {DEFINITIONS['mean_acceptance_length']}")
        self.fix_view()
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.6, brush=QColor(SOURCE_COLORS["draft"]), pen=None)
        self.addItem(self.bars)
        self.line = self.plot(pen=pg.mkPen(ACCEPTED, width=2), symbol="o", symbolSize=6,
                              symbolBrush=QColor(ACCEPTED), symbolPen=None)
        self.keys = [("▆", SOURCE_COLORS["draft"], "accepted / drafting cycles"),
                     ("━", ACCEPTED, "accepted / reached")]
        self.setYRange(0, 1.05, padding=0)

    @staticmethod
    def applies(inputs: ChartInputs) -> bool:
        return bool(inputs.data.metrics.accepted_at)

    def redraw(self, inputs: ChartInputs) -> None:
        self.draw(inputs.data.session_metrics())

    def draw(self, m: SessionMetrics, max_positions: int = 24) -> None:
        shown = m.positions[:max_positions]
        x = np.array([p.position for p in shown], dtype=float)
        self.bars.setOpts(x=x, height=[p.unconditional for p in shown], width=0.6)
        cond = np.array([np.nan if p.conditional is None else p.conditional for p in shown], dtype=float)
        self.line.setData(x, cond) if np.isfinite(cond).any() else self.line.setData([], [])
        if len(x):
            self.setXRange(0.4, x[-1] + 0.6, padding=0)
        rate = m.draft_acceptance_rate
        self.set_header("acceptance by draft position" + (f" · draft acceptance rate {rate:.2f}, mean acceptance "
                                                          f"length {m.mean_acceptance_length:.2f}" if rate else ""))

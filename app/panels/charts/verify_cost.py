"""The charts panel's verify cost curve: the target's forward time against the verify block size N, as measured on
this device (the session model's cost curve), with a line at the current cycle's N."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import Chart, ChartInputs
from specviz_app.theme import SOURCE_COLORS
from specviz_core.records import CycleRecord


class VerifyCostPlot(Chart):
    """Once the curve is measured."""

    name = "cost"

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("verify cost", "block size N (tokens)", "forward ms",
                         "Target forward time against the verify block size N; the line is this cycle's N")
        self.c_cost = self.plot(symbol="o", symbolSize=5, pen=pg.mkPen(SOURCE_COLORS["root"], width=2))
        self.n_line = pg.InfiniteLine(angle=90, movable=False)
        self.n_line.hide()
        self.addItem(self.n_line, ignoreBounds=True)
        self._points: list[tuple[int, float]] | None = None
        self._has_record = False

    @staticmethod
    def applies(inputs: ChartInputs) -> bool:
        return bool(inputs.cost_points)

    def redraw(self, inputs: ChartInputs) -> None:
        if inputs.cost_points != self._points:
            self._points = inputs.cost_points
            if self._points:
                n, ms = np.array(self._points, dtype=float).T
                self.c_cost.setData(n, ms)
            else:
                self.c_cost.setData([], [])
        self.n_line.setVisible(bool(self._points) and self._has_record)

    def show_cycle(self, index: int | None, record: CycleRecord | None) -> None:
        if record is not None:  # a damaged cycle has no verify block to mark on the cost curve
            self.n_line.setValue(record.n_verified)
        self._has_record = record is not None
        self.n_line.setVisible(bool(self._points) and self._has_record)

    def set_highlight(self, color: QColor) -> None:
        self.n_line.setPen(pg.mkPen(color, width=2))

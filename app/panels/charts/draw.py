"""The charts panel's drawing: the registered charts (:data:`~specviz_app.panels.charts.registry.CHARTS`), made
once, and what they draw from (:class:`~specviz_app.panels.charts.chart.ChartInputs`).

A part the panel owns (:class:`ChartsDraw`): it draws every chart from the inputs, asks each whether it applies,
moves the current-cycle marks, themes the charts, and keeps the per-cycle charts' x ranges together.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import Chart, ChartInputs
from specviz_app.panels.charts.registry import CHARTS
from specviz_core.records import CycleRecord


class ChartsDraw:
    """Every registered chart of one panel, by name in the registry's order, and the inputs they draw from."""

    def __init__(self, scene: QGraphicsScene) -> None:
        self.inputs = ChartInputs()
        self.charts: dict[str, Chart] = {cls.name: cls(scene) for cls in CHARTS}
        self.cycle_charts = [c for c in self.charts.values() if c.per_cycle]
        """The charts whose x is the cycle."""
        self.wide = frozenset(name for name, c in self.charts.items() if c.wide)
        self._syncing_x = False
        # pyqtgraph's x link aligns screen positions, wrong for plots of different widths: copy the range instead.
        for c in self.cycle_charts:
            c.vb.sigXRangeChanged.connect(self._sync_x)

    def applicable(self) -> list[str]:
        """The charts worth showing for the session with what its cycles recorded so far, in grid order."""
        return [name for name, c in self.charts.items() if c.applies(self.inputs)]

    def draw(self) -> None:
        """Every chart from the inputs as they are now."""
        for c in self.charts.values():
            c.redraw(self.inputs)

    def arithmetic_changed(self) -> None:
        for c in self.charts.values():
            c.arithmetic_changed(self.inputs)

    def show_cycle(self, index: int | None, record: CycleRecord | None) -> None:
        """Mark cycle ``index`` current (None: no session)."""
        for c in self.charts.values():
            c.show_cycle(index, record)

    def apply_theme(self, fg: QColor, grey: QColor, highlight: QColor, scale: float) -> None:
        for c in self.charts.values():
            c.apply_theme(fg, grey, scale)
            c.set_highlight(highlight)

    def _sync_x(self, vb: pg.ViewBox, rng: tuple[float, float]) -> None:
        if self._syncing_x:
            return
        self._syncing_x = True
        try:
            for c in self.cycle_charts:
                if c.vb is not vb:
                    c.vb.setXRange(*rng, padding=0)
        finally:
            self._syncing_x = False

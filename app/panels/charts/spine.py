"""The charts panel's Goose spine: the spine ratio and the EMA of p_s per cycle, bypass cycles ticked above."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import PLOT_HELP, Chart, ChartInputs
from specviz_app.theme import SOURCE_COLORS

SPINE_Y = (-0.05, 1.12)  # ratios in [0, 1], bypass ticks above


class SpinePlot(Chart):
    """For Goose, or any session whose cycles recorded a spine ratio."""

    name, per_cycle = "spine", True

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("Goose spine ratio & EMA p_s", "cycle", "ratio", PLOT_HELP)
        spine, branch, ngram = SOURCE_COLORS["spine"], SOURCE_COLORS["branch"], SOURCE_COLORS["ngram"]
        self.c_ratio = self.curve(pen=pg.mkPen(spine, width=2))
        self.c_ema = self.curve(pen=pg.mkPen(branch, width=2))
        self.s_bypass = pg.ScatterPlotItem(symbol="|", size=12, pen=pg.mkPen(ngram, width=2), brush=ngram)
        self.addItem(self.s_bypass)
        self.keys = [("━", spine, "spine ratio"), ("━", branch, "EMA p_s"), ("┃", ngram, "bypass cycle")]
        self.setYRange(*SPINE_Y, padding=0)
        self.vb.enableAutoRange(y=False)

    @staticmethod
    def applies(inputs: ChartInputs) -> bool:
        return inputs.method == "goose" or inputs.data.has_spine

    def redraw(self, inputs: ChartInputs) -> None:
        d = inputs.data
        x = np.arange(d.n, dtype=float)
        self.setYRange(*SPINE_Y, padding=0)
        self.c_ratio.setData(x, d.series("spine_ratio"))
        self.c_ema.setData(x, d.series("ema_p_s"))
        b = d.bypass_indices
        if not np.array_equal(b, self.s_bypass.data["x"]):  # rarely changes: skip the scatter's costly rebuild
            self.s_bypass.setData(b.astype(float), np.full(len(b), 1.06))

    def cycle_text(self, inputs: ChartInputs, i: int) -> str:
        d = inputs.data
        mode = " (bypass)" if i in d.bypass_indices else ""
        return (f"cycle {i}{mode}: spine ratio {float(d.series('spine_ratio')[i]):.2f}, "
                f"EMA p_s {float(d.series('ema_p_s')[i]):.2f}")

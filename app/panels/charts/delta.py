"""The charts panel's TALON delta against tau: draft steps per target forward (TALON's recorded delta, else the
running mean of draft forwards) against the running mean of tokens per forward."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import PLOT_HELP, Chart, ChartInputs
from specviz_app.theme import ACCEPTED, SOURCE_COLORS


class DeltaPlot(Chart):
    """For TALON, or any session whose cycles counted draft steps."""

    name, per_cycle = "delta", True

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("TALON δ vs τ", "cycle", "per target forward", PLOT_HELP)
        self.c_delta = self.curve(pen=pg.mkPen(SOURCE_COLORS["draft"], width=2))
        self.c_tau_cum = self.curve(pen=pg.mkPen(ACCEPTED, width=2))
        self.keys = [("━", SOURCE_COLORS["draft"], "δ draft steps"), ("━", ACCEPTED, "τ tokens")]

    @staticmethod
    def applies(inputs: ChartInputs) -> bool:
        return inputs.method == "talon" or inputs.data.has_delta

    def redraw(self, inputs: ChartInputs) -> None:
        d = inputs.data
        x = np.arange(d.n, dtype=float)
        delta = d.series("delta")
        self.c_delta.setData(x, delta)
        self.c_tau_cum.setData(x, d.series("tau_cum"))
        fin = delta[np.isfinite(delta)]
        self.set_header(f"TALON δ {fin[-1]:.2f} vs τ {d.mean_tau:.2f}" if len(fin) else "TALON δ vs τ")
        for c in (self.c_delta, self.c_tau_cum):
            c.setVisible(d.has_delta)

    def cycle_text(self, inputs: ChartInputs, i: int) -> str:
        d = inputs.data
        return f"cycle {i}: δ {float(d.series('delta')[i]):.2f}, τ running mean {float(d.series('tau_cum')[i]):.2f}"

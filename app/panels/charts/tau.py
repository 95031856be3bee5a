"""The charts panel's tokens per target forward (tau): each cycle's n_accepted + 1 as a bar, and its rolling mean."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import PLOT_HELP, Chart, ChartInputs
from specviz_app.panels.charts.data import WINDOW
from specviz_app.theme import ACCEPTED


class TauPlot(Chart):
    """Accepted tokens per cycle (every session has it)."""

    name, wide, per_cycle = "tau", True, True

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("accepted tokens per cycle (τ)", "cycle", "tokens / forward", PLOT_HELP)
        green = QColor(ACCEPTED)
        self.c_tau = self.curve(stepMode="right", fillLevel=0, pen=pg.mkPen(green),
                                brush=QColor(green.red(), green.green(), green.blue(), 90))
        self.c_tau_roll = self.curve()
        self.keys = [("▆", ACCEPTED, "n_accepted + 1"), ("━", "fg", f"rolling mean ({WINDOW})")]

    def apply_theme(self, fg: QColor, grey: QColor, scale: float) -> None:
        super().apply_theme(fg, grey, scale)
        self.c_tau_roll.setPen(pg.mkPen(fg, width=2))

    def redraw(self, inputs: ChartInputs) -> None:
        d = inputs.data
        tau = d.series("tau")
        # Step mode "right" draws y[i] from x[i] to x[i+1]: bars centred on each cycle, the last one repeated.
        self.c_tau.setData(np.arange(d.n + 1) - 0.5, np.append(tau, tau[-1])) if d.n else self.c_tau.setData([], [])
        self.c_tau_roll.setData(np.arange(d.n, dtype=float), d.series("tau_rolling"))
        self.set_header(f"accepted tokens per cycle · {d.mean_tau:.2f} tokens/forward" if d.n else "accepted tokens per cycle (τ)")

    def cycle_text(self, inputs: ChartInputs, i: int) -> str:
        d = inputs.data
        return f"cycle {i}: τ = {float(d.series('tau')[i]):.0f} tokens (rolling {float(d.series('tau_rolling')[i]):.2f})"

"""The charts panel's acceptance by node source: each source's accepted / verified draft tokens, cumulative over the
cycles (for Goose: p_s of the spine and p_t of the branches)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import PLOT_HELP, Chart, ChartInputs
from specviz_app.theme import GATED, SOURCE_COLORS, SOURCE_LABELS

GOOSE_LABELS = {"spine": "p_s spine", "branch": "p_t branch"}


def source_label(method: str, source: str) -> str:
    if method == "goose" and source in GOOSE_LABELS:
        return GOOSE_LABELS[source]
    return SOURCE_LABELS.get(source, source).split(" (")[0]


class SourcesPlot(Chart):
    """One curve per node source, made when the source first appears; once a drafted token was verified."""

    name, per_cycle = "sources", True

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("acceptance by source (cumulative)", "cycle", "accepted / verified", PLOT_HELP)
        self.source_curves: dict[str, pg.PlotDataItem] = {}

    @staticmethod
    def applies(inputs: ChartInputs) -> bool:
        return bool(inputs.data.sources)

    def redraw(self, inputs: ChartInputs) -> None:
        d, keys = inputs.data, []
        x = np.arange(d.n, dtype=float)
        for name in d.sources:
            color = SOURCE_COLORS.get(name, GATED)
            if name not in self.source_curves:
                self.source_curves[name] = self.curve(pen=pg.mkPen(color, width=2))
            rate = d.source_rate(name)
            self.source_curves[name].setData(x, rate)
            last = rate[np.isfinite(rate)]
            label = source_label(inputs.method, name)
            keys.append(("━", color, f"{label} {last[-1]:.2f}" if len(last) else label))
        for name in set(self.source_curves) - set(d.sources):
            self.removeItem(self.source_curves.pop(name))
        self.set_header(keys=keys)

    def cycle_text(self, inputs: ChartInputs, i: int) -> str:
        d = inputs.data
        parts = [f"{source_label(inputs.method, n)}: {a:.0f}/{v:.0f}" for n in d.sources
                 for v, a in [d.source_counts(n)[i]]]
        return f"cycle {i} (cumulative): " + ", ".join(parts)

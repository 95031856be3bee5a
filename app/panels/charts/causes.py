"""Why cycles stopped (issue 16): stopped cycles by cause (gated, cut by the budget, offered but not drafted, no
source offered it, rejected by sampling), the core's :func:`~specviz_core.analysis.stop_cause.stop_cause` for every
cycle, from :class:`~specviz_core.analysis.metrics.SessionMetrics`. The definition is the core's
(:data:`~specviz_core.analysis.metrics.DEFINITIONS`), shown as the plot's tooltip."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import Chart, ChartInputs
from specviz_app.theme import REJECTED, SOURCE_COLORS
from specviz_core.analysis.metrics import DEFINITIONS, SessionMetrics
from specviz_core.analysis.stop_cause import CAUSES

#: Bar colour of each cause: what the user could change to win the token.
CAUSE_COLORS = {"gated": SOURCE_COLORS["branch"], "budget": SOURCE_COLORS["spine"], "not_drafted": "#16a085",
                "not_offered": REJECTED, "rejected": "#7f8c8d"}


class CausePlot(Chart):
    """Cycles by why the walk stopped, one horizontal bar per cause."""

    name = "causes"

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("why cycles stopped", "cycles", "", DEFINITIONS["stop_causes"])
        self.fix_view()
        self.bars = pg.BarGraphItem(x0=[], y=[], height=0.6, width=[])
        self.addItem(self.bars)
        self.invertY(True)
        self.hideAxis("left")  # each bar is labelled in the plot: a narrow panel keeps its room for the bars
        self.labels: list[pg.TextItem] = []
        self.counts: dict[str, int] = {}

    @staticmethod
    def applies(inputs: ChartInputs) -> bool:
        return any(inputs.data.metrics.causes.values()) and inputs.method != "ar"

    def redraw(self, inputs: ChartInputs) -> None:
        self.draw(inputs.data.session_metrics())

    def draw(self, m: SessionMetrics) -> None:
        kinds = [k for k in CAUSES if m.causes.get(k)]
        self.counts = {k: m.causes[k] for k in kinds}
        if not kinds:
            self.bars.setOpts(x0=[], y=[], width=[], brushes=None, pens=None)
            for item in self.labels:
                item.hide()
            return
        n = [self.counts[k] for k in kinds]
        self.bars.setOpts(x0=np.zeros(len(kinds)), y=np.arange(len(kinds)), width=n, height=0.6,
                          brushes=[QColor(CAUSE_COLORS[k]) for k in kinds], pens=[None] * len(kinds))
        fg = self._colors[0]
        while len(self.labels) < len(kinds):
            item = pg.TextItem(anchor=(0, 0.5))
            self.addItem(item, ignoreBounds=True)
            self.labels.append(item)
        for i, item in enumerate(self.labels):
            item.setVisible(i < len(kinds))
            if i < len(kinds):
                item.setText(f"{CAUSES[kinds[i]]} ({n[i]})", color=fg)
                item.setPos(0, i)
        self.setYRange(-0.6, len(kinds) - 0.4, padding=0)
        self.setXRange(0, max(n) * 1.05, padding=0)
        self.set_header(f"why cycles stopped · {sum(n)} cycles")

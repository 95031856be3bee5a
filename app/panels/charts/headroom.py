"""The headroom (issue 16): per source, the draft tokens within reach along the target's path (width unlimited)
against what the tree accepted from it; the gap is what the tree's shape and budget left on the table. The definition
is the core's (:data:`~specviz_core.analysis.metrics.DEFINITIONS`), shown as the plot's tooltip."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import Chart, ChartInputs
from specviz_app.theme import ACCEPTED
from specviz_core.analysis.metrics import DEFINITIONS, SessionMetrics


class HeadroomPlot(Chart):
    """Per source: draft tokens within reach (width unlimited) against those the tree accepted."""

    name = "headroom"

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("headroom: within reach vs accepted", "source", "draft tokens", DEFINITIONS["headroom"])
        self.fix_view()
        self.reach = pg.BarGraphItem(x=[], height=[], width=0.6, brush=QColor(127, 140, 141, 90), pen=None)
        self.addItem(self.reach)
        self.accepted = pg.BarGraphItem(x=[], height=[], width=0.36, brush=QColor(ACCEPTED), pen=None)
        self.addItem(self.accepted)
        self.keys = [("▆", "#95a5a6", "within reach"), ("▆", ACCEPTED, "accepted")]
        self.rows: list[tuple[str, int, int]] = []

    @staticmethod
    def applies(inputs: ChartInputs) -> bool:
        return any(inputs.data.metrics.causes.values()) and inputs.method != "ar"

    def redraw(self, inputs: ChartInputs) -> None:
        self.draw(inputs.data.session_metrics(), inputs.data.accepted_by_source())

    def draw(self, m: SessionMetrics, accepted_by_source: dict[str, int]) -> None:
        """``accepted_by_source``: accepted draft tokens per source over the same cycles."""
        sources = sorted(m.headroom_by_source)
        self.rows = [("all", m.headroom, m.headroom_accepted)] + [
            (s, m.headroom_by_source[s], accepted_by_source.get(s, 0)) for s in sources]
        x = np.arange(len(self.rows))
        self.reach.setOpts(x=x, height=[r[1] for r in self.rows], width=0.6)
        self.accepted.setOpts(x=x, height=[r[2] for r in self.rows], width=0.36)
        self.getAxis("bottom").setTicks([[(i, r[0]) for i, r in enumerate(self.rows)]])
        self.setXRange(-0.6, len(self.rows) - 0.4, padding=0)
        self.setYRange(0, max(1, max(r[1] for r in self.rows)) * 1.08, padding=0)
        lost, quality = m.lost_to_shape, m.causes.get("not_offered", 0)
        self.set_header(f"headroom · {lost} token{'s' if lost != 1 else ''} left by the tree's shape and budget, "
                        f"{quality} cycle{'s' if quality != 1 else ''} stopped on a token that none of the sources offered "
                        "(draft quality)")

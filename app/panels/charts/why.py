"""The "why" charts of a session (issue 16), from :class:`~specviz_core.analysis.metrics.SessionMetrics`:

- :class:`CausePlot`: stopped cycles by cause (gated, cut by the budget, offered but not drafted, no source offered
  it, rejected by sampling), the core's :func:`~specviz_core.analysis.stop_cause.stop_cause` for every cycle;
- :class:`HeadroomPlot`: per source, the tokens it had within reach along the target's path (width unlimited)
  against what the tree accepted from it: the gap is what the tree's shape and budget left on the table;
- :class:`PositionPlot`: acceptance by draft position, unconditional (vLLM's rate) and conditional.

Definitions are the core's (:data:`~specviz_core.analysis.metrics.DEFINITIONS`), shown as each plot's tooltip.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor

from specviz_app.panels.charts.plot import ChartPlot
from specviz_app.theme import ACCEPTED, REJECTED, SOURCE_COLORS
from specviz_core.analysis.metrics import DEFINITIONS, SessionMetrics
from specviz_core.analysis.stop_cause import CAUSES

#: Bar colour of each cause: what the user could change to win the token.
CAUSE_COLORS = {"gated": SOURCE_COLORS["branch"], "budget": SOURCE_COLORS["spine"], "not_drafted": "#16a085",
                "not_offered": REJECTED, "rejected": "#7f8c8d"}


def _bars(plot: ChartPlot, **kw: object) -> pg.BarGraphItem:
    item = pg.BarGraphItem(x=[], height=[], width=0.6, **kw)
    plot.addItem(item)
    return item


def _fixed(plot: ChartPlot) -> None:
    plot.setMouseEnabled(False, False)
    plot.hideButtons()


class CausePlot(ChartPlot):
    """Cycles by why the walk stopped, one horizontal bar per cause."""

    def __init__(self) -> None:
        super().__init__("why cycles stopped", "cycles", "", DEFINITIONS["stop_causes"])
        _fixed(self)
        self.bars = pg.BarGraphItem(x0=[], y=[], height=0.6, width=[])
        self.addItem(self.bars)
        self.invertY(True)
        self.hideAxis("left")  # each bar is labelled in the plot: a narrow panel keeps its room for the bars
        self.labels: list[pg.TextItem] = []
        self.counts: dict[str, int] = {}

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


class HeadroomPlot(ChartPlot):
    """Per source: draft tokens within reach (width unlimited) against those the tree accepted."""

    def __init__(self) -> None:
        super().__init__("headroom: within reach vs accepted", "source", "draft tokens", DEFINITIONS["headroom"])
        _fixed(self)
        self.reach = _bars(self, brush=QColor(127, 140, 141, 90), pen=None)
        self.accepted = pg.BarGraphItem(x=[], height=[], width=0.36, brush=QColor(ACCEPTED), pen=None)
        self.addItem(self.accepted)
        self.keys = [("▆", "#95a5a6", "within reach"), ("▆", ACCEPTED, "accepted")]
        self.rows: list[tuple[str, int, int]] = []

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


class PositionPlot(ChartPlot):
    """Acceptance at each draft position: accepted / drafting cycles (bars) and accepted / reached (line)."""

    def __init__(self) -> None:
        super().__init__("acceptance by draft position", "position", "rate",
                         f"Bars: {DEFINITIONS['acceptance_at_position']}\n"
                         f"Line: {DEFINITIONS['conditional_acceptance_at_position']}\n"
                         f"Draft acceptance rate: {DEFINITIONS['draft_acceptance_rate']}\n"
                         f"Mean acceptance length: {DEFINITIONS['mean_acceptance_length']}")
        _fixed(self)
        self.bars = _bars(self, brush=QColor(SOURCE_COLORS["draft"]), pen=None)
        self.line = self.plot(pen=pg.mkPen(ACCEPTED, width=2), symbol="o", symbolSize=6,
                              symbolBrush=QColor(ACCEPTED), symbolPen=None)
        self.keys = [("▆", SOURCE_COLORS["draft"], "accepted / drafting cycles"),
                     ("━", ACCEPTED, "accepted / reached")]
        self.setYRange(0, 1.05, padding=0)

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

"""The charts of the charts panel, in the grid's order: the one list a new chart is added to.

Each entry is a :class:`~specviz_app.panels.charts.chart.Chart` subclass, one per module, that says its name, whether
it applies to the session, and how it is made and drawn (the interface is :mod:`specviz_app.panels.charts.chart`).
The panel, its grid, the mouse and presentation mode read only this list.
"""

from __future__ import annotations

from specviz_app.panels.charts.breakdown import BreakdownPlot
from specviz_app.panels.charts.causes import CausePlot
from specviz_app.panels.charts.chart import Chart
from specviz_app.panels.charts.delta import DeltaPlot
from specviz_app.panels.charts.headroom import HeadroomPlot
from specviz_app.panels.charts.heat import HeatmapPlot
from specviz_app.panels.charts.positions import PositionPlot
from specviz_app.panels.charts.samples import SamplesPlot
from specviz_app.panels.charts.schedule import SchedulePlot
from specviz_app.panels.charts.sources import SourcesPlot
from specviz_app.panels.charts.speed import SpeedPlot
from specviz_app.panels.charts.spine import SpinePlot
from specviz_app.panels.charts.tau import TauPlot
from specviz_app.panels.charts.verify_cost import VerifyCostPlot

CHARTS: tuple[type[Chart], ...] = (
    TauPlot,         # tau: tokens per target forward, every session
    SchedulePlot,    # schedule: transformers' assistant schedule (hf_assisted, hf_universal)
    SamplesPlot,     # samples: STAND's samples of one prompt, decoded as a group
    SourcesPlot,     # sources: cumulative acceptance per node source
    SpeedPlot,       # tps: tokens/s and the speed-up against the AR baseline, every session
    HeatmapPlot,     # heat: acceptance by depth and sibling rank
    BreakdownPlot,   # why: each cycle's time against plain decoding
    CausePlot,       # causes: why cycles stopped
    HeadroomPlot,    # headroom: within reach against accepted, per source
    PositionPlot,    # positions: acceptance by draft position
    VerifyCostPlot,  # cost: the verify cost curve, once measured
    SpinePlot,       # spine: Goose's spine ratio and EMA p_s
    DeltaPlot,       # delta: TALON's delta against tau
)

"""STAND's samples (issue 17): tokens per target forward of each sample of the prompt, in decoding order, the
session shown in the accent colour. The tables persist across the samples of a group (``specviz record --samples
N``), so a rising line is the method working as its paper says."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import Chart, ChartInputs
from specviz_app.theme import ACCEPTED, SOURCE_COLORS
from specviz_core.records import SessionInfo

HELP = ("Each sample of this prompt decoded in one group (specviz record --samples N), in order: tokens per target "
        "forward (tau). STAND's n-gram tables carry over from sample to sample; the session shown is highlighted.")


class SamplesPlot(Chart):
    """For a session decoded as one of a group of two or more."""

    name = "samples"

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("samples of this prompt", "sample", "tokens / forward", HELP)
        self.fix_view()
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.6)
        self.addItem(self.bars)
        self.keys = [("▆", SOURCE_COLORS["ngram"], "tau of a sample"), ("▆", ACCEPTED, "this session")]
        self.taus: list[float] = []
        self._drawn: tuple[list[SessionInfo], str] | None = None

    @staticmethod
    def applies(inputs: ChartInputs) -> bool:
        return len(inputs.samples) > 1

    def redraw(self, inputs: ChartInputs) -> None:
        drawn = self._drawn
        if drawn is None or drawn[0] is not inputs.samples or drawn[1] != inputs.session_id:  # drawn once a session
            self._drawn = (inputs.samples, inputs.session_id)
            self.draw(inputs.samples, inputs.session_id)

    def draw(self, samples: list[SessionInfo], current: str) -> None:
        self.taus = [s.tokens_per_forward for s in samples]
        x = np.arange(1, len(samples) + 1, dtype=float)
        if not samples:  # pyqtgraph's bars take no empty brush list
            self.bars.setOpts(x=[], height=[], brushes=None, pens=None)
        else:
            brushes = [QColor(ACCEPTED if s.id == current else SOURCE_COLORS["ngram"]) for s in samples]
            self.bars.setOpts(x=x, height=self.taus, width=0.6, brushes=brushes, pens=[None] * len(samples))
            self.setXRange(0.4, len(samples) + 0.6, padding=0)
            self.setYRange(0, max(1.0, max(self.taus)) * 1.08, padding=0)
            self.getAxis("bottom").setTicks([[(i + 1, str(i + 1)) for i in range(len(samples))]])
            which = next((i + 1 for i, s in enumerate(samples) if s.id == current), None)
            self.set_header(f"{len(samples)} samples of this prompt, tables carried over" +
                            (f" · this is sample {which}" if which else ""))

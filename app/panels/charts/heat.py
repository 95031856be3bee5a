"""The charts panel's acceptance heatmap: accepted / verified by depth (x) and sibling rank (y), all cycles so far,
with a colour bar and each cell's rate printed in it when the cells are big enough."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import Chart, ChartInputs

HEAT_CMAP = "viridis"
HEAT_TEXT_CELLS = 48  # print each cell's rate when the grid has at most this many cells


class HeatmapPlot(Chart):
    """Acceptance rate by depth (x) and sibling rank (y, rank 0 on top), with a colour bar and cell labels; once a
    drafted token was verified."""

    name = "heat"

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("acceptance heatmap", "depth", "sibling rank",
                         "Acceptance by depth and sibling rank, all cycles so far")
        self.verified = self.accepted = np.zeros((0, 0))
        self.img = pg.ImageItem(axisOrder="col-major")  # image[x, y] = rate[depth - 1, rank]
        self.addItem(self.img)
        self.invertY(True)
        self.fix_view()
        self.cmap = pg.colormap.get(HEAT_CMAP)
        self._lut = self.cmap.getLookupTable(nPts=256)
        self.colorbar = pg.ColorBarItem(values=(0, 1), colorMap=self.cmap, interactive=False, width=12)
        self.colorbar.setImageItem(self.img, insert_in=self)
        self.texts: list[pg.TextItem] = []
        self.vb.sigResized.connect(self._label_cells)

    @staticmethod
    def applies(inputs: ChartInputs) -> bool:
        return bool(inputs.data.heat_verified.sum())

    def redraw(self, inputs: ChartInputs) -> None:
        self.set_counts(inputs.data.heat_verified, inputs.data.heat_accepted)

    def point_text(self, x: float, y: float) -> str | None:
        return self.tooltip(int(round(x)), int(round(y)))

    def set_counts(self, verified: np.ndarray, accepted: np.ndarray) -> bool:
        """Show accepted / verified per [depth, rank] (depth 0, the root, is left out); False if nothing verified."""
        self.verified, self.accepted = verified, accepted
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(verified > 0, accepted / np.maximum(verified, 1), np.nan)[1:]
        if not rate.size or not np.isfinite(rate).any():
            self.img.clear()
            self._label_cells()
            return False
        depths, ranks = rate.shape
        self.img.setImage(rate, levels=(0.0, 1.0), lut=self._lut)
        self.img.setRect(QRectF(0.5, -0.5, depths, ranks))
        self.vb.setRange(xRange=(0.5, depths + 0.5), yRange=(-0.5, ranks - 0.5), padding=0)
        self._set_ticks()
        self._label_cells()
        return True

    def _set_ticks(self) -> None:
        """Depth and rank ticks, as dense as the plot's size lets their labels stand apart."""
        rate = self.img.image
        if rate is None or not rate.size:
            return
        depths, ranks = rate.shape
        w, h = max(self.vb.width(), 1.0), max(self.vb.height(), 1.0)
        dx = max(1 + (depths - 1) // 10, math.ceil(26 * self._scale * depths / w))
        dy = max(1 + (ranks - 1) // 6, math.ceil(16 * self._scale * ranks / h))
        self.getAxis("bottom").setTicks([[(d, str(d)) for d in range(1, depths + 1, dx)]])
        self.getAxis("left").setTicks([[(r, str(r)) for r in range(0, ranks, dy)]])

    def _label_cells(self, *_: object) -> None:
        """Print each cell's rate in it when the cells are big enough to hold the text."""
        if self.colorbar.axis.maximumWidth() < 1 and self.colorbar.axis.isVisible():
            self._size_colorbar()
        self._set_ticks()
        for t in self.texts:
            t.hide()
        rate = self.img.image
        if rate is None or not rate.size or rate.size > HEAT_TEXT_CELLS:
            return
        if self.vb.width() / rate.shape[0] < 34 * self._scale or self.vb.height() / rate.shape[1] < 16 * self._scale:
            return
        k = 0
        for (di, r), v in np.ndenumerate(rate):
            if not np.isfinite(v):
                continue
            if k == len(self.texts):
                self.texts.append(pg.TextItem(anchor=(0.5, 0.5)))
                self.addItem(self.texts[-1], ignoreBounds=True)
            t = self.texts[k]
            t.setText(f"{v:.0%}")
            t.setColor("#000000" if v > 0.6 else "#ffffff")  # dark text on viridis' light end
            t.setPos(di + 1, r)
            t.show()
            k += 1

    def tooltip(self, depth: int, rank: int) -> str:
        if not (1 <= depth < self.verified.shape[0] and 0 <= rank < self.verified.shape[1]):
            return "Acceptance by depth and sibling rank (rank 0 = first child tried), all cycles so far"
        ver, acc = self.verified[depth, rank], self.accepted[depth, rank]
        rate = f"{acc / ver:.0%}" if ver else "—"
        return f"depth {depth}, rank {rank}: {acc:.0f} accepted of {ver:.0f} verified ({rate})"

    def apply_theme(self, fg: QColor, grey: QColor, scale: float) -> None:
        super().apply_theme(fg, grey, scale)
        tick_font = QFont()
        tick_font.setPointSizeF(8 * scale)
        self.colorbar.axis.setTextPen(fg)
        self.colorbar.axis.setStyle(tickFont=tick_font)
        self.colorbar.axis.setLabel("accepted share", **{"font-size": f"{8.5 * scale:g}pt", "color": fg.name()})
        # A scale beside the bar, and room for it and the label: inserted into the plot's layout, the bar's axis
        # otherwise gets no width of its own and draws its label over the colours.
        self.colorbar.axis.setTicks([[(0.0, "0%"), (0.5, "50%"), (1.0, "100%")]])
        self.colorbar.axis.setStyle(showValues=True, tickLength=-4)
        self._bar_axis_px = int(round(50 * scale))
        self._size_colorbar()

    def _size_colorbar(self) -> None:
        """The bar's axis keeps its width (pyqtgraph sizes a hidden axis to 0 and never again: a panel themed
        while hidden drew the label over the colours)."""
        px = getattr(self, "_bar_axis_px", 50)
        self.colorbar.axis.setWidth(px)
        self.layout.setColumnFixedWidth(5, 12 + px + 6)  # the bar, its axis, a little air

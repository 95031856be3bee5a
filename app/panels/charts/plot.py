"""One plot of the charts panel: a pyqtgraph PlotItem with a two-line header (title, then the series keys
coloured like their lines) and theme-aware axes."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import QSizeF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QTextOption
from PySide6.QtWidgets import QGraphicsItem

#: A series key: (symbol, colour or "fg" for the text colour, label).
Key = tuple[str, str, str]


class NarrowLabel(pg.LabelItem):
    """A plot's title that may be narrower than its text (clipped), so a long title never widens its column: its
    size hints ask for its height and no width (pyqtgraph's own label asks for the whole text's width)."""

    def __init__(self, *args: object, **kw: object) -> None:
        self._height = 0.0
        super().__init__(*args, **kw)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemClipsChildrenToShape)

    def updateMin(self) -> None:  # noqa: N802 - pyqtgraph's name, called whenever the text changes
        self._height = self.itemRect().height()
        self.setMinimumSize(0, self._height)
        self.updateGeometry()

    def sizeHint(self, hint: Qt.SizeHint, constraint: QSizeF | None = None) -> QSizeF:  # noqa: N802 - Qt's name
        if hint in (Qt.SizeHint.MinimumSize, Qt.SizeHint.PreferredSize):
            return QSizeF(0, self._height)
        if hint == Qt.SizeHint.MaximumSize:
            return QSizeF(-1, -1)
        return QSizeF(0, 0)


class CycleAxis(pg.AxisItem):
    """A cycle axis: whole cycles only (pyqtgraph's own ticks go to -0.5, 0.5, ... in a short session)."""

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:
        levels = [(spacing, [v for v in values if float(v).is_integer()])
                  for spacing, values in super().tickValues(minVal, maxVal, size) if spacing >= 1]
        if not any(values for _, values in levels):  # zoomed in past one cycle: the cycles in view
            levels = [(1.0, [float(v) for v in range(math.ceil(minVal), math.floor(maxVal) + 1)])]
        return levels


class ChartPlot(pg.PlotItem):
    """A titled plot with axis labels, series keys, and curves made for long series."""

    def __init__(self, title: str, x_label: str, y_label: str, tooltip: str) -> None:
        super().__init__(axisItems={"bottom": CycleAxis("bottom")} if x_label == "cycle" else None)
        self.title, self.keys = title, list[Key]()
        self._colors = (QColor("black"), QColor("grey"))
        self._scale = 1.0
        self._title_args: tuple[str, str, str] | None = None
        self.setLabel("bottom", x_label)
        self.setLabel("left", y_label)
        self.showGrid(x=False, y=True, alpha=0.15)
        self.setDownsampling(auto=True, mode="peak")  # applied to every curve the plot holds
        self.setClipToView(True)
        self.vb.setToolTip(tooltip)
        own = self.titleLabel  # pyqtgraph's title: replaced by one that never widens its column
        self.layout.removeItem(own)
        own.setParentItem(None)
        if own.scene() is not None:
            own.scene().removeItem(own)
        self.titleLabel = NarrowLabel("", size="11pt", parent=self)
        self.layout.addItem(self.titleLabel, 0, 0, 1, 3)  # span the axes' columns too, not only the view's
        self.setTitle(None)
        for name in ("left", "bottom", "right"):
            self.getAxis(name).enableAutoSIPrefix(False)
            # Moving the current-cycle line repaints the plot: blit the axes instead of replaying their ticks.
            self.getAxis(name).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.titleLabel.item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        opt = self.titleLabel.item.document().defaultTextOption()
        opt.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        opt.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.titleLabel.item.document().setDefaultTextOption(opt)
        self._title_w = -1.0
        self.geometryChanged.connect(self._fit_title)
        self.vb.sigResized.connect(self._fit_axis_labels)

    def itemChange(self, change, value):
        ret = super().itemChange(change, value)
        if change == QGraphicsItem.GraphicsItemChange.ItemVisibleHasChanged and value:
            # pyqtgraph sizes an axis to 0 while it is hidden and only again when its ticks change: a chart
            # shown again (the charts that apply changed) would have no tick labels.
            for axis in self.axes.values():
                item = axis["item"]
                if item.orientation in ("left", "right"):
                    item.setWidth(item.fixedWidth)  # the same width rule, measured again (public API)
                else:
                    item.setHeight(item.fixedHeight)
        return ret

    def curve(self, **kw: object) -> pg.PlotDataItem:
        """A curve, peak-downsampled to about two points per pixel and clipped to the view."""
        item = self.plot(**kw)
        item.opts["autoDownsampleFactor"] = 1.0  # pyqtgraph's default draws 5 samples per pixel
        # Moving the current-cycle line repaints a strip of the plot: blit the curve instead of redrawing it.
        item.curve.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        return item

    def fix_view(self) -> None:
        """No zooming or panning: for a plot whose ranges the drawing sets (bars, a heatmap)."""
        self.setMouseEnabled(False, False)
        self.hideButtons()

    # -- header --------------------------------------------------------------------------------
    def set_header(self, title: str | None = None, keys: list[Key] | None = None) -> None:
        """Title on the first line; the series keys (the legend), coloured like their lines, on the second."""
        if title is not None:
            self.title = title
        if keys is not None:
            self.keys = keys
        fg, _ = self._colors
        html = self.title
        if self.keys:
            parts = (f"<span style='color:{fg.name() if c == 'fg' else c}'>{sym}</span>&nbsp;{label}"
                     for sym, c, label in self.keys)
            html += f"<br><span style='font-size:{8 * self._scale:g}pt'>{'&nbsp;&nbsp;'.join(parts)}</span>"
        args = (html, fg.name(), f"{9 * self._scale:g}pt")
        if args != self._title_args:  # laying out a title again is the costliest part of a live redraw
            self._title_args = args
            self.setTitle(args[0], color=args[1], size=args[2])
            self._title_w = -1.0
            self._fit_title()

    def _fit_title(self) -> None:
        """Wrap the title and keys to the plot's width (never clipped), and give the title row their height."""
        w = max(40.0, self.width() - 4)
        if w == self._title_w:
            return
        self._title_w = w
        self.titleLabel.item.setTextWidth(w)
        self.titleLabel.resizeEvent(None)
        h = self.titleLabel.itemRect().height()  # pyqtgraph fixes the title row at 30 px: two lines need more
        self.titleLabel.setMaximumHeight(h)
        self.layout.setRowFixedHeight(0, h)

    def _fit_axis_labels(self) -> None:
        """A side axis's label shows only where the plot is tall enough for it: in a short plot (presentation mode
        at 1280x720) it was cut to "s / forward"; the title says what the axis holds."""
        for name in ("left", "right"):
            axis = self.getAxis(name)
            text = axis.labelText
            if not text or not axis.isVisible():
                continue
            needed = axis.label.boundingRect().width()  # the label is drawn turned: its width runs up the plot
            # Showing the label narrows the view, and the title may then wrap to another line or two, which makes
            # the view shorter: a label shown at the edge would be hidden again at once, and so on forever (a
            # presentation-mode hang). So a hidden label comes back only with that much room to spare.
            spare = 2 * QFontMetricsF(self.titleLabel.item.font()).lineSpacing() if not axis.label.isVisible() else 0.0
            fits = needed + spare <= self.vb.height()
            if fits != axis.label.isVisible():
                axis.showLabel(fits)

    def title_width(self) -> float:
        """How wide the title and keys are drawn (at most the plot's width)."""
        return self.titleLabel.item.document().idealWidth()

    def header_text(self) -> str:
        """The title and the series keys as plain text."""
        return " | ".join([self.title, *(label for _, _, label in self.keys)])

    # -- theme ---------------------------------------------------------------------------------
    def apply_theme(self, fg: QColor, grey: QColor, scale: float) -> None:
        self._colors, self._scale = (fg, grey), scale
        tick_font = QFont()
        tick_font.setPointSizeF(8 * scale)
        for name in ("left", "bottom", "right"):
            ax = self.getAxis(name)
            ax.setPen(pg.mkPen(fg.red(), fg.green(), fg.blue(), 110))
            ax.setTextPen(fg)
            ax.setStyle(tickFont=tick_font)
            if ax.labelText:
                ax.setLabel(ax.labelText, **{"font-size": f"{8.5 * scale:g}pt", "color": fg.name()})
        self.set_header()

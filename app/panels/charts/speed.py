"""The charts panel's tokens/s plot: per cycle and rolling, and the speed-up against an AR baseline.

The speed-up has its own axis on the right: a second view whose y range is the left one divided by the AR
rate, so the rolling curve reads in tokens/s on the left and in "× AR" on the right.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import PLOT_HELP, Chart, ChartInputs
from specviz_app.panels.charts.data import WINDOW
from specviz_app.theme import GATED, SOURCE_COLORS


class SpeedPlot(Chart):
    """Every session has it; ``ar_tokens_per_s`` is the AR rate shown (the inputs' baseline)."""

    name, wide, per_cycle = "tps", True, True

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("tokens/s", "cycle", "tokens / s", PLOT_HELP)
        self.window = WINDOW
        self.ar_tokens_per_s: float | None = None
        self.ar_note = ""
        self.c_tps = self.curve(pen=pg.mkPen(GATED, width=1))
        self.c_tps_roll = self.curve()
        ar = SOURCE_COLORS["ar"]
        self.ar_line = pg.InfiniteLine(angle=0, movable=False, label="AR",
                                       pen=pg.mkPen(ar, width=2, style=Qt.PenStyle.DashLine),
                                       # under the line in the view's upper half, over it in the lower half: never
                                       # cut by the axis (at the bottom, hanging under the line, it was)
                                       labelOpts={"position": 0.02, "anchors": [(0, 0), (0, 1)], "color": ar})
        self.addItem(self.ar_line)  # in the y auto-range: the AR rate stays in view
        self.vb_speed = pg.ViewBox(enableMouse=False)
        self.vb_speed.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.vb_speed.setZValue(-10)
        scene.addItem(self.vb_speed)
        self.getAxis("right").linkToView(self.vb_speed)
        self.getAxis("right").setLabel("speed-up (× AR)")
        self.vb_speed.setXLink(self)
        self.c_speed = pg.PlotDataItem(autoDownsample=True, downsampleMethod="peak", clipToView=True)
        self.c_speed.opts["autoDownsampleFactor"] = 1.0
        self.vb_speed.addItem(self.c_speed)
        self.vb.sigResized.connect(self._sync_speed_view)
        self.vb.sigYRangeChanged.connect(self._sync_speed_view)
        self.set_baseline(None)

    def apply_theme(self, fg: QColor, grey: QColor, scale: float) -> None:
        super().apply_theme(fg, grey, scale)
        for curve in (self.c_tps_roll, self.c_speed):
            curve.setPen(pg.mkPen(fg, width=2))

    def set_baseline(self, tokens_per_s: float | None, note: str = "") -> None:
        """The AR rate (tokens/s) to compare against, and how it was measured; None: no baseline."""
        self.ar_tokens_per_s = float(tokens_per_s) if tokens_per_s and tokens_per_s > 0 else None
        self.ar_note = note
        has = self.ar_tokens_per_s is not None
        self.c_tps_roll.setVisible(not has)
        self.c_speed.setVisible(has)
        self.ar_line.setVisible(has)
        self.showAxis("right", has)
        keys = [("━", GATED, "per cycle")]
        if has:
            keys += [("━", "fg", f"rolling {self.window} → speed-up"), ("╍", SOURCE_COLORS["ar"], "AR")]
            self.ar_line.setValue(self.ar_tokens_per_s)
            self.ar_line.label.setFormat(f"AR {self.ar_tokens_per_s:.1f} tok/s")
            self.ar_line.setToolTip(f"AR baseline {self.ar_tokens_per_s:.1f} tok/s {note}".rstrip())
        else:
            keys += [("━", "fg", f"rolling ({self.window})")]
        self.keys = keys

    def redraw(self, inputs: ChartInputs) -> None:
        # Plain decoding's rate as the session's arithmetic takes it (the AR baseline where it ran under this session's
        # load, else the cost curve's 1-token forward at its pace): the speed-ups here are the header's.
        a = inputs.arithmetic
        rate, note = (1000.0 / a.t_ar, f"({a.basis})") if a.t_ar else (inputs.ar_tokens_per_s, inputs.ar_note)
        if (rate, note) != (self.ar_tokens_per_s, self.ar_note):
            self.set_baseline(rate, note)
        d = inputs.data
        self.draw(d.series("tps"), d.series("tps_rolling"), d.total_tokens_per_s, a.speedup)

    def arithmetic_changed(self, inputs: ChartInputs) -> None:
        self.redraw(inputs)

    def draw(self, tps: np.ndarray, rolling: np.ndarray, overall: float, speedup: float | None = None) -> None:
        """Per-cycle and rolling tokens/s (one value per cycle), the session's overall rate and its speed-up over
        plain decoding (the arithmetic's; None: the overall rate over the AR rate)."""
        ar = self.ar_tokens_per_s
        x = np.arange(len(tps), dtype=float)
        self.c_tps.setData(x, tps)
        self.c_tps_roll.setData(x, rolling)
        if ar is None:
            self.c_speed.setData([], [])
            title = f"tokens/s · {overall:.1f} overall"
        else:
            self.c_speed.setData(x, rolling / ar)
            x = speedup if speedup is not None else overall / ar
            title = f"tokens/s · {x:.2f}× plain decoding"  # the AR rate labels its line, its tooltip says which
        self.set_header(title)
        self._sync_speed_view()

    def _sync_speed_view(self, *_: object) -> None:
        self.vb_speed.setGeometry(self.vb.sceneBoundingRect())
        self.vb_speed.linkedViewChanged(self.vb, self.vb_speed.XAxis)
        if self.ar_tokens_per_s:
            lo, hi = self.vb.viewRange()[1]
            self.vb_speed.setYRange(lo / self.ar_tokens_per_s, hi / self.ar_tokens_per_s, padding=0)

    def cycle_text(self, inputs: ChartInputs, i: int) -> str:
        tps, ms, rolling = (float(inputs.data.series(k)[i]) for k in ("tps", "ms", "tps_rolling"))
        if not np.isfinite(tps):  # no forward of its own (metrics.cycle_rate)
            return f"cycle {i}: {ms:.1f} ms, its token from the prefill's last row: no rate of its own"
        text = f"cycle {i}: {tps:.1f} tok/s, {ms:.1f} ms (rolling {rolling:.1f} tok/s"
        if self.ar_tokens_per_s:
            return (f"{text}, {rolling / self.ar_tokens_per_s:.2f}× AR)\n"
                    f"AR baseline {self.ar_tokens_per_s:.1f} tok/s {self.ar_note}".rstrip())
        return f"{text})\nspeed-up: record an AR session of the same prompt and model in this recording"

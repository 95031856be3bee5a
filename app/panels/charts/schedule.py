"""The charts panel's plot of transformers' assistant schedule (hf_assisted, hf_universal), cycle by cycle.

Left axis, in tokens: ``num_assistant_tokens`` (the cap the cycle drafted under; the heuristic schedules grow it
by 2 after a fully accepted chain and shrink it by 1 otherwise), the chain the assistant drafted, and the draft
tokens the target kept. Right axis: ``assistant_confidence_threshold`` (the chain ends at the first token the
assistant is less sure of; with scikit-learn installed transformers moves it every cycle). Each value is the one
the cycle's ``state`` recorded.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import PLOT_HELP, Chart, ChartInputs
from specviz_app.theme import ACCEPTED, SOURCE_COLORS

THRESHOLD_Y = (0.0, 1.05)


class SchedulePlot(Chart):
    """For hf_assisted and hf_universal once a cycle recorded its schedule."""

    name, per_cycle = "schedule", True

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("assistant schedule", "cycle", "tokens", PLOT_HELP)
        cap, drafted, thr = SOURCE_COLORS["root"], SOURCE_COLORS["draft"], SOURCE_COLORS["ngram"]
        self.c_cap = self.curve(pen=pg.mkPen(cap, width=2), symbol="s", symbolSize=5, symbolBrush=cap,
                                symbolPen=None)
        self.c_drafted = self.curve(pen=None, symbol="o", symbolSize=11, symbolBrush=None,  # hollow: kept shows inside
                                    symbolPen=pg.mkPen(drafted, width=2))
        self.c_kept = self.curve(pen=None, symbol="x", symbolSize=8, symbolPen=pg.mkPen(ACCEPTED, width=2),
                                 symbolBrush=ACCEPTED)
        self.vb_thr = pg.ViewBox(enableMouse=False)
        self.vb_thr.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.vb_thr.setZValue(-10)
        scene.addItem(self.vb_thr)
        self.showAxis("right")
        self.getAxis("right").linkToView(self.vb_thr)
        self.getAxis("right").setLabel("confidence threshold")
        self.vb_thr.setXLink(self)
        self.vb_thr.setYRange(*THRESHOLD_Y, padding=0)
        self.c_thr = pg.PlotDataItem(pen=pg.mkPen(thr, width=2, style=Qt.PenStyle.DashLine))
        self.vb_thr.addItem(self.c_thr)
        self.vb.sigResized.connect(self._sync_view)
        self.keys = [("━", cap, "num_assistant_tokens"), ("○", drafted, "drafted"), ("✕", ACCEPTED, "kept"),
                     ("╍", thr, "threshold (right)")]

    @staticmethod
    def applies(inputs: ChartInputs) -> bool:
        return inputs.method.startswith("hf_") and inputs.data.has_schedule

    def redraw(self, inputs: ChartInputs) -> None:
        self.draw(*(inputs.data.series(k) for k in ("num_assistant_tokens", "candidate_length", "n_matches",
                                                    "assistant_confidence_threshold")))

    def draw(self, cap: np.ndarray, drafted: np.ndarray, kept: np.ndarray, threshold: np.ndarray) -> None:
        """The per-cycle series (NaN where a cycle has no value)."""
        x = np.arange(len(cap), dtype=float)
        self.c_cap.setData(x, cap)
        self.c_drafted.setData(x, drafted)
        self.c_kept.setData(x, kept)
        self.c_thr.setData(x, threshold)
        fin_cap, fin_thr = cap[np.isfinite(cap)], threshold[np.isfinite(threshold)]
        parts = []
        if len(fin_cap):
            parts.append(f"cap {fin_cap[-1]:.0f}")
        if len(fin_thr):
            parts.append(f"threshold {fin_thr[-1]:.2f}")
        self.set_header("assistant schedule" + (" · " + ", ".join(parts) if parts else ""))
        self._sync_view()

    def _sync_view(self, *_: object) -> None:
        self.vb_thr.setGeometry(self.vb.sceneBoundingRect())
        self.vb_thr.linkedViewChanged(self.vb, self.vb_thr.XAxis)

    def cycle_text(self, inputs: ChartInputs, i: int) -> str:
        cap, drafted, kept, threshold, nxt = (float(inputs.data.series(k)[i]) for k in (
            "num_assistant_tokens", "candidate_length", "n_matches", "assistant_confidence_threshold",
            "num_assistant_tokens_next"))

        def n(v: float) -> str:
            return "–" if not np.isfinite(v) else f"{v:.0f}"

        text = f"cycle {i}: drafted {n(drafted)} of num_assistant_tokens {n(cap)}, kept {n(kept)}"
        if np.isfinite(threshold):
            text += f"; confidence threshold {threshold:.3f}"
        if np.isfinite(nxt) and np.isfinite(cap):
            text += f"\nnext cycle: num_assistant_tokens {nxt:.0f} ({nxt - cap:+.0f})"
        return text

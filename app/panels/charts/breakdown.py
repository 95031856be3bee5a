"""The charts panel's "why slower than plain decoding" (the chart named ``why``): each cycle's time as a stacked bar
(draft, verify forward, bookkeeping) against one plain 1-token forward and the break-even line (tokens committed x
that forward); the session's arithmetic in one sentence (:func:`specviz_core.analysis.timing.session_cost`), and the
actions that measure what the charts lack: an AR baseline (a recorded ``ar`` session of the same prompt) and the
device's verify-cost curve."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsScene, QHBoxLayout, QLabel, QPushButton, QWidget

from specviz_app.panels.charts.chart import PLOT_HELP, Arithmetic, Chart, ChartInputs
from specviz_app.panels.charts.data import ChartData
from specviz_app.theme import SOURCE_COLORS
from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.analysis.timing import CostCurve, session_cost

DRAFT_C, VERIFY_C, BOOK_C = SOURCE_COLORS["draft"], "#2f6fb0", "#d9a02b"
PART_HELP = ("Each cycle's wall time: draft (the drafter), verify (the target's forward over the tree), bookkeeping "
             "(walk, trim, harvest, build, record). Dashed: one plain 1-token forward (t_ar). Dotted: tokens committed "
             "x t_ar: a bar under it beat plain decoding.")


def curve_of(points: list[tuple[int, float]] | None) -> CostCurve | None:
    """The callable cost curve from the panel's (N, ms) points."""
    if not points:
        return None
    n, ms = zip(*points)
    return CostCurve.from_dict({"n": list(n), "ms": list(ms)})


class BreakdownPlot(Chart):
    """Stacked per-cycle bars of draft / verify / bookkeeping ms, the 1-token forward line and break-even; once a
    cycle recorded its timings."""

    name, wide, per_cycle = "why", True, True

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__("time per cycle vs plain decoding", "cycle", "ms", f"{PART_HELP}\n{PLOT_HELP}")
        # Three filled steps drawn back to front (total, draft + verify, draft) read as one stacked bar per cycle.
        # Step mode "right" draws y[i] from x[i] to x[i+1]: bars centred on each cycle, the last value repeated.
        self.c_parts = [self.curve(stepMode="right", fillLevel=0, pen=None, brush=QColor(c))
                        for c in (BOOK_C, VERIFY_C, DRAFT_C)]
        self.c_even = self.curve(stepMode="right")
        ar = SOURCE_COLORS["ar"]
        self.ar_line = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(ar, width=2, style=Qt.PenStyle.DashLine))
        self.addItem(self.ar_line)
        self.t_ar: float | None = None
        self.keys = [("▆", DRAFT_C, "draft"), ("▆", VERIFY_C, "verify"), ("▆", BOOK_C, "bookkeeping"),
                     ("╍", ar, "1-token forward"), ("┈", "fg", "tokens × t_ar")]

    def apply_theme(self, fg: QColor, grey: QColor, scale: float) -> None:
        super().apply_theme(fg, grey, scale)
        self.c_even.setPen(pg.mkPen(fg, width=1.5, style=Qt.PenStyle.DotLine))

    @staticmethod
    def applies(inputs: ChartInputs) -> bool:
        return inputs.data.has_timings

    def redraw(self, inputs: ChartInputs) -> None:
        t_ar = inputs.arithmetic.t_ar
        self.draw(inputs.data, t_ar, None if t_ar is None else inputs.arithmetic.speedup)

    def arithmetic_changed(self, inputs: ChartInputs) -> None:
        text = inputs.arithmetic.sentence
        self.vb.setToolTip(f"{text}\n\n{PART_HELP}" if text else PART_HELP)
        self.draw(inputs.data, inputs.arithmetic.t_ar, inputs.arithmetic.speedup)

    def draw(self, d: ChartData, t_ar: float | None, speedup: float | None) -> None:
        """The bars from ``d``'s per-cycle series; ``t_ar`` ms (None: no line); ``speedup`` for the title."""
        self.t_ar = t_ar
        x = np.arange(d.n + 1, dtype=float) - 0.5
        draft, fwd, book = (np.nan_to_num(d.series(k)) for k in ("draft_ms", "forward_ms", "book_ms"))
        for c, y in zip(self.c_parts, (draft + fwd + book, draft + fwd, draft)):
            c.setData(x, np.append(y, y[-1])) if d.n else c.setData([], [])
        self.ar_line.setVisible(t_ar is not None)
        if t_ar is not None and d.n:
            self.ar_line.setValue(t_ar)
            even = np.nan_to_num(d.series("committed")) * t_ar
            self.c_even.setData(x, np.append(even, even[-1]))
        else:
            self.c_even.setData([], [])
        title = "time per cycle vs plain decoding"
        if speedup is not None:
            title += f" · {speedup:.2f}× overall"
        self.set_header(title)

    def cycle_text(self, inputs: ChartInputs, i: int) -> str:
        d = inputs.data
        draft, fwd, book = (float(d.series(k)[i]) for k in ("draft_ms", "forward_ms", "book_ms"))
        text = f"cycle {i}: draft {draft:.1f} + verify {fwd:.1f} + bookkeeping {book:.1f} ms"
        if self.t_ar:
            tok = float(d.series("committed")[i])
            text += (f"\nverify = {fwd / self.t_ar:.1f}× a 1-token forward ({self.t_ar:.1f} ms); {tok:.0f} tokens: "
                     f"{tok * self.t_ar / (draft + fwd + book):.2f}× plain decoding")
        return text


class CostActions(QWidget):
    """Under the charts' bar: the session's "why slower" sentence, and buttons for what the charts lack."""

    measure_baseline = Signal()
    """Record an AR session of this prompt and model: every speed-up is measured against it."""
    measure_curve = Signal()
    """Measure the verify-cost curve of this model and device (kept for next time)."""

    def __init__(self) -> None:
        super().__init__()
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 0, 4, 2)
        self.sentence = QLabel()
        self.sentence.setWordWrap(True)
        self.sentence.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.sentence.setToolTip("Why this session is (or is not) faster than plain decoding: the time arithmetic "
                                 "speed-up = τ × t_ar / t_cycle (docs/metrics.md)")
        row.addWidget(self.sentence, 1)
        self.baseline = QPushButton("Measure AR baseline")
        self.baseline.setToolTip("Decode this prompt plainly (AR) on the same model and device and record it in this "
                                 "recording; every speed-up chart then compares against it")
        self.baseline.clicked.connect(self.measure_baseline.emit)
        self.curve = QPushButton("Measure cost curve")
        self.curve.setToolTip("Time one target forward for verify blocks of 1 to 128 tokens on this device (about "
                              "a minute on a CPU); kept per model, dtype and device in the data folder")
        self.curve.clicked.connect(self.measure_curve.emit)
        for b in (self.baseline, self.curve):
            row.addWidget(b, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_state(self, arithmetic: Arithmetic, *, has_session: bool, is_ar: bool, has_baseline: bool,
                   has_curve: bool) -> None:
        """The session's headline (hover: the arithmetic), and the buttons for what it lacks."""
        text = arithmetic.sentence
        self.sentence.setText(arithmetic.headline)  # one short line: the panel is narrow at 1100x700
        self.sentence.setToolTip(f"{text}\n\nspeed-up = τ × t_ar / t_cycle (docs/metrics.md)" if text else "")
        wants_baseline = has_session and not is_ar and not has_baseline
        wants_curve = has_session and not has_curve
        self.baseline.setVisible(wants_baseline)
        self.curve.setVisible(wants_curve)
        # From the booleans, not the buttons' isVisible(): a button of a hidden row is never visible, so the row
        # would stay hidden for good once hidden.
        self.setVisible(has_session and (bool(self.sentence.text()) or wants_baseline or wants_curve))


def session_arithmetic(summaries: list[CycleSummary], points: list[tuple[int, float]] | None,
                       ar_tokens_per_s: float | None, ar_note: str, ar_forward_ms: float | None = None) -> Arithmetic:
    """The session's time arithmetic for the charts; empty with nothing to say (no curve and no baseline, or no
    timings)."""
    curve = curve_of(points)
    ar_ms = 1000.0 / ar_tokens_per_s if ar_tokens_per_s else None
    if (curve is None and ar_ms is None) or not any(s.timings_ms for s in summaries):
        return Arithmetic()
    cost = session_cost(summaries, curve, ar_ms, ar_note or "the AR baseline", ar_forward_ms)
    return Arithmetic(cost.headline, cost.sentence, cost.ar_forward_ms, cost.measured_speedup if cost.cycles else None,
                      cost.ar_source)

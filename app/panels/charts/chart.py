"""What a chart of the charts panel gives the panel, and what it is given: the registry's interface
(:data:`specviz_app.panels.charts.registry.CHARTS` lists the charts).

A chart is a :class:`Chart`, a :class:`~specviz_app.panels.charts.plot.ChartPlot` (its title, axis labels and tooltip
are the plot's) that says

- ``name``: its key in the panel (``shown``, ``solo``, the tests);
- ``applies(inputs)``: whether the session gets it (from the method, the cycles so far and the session-wide facts);
- ``wide``: it reads better over two of the grid's three columns;
- ``per_cycle``: its x axis is the cycle: it gets the current-cycle line, a click on it goes to that cycle, hovering
  says what the cycle holds (``cycle_text``), and its x range follows the other per-cycle charts';

and is made from the scene (``Chart(scene)``, once), then drawn with ``redraw(inputs)`` whenever the cycles or the
session-wide facts change. The hooks ``arithmetic_changed``, ``show_cycle`` and ``point_text`` do nothing unless a
chart needs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

import pyqtgraph as pg
from PySide6.QtGui import QColor

from specviz_app.panels.charts.data import ChartData
from specviz_app.panels.charts.plot import ChartPlot
from specviz_core.records import CycleRecord, SessionInfo

PLOT_HELP = "Click: jump to that cycle · double-click: this chart alone (again: all) · wheel/drag: zoom/pan · right-click: menu"


class Arithmetic(NamedTuple):
    """The session's time arithmetic against plain decoding (:func:`specviz_core.analysis.timing.session_cost`)."""

    headline: str = ""
    """One short line ('' with nothing to say)."""
    sentence: str = ""
    """The arithmetic in words."""
    t_ar: float | None = None
    """One plain 1-token forward, ms (from the AR baseline or the cost curve); None: unknown."""
    speedup: float | None = None
    """The measured speed-up over plain decoding; None: unknown."""
    basis: str = ""
    """What ``t_ar`` is (an AR session under the same load, or the cost curve's 1-token forward at the session's
    pace): every speed-up the charts show is against it."""


@dataclass(eq=False)
class ChartInputs:
    """Everything a chart may draw from: the session's per-cycle numbers and its session-wide facts. The panel keeps
    one and updates it in place; the charts only read it."""

    data: ChartData = field(default_factory=ChartData)
    """The per-cycle series of the session so far."""
    method: str = ""
    """The session's method ('' before the first session)."""
    samples: list[SessionInfo] = field(default_factory=list)
    """The sessions of the group this one was decoded in (STAND's samples), in order; empty for one of no group."""
    session_id: str = ""
    """The session's id ('' for a live session or none)."""
    ar_tokens_per_s: float | None = None
    """The AR baseline's rate, tokens/s; None: not measured."""
    ar_note: str = ""
    """How the AR baseline was measured."""
    ar_forward_ms: float | None = None
    """The AR baseline's median forward, ms (the load it ran under); None: not known."""
    cost_points: list[tuple[int, float]] | None = None
    """The verify-cost curve: (block size N, forward ms) pairs by N; None: not measured."""
    arithmetic: Arithmetic = Arithmetic()
    """The session against plain decoding, worked out at most a few times a second (it reads every cycle)."""


class Chart(ChartPlot):
    """One chart of the panel (see the module's docstring); subclasses set the class attributes and ``redraw``."""

    name: ClassVar[str] = ""
    wide: ClassVar[bool] = False
    per_cycle: ClassVar[bool] = False

    def __init__(self, title: str, x_label: str, y_label: str, tooltip: str) -> None:
        super().__init__(title, x_label, y_label, tooltip)
        self.cycle_line: pg.InfiniteLine | None = None
        """The current-cycle line (per-cycle charts only)."""
        if self.per_cycle:
            self.cycle_line = pg.InfiniteLine(angle=90, movable=False)
            self.cycle_line.hide()
            self.cycle_line.setZValue(-1)  # under the series, whichever was added first
            self.addItem(self.cycle_line, ignoreBounds=True)

    @staticmethod
    def applies(inputs: ChartInputs) -> bool:
        """Whether the session gets this chart (re-asked after every redraw: cycles may bring what it needs)."""
        return True

    def redraw(self, inputs: ChartInputs) -> None:
        """Draw from ``inputs`` (the cycles so far, the session-wide facts)."""
        raise NotImplementedError

    def arithmetic_changed(self, inputs: ChartInputs) -> None:
        """``inputs.arithmetic`` was worked out again."""

    def show_cycle(self, index: int | None, record: CycleRecord | None) -> None:
        """Cycle ``index`` is current (``record`` None: it cannot be read); index None: no session."""
        if self.cycle_line is not None:
            if index is None:
                self.cycle_line.hide()
            else:
                self.cycle_line.setValue(index)
                self.cycle_line.show()

    def cycle_text(self, inputs: ChartInputs, i: int) -> str:
        """What hovering cycle ``i`` of a per-cycle chart shows."""
        return f"cycle {i}"

    def point_text(self, x: float, y: float) -> str | None:
        """What hovering the point (x, y) of the view shows, for a chart whose x is not the cycle; None: its
        tooltip."""
        return None

    def set_highlight(self, color: QColor) -> None:
        """The colour of the current-cycle marks."""
        if self.cycle_line is not None:
            self.cycle_line.setPen(pg.mkPen(color, width=2))

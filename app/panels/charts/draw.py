"""The charts panel's per-series drawing: per-source acceptance, Goose's spine ratio, TALON's delta against tau.
A mixin of :class:`specviz_app.panels.charts.panel.ChartsPanel` (its plots, curves and data are the panel's)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from specviz_app.theme import GATED, SOURCE_COLORS, SOURCE_LABELS

SPINE_Y = (-0.05, 1.12)  # ratios in [0, 1], bypass ticks above
GOOSE_LABELS = {"spine": "p_s spine", "branch": "p_t branch"}


class ChartsDraw:
    """Drawing of the series that need more than one ``setData``."""

    def source_label(self, source: str) -> str:
        if self._method == "goose" and source in GOOSE_LABELS:
            return GOOSE_LABELS[source]
        return SOURCE_LABELS.get(source, source).split(" (")[0]

    def _draw_sources(self, x: np.ndarray) -> None:
        d, keys = self.data, []
        for name in d.sources:
            color = SOURCE_COLORS.get(name, GATED)
            if name not in self._source_curves:
                self._source_curves[name] = self.p_src.curve(pen=pg.mkPen(color, width=2))
            rate = d.source_rate(name)
            self._source_curves[name].setData(x, rate)
            last = rate[np.isfinite(rate)]
            keys.append(("━", color, f"{self.source_label(name)} {last[-1]:.2f}" if len(last) else self.source_label(name)))
        for name in set(self._source_curves) - set(d.sources):
            self.p_src.removeItem(self._source_curves.pop(name))
        self.p_src.set_header(keys=keys)

    def _draw_spine(self, x: np.ndarray) -> None:
        d = self.data
        self.p_spine.setYRange(*SPINE_Y, padding=0)
        self.c_ratio.setData(x, d.series("spine_ratio"))
        self.c_ema.setData(x, d.series("ema_p_s"))
        b = d.bypass_indices
        if not np.array_equal(b, self.s_bypass.data["x"]):  # rarely changes: skip the scatter's costly rebuild
            self.s_bypass.setData(b.astype(float), np.full(len(b), 1.06))

    def _draw_delta(self, x: np.ndarray) -> None:
        d = self.data
        delta = d.series("delta")
        self.c_delta.setData(x, delta)
        self.c_tau_cum.setData(x, d.series("tau_cum"))
        fin = delta[np.isfinite(delta)]
        self.p_delta.set_header(f"TALON δ {fin[-1]:.2f} vs τ {d.mean_tau:.2f}" if len(fin) else "TALON δ vs τ")
        for c in (self.c_delta, self.c_tau_cum):
            c.setVisible(d.has_delta)

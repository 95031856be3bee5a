"""What the mouse does on the charts: a click on a per-cycle plot goes to that cycle, a double-click shows a chart
alone (again: all), hovering says what a cycle or heatmap cell holds."""

from __future__ import annotations

from PySide6.QtCore import QPointF, Qt

from specviz_app.panels.charts.plot import ChartPlot

PLOT_HELP = "Click: jump to that cycle · double-click: this chart alone (again: all) · wheel/drag: zoom/pan · right-click: menu"


class ChartsMouse:
    """Mixed into :class:`~specviz_app.panels.charts.panel.ChartsPanel`, whose plots, data and model it uses."""

    def _cycle_at(self, scene_pos: QPointF) -> tuple[ChartPlot, int] | None:
        for p in self.cycle_plots:
            if p.vb.sceneBoundingRect().contains(scene_pos):
                i = int(round(p.vb.mapSceneToView(scene_pos).x()))
                if 0 <= i < self.data.n:
                    return p, i
        return None

    def _on_click(self, ev: object) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        if ev.double():
            hit = next((n for n, p in self.by_name.items() if p.isVisible()
                        and p.sceneBoundingRect().contains(ev.scenePos())), None)
            if hit is not None:
                self.set_solo(None if self.solo else hit)
            return
        hit = self._cycle_at(ev.scenePos())
        if hit is not None:
            self.model.set_cycle(hit[1])

    def _on_hover(self, pos: QPointF) -> None:
        hit = self._cycle_at(pos)
        if hit is not None:
            hit[0].vb.setToolTip(f"{self.cycle_tooltip(*hit)}\n{PLOT_HELP}")
        elif self.p_heat.vb.sceneBoundingRect().contains(pos):
            v = self.p_heat.vb.mapSceneToView(pos)
            self.p_heat.vb.setToolTip(self.p_heat.tooltip(int(round(v.x())), int(round(v.y()))))

    def cycle_tooltip(self, p: ChartPlot, i: int) -> str:
        """What hovering cycle ``i`` of per-cycle plot ``p`` shows."""
        d = self.data

        def s(name: str) -> float:
            return float(d.series(name)[i])

        if p is self.p_tau:
            return f"cycle {i}: τ = {s('tau'):.0f} tokens (rolling {s('tau_rolling'):.2f})"
        if p is self.p_tps:
            return self.p_tps.cycle_text(i, s("tps"), s("ms"), s("tps_rolling"))
        if p is self.p_src:
            parts = [f"{self.source_label(n)}: {a:.0f}/{v:.0f}" for n in d.sources for v, a in [d.source_counts(n)[i]]]
            return f"cycle {i} (cumulative): " + ", ".join(parts)
        if p is self.p_sched:
            return p.cycle_text(i, *(s(k) for k in ("num_assistant_tokens", "candidate_length", "n_matches",
                                                    "assistant_confidence_threshold", "num_assistant_tokens_next")))
        if p is self.p_spine:
            mode = " (bypass)" if i in d.bypass_indices else ""
            return f"cycle {i}{mode}: spine ratio {s('spine_ratio'):.2f}, EMA p_s {s('ema_p_s'):.2f}"
        if p is self.p_why:
            return self.p_why.cycle_text(d, i)
        return f"cycle {i}: δ {s('delta'):.2f}, τ running mean {s('tau_cum'):.2f}"


"""What the mouse does on the charts: a click on a per-cycle chart goes to that cycle, a double-click shows a chart
alone (again: all), hovering says what a cycle or a heatmap cell holds.

A part the panel owns (:class:`ChartsMouse`), given the scene, the charts and what to do on a click or double-click.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QGraphicsScene

from specviz_app.panels.charts.chart import PLOT_HELP, Chart
from specviz_app.panels.charts.draw import ChartsDraw


class ChartsMouse:
    """Follows the scene's clicks and moves; ``go_to_cycle(i)`` on a click, ``double_clicked(name)`` on a
    double-click on a chart."""

    def __init__(self, scene: QGraphicsScene, drawing: ChartsDraw, go_to_cycle: Callable[[int], object],
                 double_clicked: Callable[[str], None]) -> None:
        self.drawing = drawing
        self.go_to_cycle = go_to_cycle
        self.double_clicked = double_clicked
        scene.sigMouseClicked.connect(self._on_click)
        scene.sigMouseMoved.connect(self._on_hover)

    def cycle_at(self, scene_pos: QPointF) -> tuple[Chart, int] | None:
        """The per-cycle chart under ``scene_pos`` and the cycle there, if any."""
        for c in self.drawing.cycle_charts:
            if c.isVisible() and c.vb.sceneBoundingRect().contains(scene_pos):
                i = int(round(c.vb.mapSceneToView(scene_pos).x()))
                if 0 <= i < self.drawing.inputs.data.n:
                    return c, i
        return None

    def cycle_tooltip(self, chart: Chart, i: int) -> str:
        """What hovering cycle ``i`` of per-cycle ``chart`` shows."""
        return chart.cycle_text(self.drawing.inputs, i)

    def _on_click(self, ev: object) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        if ev.double():
            hit = next((n for n, c in self.drawing.charts.items() if c.isVisible()
                        and c.sceneBoundingRect().contains(ev.scenePos())), None)
            if hit is not None:
                self.double_clicked(hit)
            return
        hit = self.cycle_at(ev.scenePos())
        if hit is not None:
            self.go_to_cycle(hit[1])

    def _on_hover(self, pos: QPointF) -> None:
        hit = self.cycle_at(pos)
        if hit is not None:
            hit[0].vb.setToolTip(f"{self.cycle_tooltip(*hit)}\n{PLOT_HELP}")
            return
        for c in self.drawing.charts.values():
            if not c.per_cycle and c.vb.sceneBoundingRect().contains(pos):
                v = c.vb.mapSceneToView(pos)
                text = c.point_text(v.x(), v.y())
                if text is not None:
                    c.vb.setToolTip(text)
                    return

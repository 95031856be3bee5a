"""The benchmark chart, drawn from a ``specviz bench`` results dict with QPainter (no matplotlib):
``specviz bench --chart-png FILE`` (``docs/bench/speedup.png``).

Left: speed-up over AR by suite, one bar per method asked for (the fixed budgets ``--fixed-budgets`` adds are in the
tables only). Right: the verify-cost curve (forward ms
against verify-block rows).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QApplication

from specviz_core.errors import SpecVizError

W, H = 1400, 560
PALETTE = ["#9e9e9e", "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac"]


def _nice_max(v: float) -> float:
    for step in (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000):
        if v <= step * 5:
            return step * max(1, -(-v // step))
    return v


def _ticks(top: float, n: int = 5) -> list[float]:
    return [top * i / n for i in range(n + 1)]


def draw(res: dict[str, Any], out: Path) -> None:
    """Draw the chart of the results ``res`` into the PNG ``out`` (1400x560)."""
    # Fonts need an application; a QApplication, so that widgets made later in the process still work.
    app = QApplication.instance() or QApplication(sys.argv[:1])  # noqa: F841
    img = QImage(W, H, QImage.Format.Format_ARGB32)
    img.fill(QColor("white"))
    p = QPainter(img)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    font = QFont()
    font.setPixelSize(13)
    p.setFont(font)
    _speedups(p, res, QRectF(95, 50, 835, 410))
    if res.get("cost_curve"):
        _cost_curve(p, res["cost_curve"], QRectF(1010, 50, 360, 410))
    m = res.get("machine", {})
    p.setPen(QColor("#555555"))
    p.drawText(QRectF(20, H - 30, W - 40, 20), Qt.AlignmentFlag.AlignLeft,
               f"{m.get('cpu_count')}-core {m.get('cpu')}, {m.get('device')} {m.get('dtype')}; "
               f"model {res.get('config', {}).get('model')}; {res.get('config', {}).get('max_new_tokens')} new tokens, "
               f"median of {res.get('config', {}).get('repeats')}")
    p.end()
    if not img.save(str(out)):
        raise SpecVizError(f"cannot write the chart {out}")


def _frame(p: QPainter, area: QRectF, top: float, title: str, ylabel: str, fmt: str) -> None:
    p.setPen(QColor("#222222"))
    bold = QFont(p.font())
    bold.setBold(True)
    bold.setPixelSize(15)
    p.save()
    p.setFont(bold)
    p.drawText(QRectF(area.left(), area.top() - 40, area.width(), 24), Qt.AlignmentFlag.AlignLeft, title)
    p.restore()
    for v in _ticks(top):
        y = area.bottom() - area.height() * v / top
        p.setPen(QPen(QColor("#e6e6e6"), 1))
        p.drawLine(QPointF(area.left(), y), QPointF(area.right(), y))
        p.setPen(QColor("#444444"))
        p.drawText(QRectF(area.left() - 62, y - 9, 56, 18), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                   fmt.format(v))
    p.save()
    p.translate(area.left() - 58, area.center().y())
    p.rotate(-90)
    p.drawText(QRectF(-100, -22, 200, 18), Qt.AlignmentFlag.AlignCenter, ylabel)
    p.restore()
    p.setPen(QPen(QColor("#444444"), 1))
    p.drawLine(QPointF(area.left(), area.bottom()), QPointF(area.right(), area.bottom()))


def _speedups(p: QPainter, res: dict[str, Any], area: QRectF) -> None:
    sweep = set(res.get("config", {}).get("fixed_budget_sweep", ()))  # --fixed-budgets' rows: the tables have them
    rows = [r for r in res.get("suites", []) if r["method"] not in sweep]
    suites = list(dict.fromkeys(r["suite"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    by = {(r["suite"], r["method"]): r["speedup_vs_ar"] or 0.0 for r in rows}
    top = _nice_max(max([1.0] + list(by.values())) * 1.08)
    _frame(p, area, top, "Speed-up over AR (tokens/s), by suite", "speed-up vs AR", "{:.1f}x")
    group = area.width() / max(1, len(suites))
    bar = group * 0.8 / max(1, len(methods))
    for si, s in enumerate(suites):
        x0 = area.left() + si * group + group * 0.1
        for mi, m in enumerate(methods):
            v = by.get((s, m), 0.0)
            h = area.height() * v / top
            r = QRectF(x0 + mi * bar, area.bottom() - h, bar * 0.9, h)
            p.fillRect(r, QColor(PALETTE[mi % len(PALETTE)]))
        p.setPen(QColor("#222222"))
        p.drawText(QRectF(area.left() + si * group, area.bottom() + 4, group, 18), Qt.AlignmentFlag.AlignCenter, s)
    y1 = area.bottom() - area.height() / top
    p.setPen(QPen(QColor("#222222"), 1.5, Qt.PenStyle.DashLine))
    p.drawLine(QPointF(area.left(), y1), QPointF(area.right(), y1))
    # Legend under the axis labels.
    x, y = area.left(), area.bottom() + 28
    for mi, m in enumerate(methods):
        p.fillRect(QRectF(x, y + 3, 12, 12), QColor(PALETTE[mi % len(PALETTE)]))
        p.setPen(QColor("#222222"))
        w = p.fontMetrics().horizontalAdvance(m) + 30
        p.drawText(QRectF(x + 16, y, w, 18), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, m)
        x += w
        if x > area.right() - 120:
            x, y = area.left(), y + 20


def _cost_curve(p: QPainter, curve: dict[str, Any], area: QRectF) -> None:
    ns, ms = curve["n"], curve["ms"]
    top = _nice_max(max(ms) * 1.08)
    right = max(ns)
    _frame(p, area, top, f"Verify forward time ({curve.get('device')}, {curve.get('dtype')})", "ms per forward", "{:.0f}")
    pts = [QPointF(area.left() + area.width() * n / right, area.bottom() - area.height() * v / top) for n, v in zip(ns, ms)]
    path = QPainterPath(pts[0])
    for q in pts[1:]:
        path.lineTo(q)
    p.setPen(QPen(QColor("#4e79a7"), 2.5))
    p.drawPath(path)
    p.setBrush(QColor("#4e79a7"))
    for q in pts:
        p.drawEllipse(q, 3.5, 3.5)
    p.setPen(QColor("#222222"))
    for n in (1, 16, 32, 64, 96, 128):
        if n <= right:
            x = area.left() + area.width() * n / right
            p.drawText(QRectF(x - 20, area.bottom() + 4, 40, 18), Qt.AlignmentFlag.AlignCenter, str(n))
    p.drawText(QRectF(area.left(), area.bottom() + 24, area.width(), 18), Qt.AlignmentFlag.AlignCenter,
               f"verify-block rows N (cache of {curve.get('cache_len')} tokens)")


"""The charts panel: every series against numbers the test computes itself, live appends, markers, the
current-cycle line, clicks, the heatmap's pixels, and a 10,000-cycle open (timed, printed, not asserted)."""

from __future__ import annotations

import ctypes
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtTest import QTest

from specviz_app.panels.base import export_widget
from specviz_app.panels.charts import panel as charts_mod
from specviz_app.panels.charts.layout import grid_cells
from specviz_app.panels.charts.panel import HINT, ChartsPanel
from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.records import CycleRecord, Node, SessionInfo
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import LiveSource

W = 16  # the rolling window the panel promises


@pytest.fixture(autouse=True, scope="module")
def _pin_singletons():
    """PySide6 6.12.0 on Python < 3.12 drops a reference to None on void calls and to True on every
    ``Signal.emit()``; thousands of emits (a 10,000-cycle chart makes them) would free True and abort."""
    if sys.version_info < (3, 12):
        for obj in (None, True, False):
            ref = ctypes.c_ssize_t.from_address(id(obj))
            if ref.value < 1 << 40:
                ref.value += 1 << 40


# -- hand-made sessions -----------------------------------------------------------------------------
def summary(i: int, n_acc: int, *, mode: str = "tree", ms: float = 40.0, committed: int | None = None,
            by_source: dict | None = None, by_dr: dict | None = None, state: dict | None = None) -> CycleSummary:
    n_com = n_acc + 1 if committed is None else committed
    return CycleSummary(index=i, mode=mode, n_verified=20, n_accepted=n_acc, committed_ids=tuple(range(n_com)),
                        committed_kinds=("spine",) * n_com, cycle_ms=ms, spine_broke_at=None, spine_continued=False,
                        by_source=by_source or {}, state=state or {},
                        depth_rank=[[d, r, v, a] for (d, r), (v, a) in (by_dr or {}).items()])


def chain_record(i: int, n_draft: int = 3, n_acc: int = 1) -> CycleRecord:
    """Root plus a chain of ``n_draft`` spine nodes, the first ``n_acc`` accepted."""
    nodes = [Node(0, -1, 5, "root", 0, 1.0, True, accepted=True, target_token=7)]
    nodes += [Node(k, k - 1, 7 + k, "spine", k, 0.5, True, accepted=k <= n_acc, target_token=8 + k)
              for k in range(1, n_draft + 1)]
    n = n_draft + 1
    return CycleRecord(index=i, mode="chain", cache_len=10 + i, nodes=tuple(nodes), verify_order=tuple(range(n)),
                       mask=np.tril(np.ones((n, n), dtype=bool)), positions=tuple(10 + i + k for k in range(n)),
                       accepted_path=tuple(range(1, n_acc + 1)), bonus_token=3,
                       committed_ids=tuple(range(n_acc + 1)), kv_keep=tuple(range(n_acc + 1)),
                       state={"spine_ratio": 0.5, "ema_p_s": 0.4}, timings_ms={"forward": 30.0, "draft": 2.0 + i})


class FakeSource:
    """A CycleSource over hand-made summaries (cycle(i) returns a small chain record with that index)."""

    def __init__(self, summaries: list[CycleSummary], method: str = "goose", live: bool = False) -> None:
        self._summaries = list(summaries)
        self.info = SimpleNamespace(method=method, model="hand-built", device="cpu")
        self.live = live

    def __len__(self) -> int:
        return len(self._summaries)

    def cycle(self, index: int) -> CycleRecord:
        return chain_record(index)

    def summaries(self) -> list[CycleSummary]:
        return self._summaries


def rolling_mean(x: np.ndarray, w: int = W) -> np.ndarray:
    return np.array([x[max(0, i - w + 1): i + 1].mean() for i in range(len(x))])


def rolling_rate(num: np.ndarray, den: np.ndarray, w: int = W) -> np.ndarray:
    return np.array([num[max(0, i - w + 1): i + 1].sum() / den[max(0, i - w + 1): i + 1].sum() * 1000
                     for i in range(len(num))])


def curve_y(item) -> np.ndarray:
    y = item.getOriginalDataset()[1]
    return np.zeros(0) if y is None else np.asarray(y, dtype=float)


def curve_x(item) -> np.ndarray:
    x = item.getOriginalDataset()[0]
    return np.zeros(0) if x is None else np.asarray(x, dtype=float)


@pytest.fixture
def panel(qtbot):
    model = SessionModel()
    w = ChartsPanel(model)
    qtbot.addWidget(w)
    w.resize(900, 600)
    w.show()
    qtbot.waitExposed(w)
    return w


def open_session(panel: ChartsPanel, summaries: list[CycleSummary], method: str = "goose") -> FakeSource:
    src = FakeSource(summaries, method)
    panel.model.open(src)
    return src


def random_session(n: int = 40, seed: int = 0, method: str = "goose") -> list[CycleSummary]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        acc = int(rng.integers(0, 7))
        vs, vb = int(rng.integers(1, 10)), int(rng.integers(0, 20))
        acc_s = min(acc, vs)
        by_source = {"spine": (vs, acc_s)}
        if vb:
            by_source["branch"] = (vb, min(acc - acc_s, vb))
        out.append(summary(i, acc, ms=float(rng.uniform(20, 80)), by_source=by_source,
                           state={"spine_ratio": float(rng.uniform(0.2, 0.8)), "ema_p_s": float(rng.uniform(0, 1))},
                           mode="bypass" if i in (3, 7, 8, 31) else "tree"))
    return out


# -- tests ------------------------------------------------------------------------------------------
def test_hint_without_session_then_charts(panel):
    assert panel._stack.currentWidget() is panel.hint
    assert panel.hint.text() == HINT
    assert panel.hint.isVisible()
    open_session(panel, random_session(5))
    assert panel._stack.currentWidget() is panel.scroll
    panel.model.close()
    assert panel._stack.currentWidget() is panel.hint
    assert panel.data.n == 0


def test_tau_per_cycle_and_rolling_mean(panel):
    ss = random_session(40)
    open_session(panel, ss)
    tau = np.array([s.n_accepted + 1 for s in ss], dtype=float)
    assert np.array_equal(curve_y(panel.chart("tau").c_tau)[:40], tau)
    assert np.allclose(curve_y(panel.chart("tau").c_tau_roll), rolling_mean(tau))
    assert np.array_equal(curve_x(panel.chart("tau").c_tau_roll), np.arange(40))
    assert f"{tau.mean():.2f} tokens/forward" in panel.chart("tau").header_text()
    assert "rolling mean (16)" in panel.chart("tau").header_text()
    assert panel.chart("tau").getAxis("left").labelText == "tokens / forward"


def test_a_token_from_the_prefill_has_no_rate_of_its_own(panel):
    """Cycle 0 took its token from the prefill's last row in 2 ms: plotted, it read 500 tokens/s and squashed every
    other cycle to the axis. It has no point on the per-cycle line nor a rolling value alone; from cycle 1 the rolling
    window counts its token, as the session's tokens/s does."""
    ss = [summary(0, 0, ms=2.0, state={"from_prefill": True}), *random_session(10)[1:]]
    open_session(panel, ss)
    committed = np.array([s.n_committed for s in ss], dtype=float)
    ms = np.array([s.cycle_ms for s in ss])
    tps, roll = curve_y(panel.chart("tps").c_tps), curve_y(panel.chart("tps").c_tps_roll)
    assert np.isnan(tps[0]) and np.allclose(tps[1:], committed[1:] / ms[1:] * 1000)
    assert np.isnan(roll[0]) and np.allclose(roll[1:], rolling_rate(committed, ms)[1:])
    assert "no rate of its own" in panel.chart("tps").cycle_text(panel.inputs, 0)
    lo, hi = panel.chart("tps").vb.viewRange()[1]
    assert hi < 2 * np.nanmax(tps)  # the axis is the other cycles'


def test_tokens_per_s_and_speed_up_against_ar(panel):
    ss = random_session(30)
    open_session(panel, ss)
    committed = np.array([s.n_committed for s in ss], dtype=float)
    ms = np.array([s.cycle_ms for s in ss])
    assert np.allclose(curve_y(panel.chart("tps").c_tps), [s.tokens_per_s for s in ss])
    roll = rolling_rate(committed, ms)
    assert np.allclose(curve_y(panel.chart("tps").c_tps_roll), roll)
    assert "× plain decoding" not in panel.chart("tps").header_text()
    assert not panel.chart("tps").getAxis("right").isVisible()
    assert not panel.chart("tps").ar_line.isVisible()

    panel.set_ar_baseline(25.0, "AR session 1a2b")
    assert np.allclose(curve_y(panel.chart("tps").c_speed), roll / 25.0)
    assert panel.chart("tps").ar_line.value() == 25.0 and panel.chart("tps").ar_line.isVisible()
    assert panel.chart("tps").getAxis("right").isVisible()
    overall = committed.sum() / ms.sum() * 1000 / 25.0
    assert f"{overall:.2f}× plain decoding" in panel.chart("tps").header_text()
    # The right axis reads speed-up: its range is the left range divided by the AR rate.
    lo, hi = panel.chart("tps").vb.viewRange()[1]
    lo2, hi2 = panel.chart("tps").vb_speed.viewRange()[1]
    assert lo2 == pytest.approx(lo / 25.0) and hi2 == pytest.approx(hi / 25.0)

    panel.set_ar_baseline(None, "")
    assert "× plain decoding" not in panel.chart("tps").header_text()
    assert not panel.chart("tps").c_speed.isVisible() and panel.chart("tps").c_tps_roll.isVisible()


def test_per_source_cumulative_acceptance_is_p_s_and_p_t_for_goose(panel):
    ss = random_session(25)
    open_session(panel, ss, method="goose")
    for name in ("spine", "branch"):
        ver = np.cumsum([s.by_source.get(name, (0, 0))[0] for s in ss])
        acc = np.cumsum([s.by_source.get(name, (0, 0))[1] for s in ss])
        with np.errstate(invalid="ignore", divide="ignore"):
            want = np.where(ver > 0, acc / ver, np.nan)
        assert np.allclose(curve_y(panel.chart("sources").source_curves[name]), want, equal_nan=True)
    head = panel.chart("sources").header_text()
    p_s = sum(s.by_source["spine"][1] for s in ss) / sum(s.by_source["spine"][0] for s in ss)
    assert f"p_s spine {p_s:.2f}" in head and "p_t branch" in head

    other = [summary(i, 1, by_source={"ngram": (4, 1)}) for i in range(3)]
    open_session(panel, other, method="pld")
    assert set(panel.chart("sources").source_curves) == {"ngram"}
    assert "n-gram copy 0.25" in panel.chart("sources").header_text()


def test_spine_ratio_ema_and_bypass_markers(panel):
    ss = random_session(40)
    open_session(panel, ss)
    assert np.allclose(curve_y(panel.chart("spine").c_ratio), [s.state["spine_ratio"] for s in ss])
    assert np.allclose(curve_y(panel.chart("spine").c_ema), [s.state["ema_p_s"] for s in ss])
    bypass = [s.index for s in ss if s.mode == "bypass"]
    assert bypass == [3, 7, 8, 31]
    assert list(panel.chart("spine").s_bypass.data["x"]) == bypass
    assert panel.chart("spine").opacity() == 1.0

    assert "spine" in panel.shown and panel.chart("spine").isVisible()
    open_session(panel, [summary(i, 2) for i in range(5)], method="tr")
    assert "spine" not in panel.shown and not panel.chart("spine").isVisible()  # no such chart for this method
    assert len(panel.chart("spine").s_bypass.data) == 0


def test_the_tau_header_is_the_sessions_own_tokens_per_forward(panel):
    """A cycle 0 that took its token from the prefill ran no forward: the header counts tokens per forward as the
    session's header does (its n_tokens over its n_forward), not per cycle."""
    ss = [summary(0, 0, state={"from_prefill": True}), summary(1, 2), summary(2, 3)]
    open_session(panel, ss)
    n_tokens = sum(len(s.committed_ids) for s in ss)  # 1 + 3 + 4
    n_forward = 2
    assert f"{n_tokens / n_forward:.2f} tokens/forward" in panel.chart("tau").header_text()


def test_talon_delta_vs_tau(panel):
    deltas = [1.0, 1.5, 2.0, 2.25]
    ss = [summary(i, a, state={"delta": d, "draft_steps": 3}) for i, (a, d) in enumerate(zip([2, 0, 4, 1], deltas))]
    open_session(panel, ss, method="talon")
    assert np.allclose(curve_y(panel.chart("delta").c_delta), deltas)
    tau = np.array([3, 1, 5, 2], dtype=float)
    assert np.allclose(curve_y(panel.chart("delta").c_tau_cum), np.cumsum(tau) / np.arange(1, 5))
    assert "TALON δ 2.25 vs τ 2.75" in panel.chart("delta").header_text()

    # A method that only counts draft forwards: delta is their running mean.
    ss = [summary(i, 1, state={"draft_forwards": f}) for i, f in enumerate([4, 2, 6])]
    open_session(panel, ss, method="eagle_static")
    assert np.allclose(curve_y(panel.chart("delta").c_delta), [4, 3, 4])

    open_session(panel, [summary(i, 1) for i in range(3)], method="pld")
    assert "delta" not in panel.shown and not panel.chart("delta").isVisible()


def test_acceptance_heatmap_by_depth_and_rank(panel):
    cycles = [
        {(1, 0): (1, 1), (1, 1): (1, 0), (2, 0): (2, 1)},
        {(1, 0): (1, 0), (1, 1): (1, 1), (2, 0): (1, 1), (2, 1): (3, 0)},
        {(1, 0): (1, 1), (3, 0): (1, 1)},
    ]
    open_session(panel, [summary(i, 1, by_dr=dr) for i, dr in enumerate(cycles)])
    ver, acc = {}, {}
    for dr in cycles:
        for k, (v, a) in dr.items():
            ver[k] = ver.get(k, 0) + v
            acc[k] = acc.get(k, 0) + a
    img = panel.chart("heat").img.image  # [depth - 1, rank]
    assert img.shape == (3, 2)
    for d in (1, 2, 3):
        for r in (0, 1):
            if (d, r) in ver:
                assert img[d - 1, r] == pytest.approx(acc[(d, r)] / ver[(d, r)])
            else:
                assert np.isnan(img[d - 1, r])
    assert panel.chart("heat").tooltip(2, 0) == "depth 2, rank 0: 2 accepted of 3 verified (67%)"
    texts = sorted(t.textItem.toPlainText() for t in panel.chart("heat").texts if t.isVisible())
    assert texts == sorted(f"{acc[k] / ver[k]:.0%}" for k in ver)

    # The pixels show the colour map's colour for the cell's rate.
    QTest.qWait(50)
    image = panel.glw.grab().toImage()
    for (d, r), want_rate in (((1, 0), 2 / 3), ((2, 1), 0.0), ((3, 0), 1.0)):
        # a point inside the cell but off its centred text
        scene = panel.chart("heat").vb.mapViewToScene(QPointF(d - 0.35, r + 0.35))
        px = panel.glw.mapFromScene(scene)
        got = image.pixelColor(px.x() * image.width() // panel.glw.width(), px.y() * image.height() // panel.glw.height())
        want = panel.chart("heat").cmap.map(want_rate, mode="qcolor")
        assert abs(got.red() - want.red()) + abs(got.green() - want.green()) + abs(got.blue() - want.blue()) < 40, \
            (d, r, got.name(), want.name())


def test_no_heatmap_for_ar_only_session(panel):
    open_session(panel, [summary(i, 0, mode="ar") for i in range(3)], method="ar")
    assert panel.shown == ["tau", "tps"]
    assert not panel.chart("heat").isVisible() and not panel.chart("sources").isVisible()


def test_live_cycles_extend_the_data(panel, qtbot):
    info = SessionInfo(id="live", model="hand-built", tokenizer="", method="goose", params={}, prompt_ids=(1, 2),
                       prompt_text="", temperature=0.0, seed=0, device="cpu", dtype="float32")
    source = LiveSource(info)
    model = panel.model
    model.open(source)
    assert panel._stack.currentWidget() is panel.hint  # nothing to chart yet
    accepted = [1, 3, 0, 2, 2]
    for i, a in enumerate(accepted):
        model.append(chain_record(i, n_draft=4, n_acc=a))
    assert panel.data.n == 5
    assert panel._timer.isActive()  # live appends are drawn together
    qtbot.waitUntil(lambda: len(curve_y(panel.chart("tau").c_tau_roll)) == 5, timeout=2000)
    tau = np.array(accepted, dtype=float) + 1
    assert np.array_equal(curve_y(panel.chart("tau").c_tau)[:5], tau)
    assert np.allclose(curve_y(panel.chart("tau").c_tau_roll), rolling_mean(tau))
    ms = np.array([32.0 + i for i in range(5)])
    assert np.allclose(curve_y(panel.chart("tps").c_tps), (tau / ms) * 1000)
    spine = np.cumsum(accepted) / (4 * np.arange(1, 6))
    assert np.allclose(curve_y(panel.chart("sources").source_curves["spine"]), spine)
    # the model follows the live session: the line is at the newest cycle
    assert all(c.cycle_line.value() == 4 for c in panel.drawing.cycle_charts)
    model.append(chain_record(5, n_draft=4, n_acc=4))
    panel.flush()
    assert np.array_equal(curve_y(panel.chart("tau").c_tau)[:6], np.append(tau, 5))
    assert panel.chart("heat").tooltip(1, 0) == "depth 1, rank 0: 5 accepted of 6 verified (83%)"


def test_current_cycle_line_moves_and_click_jumps(panel, qtbot):
    open_session(panel, random_session(30))
    model = panel.model
    assert model.index == 0
    model.set_cycle(17)
    cycle_charts = panel.drawing.cycle_charts
    assert [c.cycle_line.value() for c in cycle_charts] == [17] * len(cycle_charts)
    assert all(c.cycle_line.isVisible() for c in panel.drawing.cycle_charts if c.isVisible())
    QTest.qWait(30)
    for p, target in ((panel.chart("tau"), 9), (panel.chart("spine"), 22)):
        y = float(np.mean(p.vb.viewRange()[1]))
        pos = panel.glw.mapFromScene(p.vb.mapViewToScene(QPointF(target, y)))
        QTest.mouseClick(panel.glw.viewport(), Qt.MouseButton.LeftButton, pos=pos)
        qtbot.waitUntil(lambda target=target: model.index == target, timeout=1000)
        assert panel.chart("tps").cycle_line.value() == target
    tip = panel.mouse.cycle_tooltip(panel.chart("tau"), 9)
    assert tip.startswith("cycle 9: τ = ")


def test_cost_curve(panel, monkeypatch):
    open_session(panel, random_session(4))
    assert "cost" not in panel.shown and not panel.chart("cost").isVisible()  # not measured: no empty chart
    pts = [(1, 30.0), (8, 31.5), (32, 36.0), (64, 44.0)]
    panel.set_cost_curve(pts)
    assert "cost" in panel.shown and panel.chart("cost").isVisible()
    assert np.array_equal(curve_x(panel.chart("cost").c_cost), [1, 8, 32, 64])
    assert np.array_equal(curve_y(panel.chart("cost").c_cost), [30.0, 31.5, 36.0, 44.0])
    panel.model.set_cycle(2)
    assert panel.chart("cost").n_line.isVisible() and panel.chart("cost").n_line.value() == panel.model.record.n_verified
    panel.set_cost_curve(None)
    assert "cost" not in panel.shown

    # The session's curve is the session model's: given when the session opens, or measured later.
    panel.model.open(FakeSource(random_session(3), "goose"), cost_curve={"points": [[16, 33.0], [4, 30.5]]})
    assert panel.cost_points == [(4, 30.5), (16, 33.0)]
    panel.model.set_cost_curve({"n": [1, 8], "ms": [20.0, 22.0]})
    assert panel.cost_points == [(1, 20.0), (8, 22.0)]
    open_session(panel, random_session(3))  # another session: no curve until one is given
    assert panel.cost_points is None


def test_light_and_dark_backgrounds(panel, qtbot):
    open_session(panel, random_session(10))
    for base, text in (("#ffffff", "#000000"), ("#17181a", "#e8eaed")):
        pal = QPalette(panel.palette())
        pal.setColor(QPalette.ColorRole.Base, QColor(base))
        pal.setColor(QPalette.ColorRole.Text, QColor(text))
        panel.setPalette(pal)
        QTest.qWait(20)
        img = panel.glw.grab().toImage()
        assert img.pixelColor(2, img.height() - 2).name() == base  # bottom-left corner: background
        assert panel.chart("tau").getAxis("left").textPen().color().name() == text


def test_narrow_panel_uses_two_columns(panel, tmp_path):
    open_session(panel, random_session(10))
    assert panel.columns == 3
    panel.resize(600, 400)
    QTest.qWait(20)
    assert panel.columns == 2
    assert panel.glw.width() <= panel.scroll.viewport().width()  # no horizontal clipping
    out = export_widget(panel.export_target(), tmp_path / "charts.png")
    assert out.stat().st_size > 1000


def test_open_ten_thousand_cycles(panel, capsys):
    rng = np.random.default_rng(1)
    ss = []
    for i in range(10_000):
        dr = {(d, r): (1, int(rng.random() < 0.6 / (d + r))) for d in range(1, 7) for r in range(3)}
        acc = int(rng.integers(0, 6))
        ss.append(summary(i, acc, ms=float(rng.uniform(20, 60)), by_source={"spine": (8, min(acc, 8)), "branch": (10, 0)},
                          by_dr=dr, state={"spine_ratio": 0.5, "ema_p_s": 0.3},
                          mode="bypass" if i % 97 == 0 else "tree"))
    t0 = time.perf_counter()
    open_session(panel, ss[:-100])
    t1 = time.perf_counter()
    panel.glw.grab()
    t2 = time.perf_counter()
    per = []
    for s in ss[-100:]:
        t = time.perf_counter()
        panel.on_cycles_appended([s])
        per.append(time.perf_counter() - t)
    t3 = time.perf_counter()
    panel.flush()
    t4 = time.perf_counter()
    with capsys.disabled():
        print(f"\ncharts: open 9,900 cycles {1e3 * (t1 - t0):.0f} ms (+ first paint {1e3 * (t2 - t1):.0f} ms); "
              f"append {1e3 * np.median(per):.2f} ms/cycle (data), one redraw of 10,000 cycles {1e3 * (t4 - t3):.1f} ms")
    assert panel.data.n == 10_000
    assert len(curve_y(panel.chart("tau").c_tau_roll)) == 10_000
    assert list(panel.chart("spine").s_bypass.data["x"]) == [i for i in range(10_000) if i % 97 == 0]
    # peak downsampling: the drawn curve has about two points per pixel, not 10,000
    shown = panel.chart("tau").c_tau_roll.curve.getData()[0]
    assert len(shown) < 3 * panel.chart("tau").vb.width()


def test_fonts_follow_the_application_font(panel, qtbot):
    open_session(panel, random_session(10))
    font = panel.font()
    font.setPointSizeF(font.pointSizeF() * 1.5)
    panel.setFont(font)
    assert panel._font_scale == pytest.approx(1.5)
    assert "13.5pt" in panel.chart("tau").titleLabel.item.toHtml() or "13.5pt" in panel.chart("tau")._title_args[2]
    rows = 1 + max(r for r, _, _ in grid_cells(panel.shown, panel.columns, panel.drawing.wide).values())
    assert panel.glw.minimumHeight() == rows * round(charts_mod.ROW_MIN_PX * 1.5)


def test_the_heatmaps_colour_bar_has_a_scale_and_its_label_beside_it(qtbot):
    """Issue 30, item 7: the colour bar's label was drawn over the bar (unreadable on its dark end) and it had no
    scale. A panel themed while hidden (a tabbed dock) must come out the same."""
    model = SessionModel()
    w = ChartsPanel(model)  # built and themed while not shown
    qtbot.addWidget(w)
    open_session(w, [summary(i, 1, by_dr={(1, 0): (1, 1), (2, 0): (2, 1)}) for i in range(4)])
    w.resize(900, 600)
    w.show()
    qtbot.waitExposed(w)
    QTest.qWait(50)
    bar = w.chart("heat").colorbar
    assert [tick for level in bar.axis._tickLevels for tick in level] == [(0.0, "0%"), (0.5, "50%"), (1.0, "100%")]
    bar_right = bar.vb.mapRectToScene(bar.vb.boundingRect()).right()
    axis = bar.axis.mapRectToScene(bar.axis.boundingRect())
    label = bar.axis.label.mapRectToScene(bar.axis.label.boundingRect())
    assert axis.width() >= 30, "room for the scale"
    assert label.left() >= bar_right, "the label beside the bar, not over it"

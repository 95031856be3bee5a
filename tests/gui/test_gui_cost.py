"""The charts' actions and time breakdown: "Measure AR baseline" records an AR session that every speed-up then uses,
"Measure cost curve" measures and keeps the device's curve, and the breakdown draws each cycle's recorded timings."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from PySide6.QtCore import Qt

from specviz_core.analysis.timing import CostCurve
from specviz_core.recording.store import Recording
from specviz_core.viewer.sources import session_curve
from specviz_core.runtime.cost_files import curve_path, load_cost_curve


@pytest.fixture
def replayed(qtbot, window, tmp_path, monkeypatch):
    """A finished tiny-model Goose session, recorded live and opened again as a replay (no AR session yet)."""
    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path / "data"))  # a curve measured here stays here
    w = window
    w.run_panel.max_new_tokens.setValue(24)
    w.controller.run()
    qtbot.waitUntil(lambda: w.model.n_cycles > 0 and w.controller.live_done and w.controller.idle, timeout=120000)
    info = w.model.source.info
    db = w.run_panel.db_path()
    assert w.controller.open_session(str(db), info.id)
    w.docks["charts"].raise_()
    return w, db, info


def test_measure_ar_baseline_records_an_ar_session_and_the_speed_up_uses_it(qtbot, replayed):
    w, db, info = replayed
    charts = w.charts
    # Before any AR session, plain decoding's rate is the session's own cost curve's 1-token forward, and says so.
    assert "cost curve" in charts.chart("tps").ar_note
    assert charts.actions.baseline.isVisibleTo(charts)
    qtbot.mouseClick(charts.actions.baseline, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: charts.chart("tps").ar_tokens_per_s is not None and w.controller.idle, timeout=120000)
    with Recording(db, read_only=True) as rec:
        ars = [s for s in rec.sessions() if s.method == "ar"]
        assert len(ars) == 1
        ar = ars[0]
        summaries = rec.cycle_summaries(ar.id)
    assert ar.status == "complete" and ar.prompt_ids == info.prompt_ids and ar.model == info.model
    assert ar.device == info.device and ar.n_tokens >= 8
    # The baseline is that session's own speed: its tokens over its cycles' time. It is the unit of every speed-up
    # when its forwards ran at this session's pace (forward against forward, within 1.5x); else the unit is the
    # session's cost curve's 1-token forward at its pace, and the sentence says why.
    own = 1000.0 * sum(s.n_committed for s in summaries) / sum(s.cycle_ms for s in summaries)
    assert w.model.ar_baseline[0] == pytest.approx(own, rel=1e-6)
    with Recording(db, read_only=True) as rec:
        mine = rec.cycle_summaries(info.id)
        curve = CostCurve.from_dict(session_curve(rec.session(info.id))[0])
    paces = sorted(s.timings_ms["forward"] / curve(s.state.get("padded_to") or s.n_verified) for s in mine
                   if not s.state.get("from_prefill") and s.timings_ms.get("forward", 0) > 0)
    pace = (paces[(len(paces) - 1) // 2] + paces[len(paces) // 2]) / 2
    ar_fwd = sorted(s.timings_ms["forward"] for s in summaries if not s.state.get("from_prefill"))
    ar_fwd = (ar_fwd[(len(ar_fwd) - 1) // 2] + ar_fwd[len(ar_fwd) // 2]) / 2
    same = max(ar_fwd, curve(1) * pace) / min(ar_fwd, curve(1) * pace) <= 1.5
    expected = own if same else 1000.0 / (curve(1) * pace)
    assert charts.chart("tps").ar_tokens_per_s == pytest.approx(expected, rel=1e-6)
    assert ("under another load" in charts.actions.sentence.toolTip()) is not same
    assert charts.chart("tps").c_speed.isVisible() and "× plain decoding" in charts.chart("tps").title
    # One speed-up: the speed chart's title says the header's.
    head = charts.actions.sentence.text().split("×")[0]
    assert charts.chart("tps").title.endswith(f"{head}× plain decoding")
    assert not charts.actions.baseline.isVisibleTo(charts)
    assert f"AR session {ar.id}" in charts.actions.sentence.toolTip()
    # Opening the session again finds the recorded baseline.
    assert w.controller.open_session(str(db), info.id)
    assert w.model.ar_baseline[0] == pytest.approx(own, rel=1e-6)
    assert charts.chart("tps").ar_tokens_per_s == pytest.approx(expected, rel=1e-6)


def test_measure_cost_curve_keeps_it_and_the_charts_use_it(qtbot, replayed):
    w, db, info = replayed
    charts = w.charts
    # The live session measured this device's curve before its first cycle and kept it with the session; a session
    # recorded before sessions kept theirs, replayed on another machine, finds none: remove both, as if so.
    curve_path(info.model, info.device, info.dtype).unlink()
    with sqlite3.connect(db) as con:
        stats = json.loads(con.execute("SELECT stats FROM sessions WHERE id = ?", (info.id,)).fetchone()[0])
        assert stats.pop("cost_curve")["n"]
        con.execute("UPDATE sessions SET stats = ? WHERE id = ?", (json.dumps(stats), info.id))
    assert w.controller.open_session(str(db), info.id)
    assert load_cost_curve(info.model, info.device, info.dtype) is None
    assert charts.actions.curve.isVisibleTo(charts) and "cost" not in charts.shown
    qtbot.mouseClick(charts.actions.curve, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: charts.cost_points is not None and w.controller.idle, timeout=120000)
    stored = load_cost_curve(info.model, info.device, info.dtype)
    assert stored is not None and charts.cost_points == sorted(zip(stored["n"], stored["ms"]))
    assert "cost" in charts.shown and not charts.actions.curve.isVisibleTo(charts)
    assert "the cost curve predicts" in charts.actions.sentence.toolTip()


def test_the_breakdown_draws_each_cycles_recorded_timings(qtbot, replayed):
    w, db, info = replayed
    charts = w.charts
    charts.set_cost_curve([(1, 2.0), (8, 3.0), (64, 9.0)])
    assert "why" in charts.shown
    with Recording(db, read_only=True) as rec:
        records = list(rec.cycles(info.id))
    total, book, draft = charts.chart("why").c_parts
    t = [r.timings_ms for r in records]
    # Step curves: one value per cycle, the last repeated to close its bar.
    np.testing.assert_allclose(total.yData[:-1], [sum(x.values()) for x in t])
    np.testing.assert_allclose(book.yData[:-1], [x["draft"] + x["forward"] for x in t])  # drawn over the total
    np.testing.assert_allclose(draft.yData[:-1], [x["draft"] for x in t])
    # No AR baseline: the unit is the curve's 1-token forward at this session's pace, the median of its forwards'
    # measured ms over the curve's for the rows each ran (a session timed on a busy machine is not compared with a
    # curve timed on a quiet one).
    curve = {1: 2.0, 8: 3.0, 64: 9.0}

    def at(rows):
        (a, ya), (b, yb) = [(n, curve[n]) for n in curve if n <= max(rows, 1)][-1], \
            [(n, curve[n]) for n in curve if n >= rows][0]
        return ya if a == b else ya + (yb - ya) * (rows - a) / (b - a)

    ratios = sorted(x["forward"] / at(r.state.get("padded_to") or r.n_verified)
                    for r, x in zip(records, t) if not r.state.get("from_prefill") and x["forward"] > 0)
    pace = (ratios[(len(ratios) - 1) // 2] + ratios[len(ratios) // 2]) / 2
    t_ar = 2.0 * pace
    assert charts.chart("why").ar_line.value() == pytest.approx(t_ar)
    tokens = sum(len(r.committed_ids) for r in records)
    ms = sum(sum(x.values()) for x in t)
    assert f"{tokens * t_ar / ms:.2f}x" in charts.actions.sentence.toolTip()
    assert charts.actions.sentence.text().startswith(f"{tokens * t_ar / ms:.2f}× plain decoding")

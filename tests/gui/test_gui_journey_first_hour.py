"""A new user's first hour (issues 45 and 46), in the window and on the command line, from an empty data folder (as a
new HOME has): the first session measures this device's verify cost before its first cycle and says so while it
does, never "No session yet"; the session's numbers read the same in the Run panel, the charts, ``sessions``,
``compare`` and the race, each checked against the recorded cycles; a fork of that default-budget session at cycle 3
re-runs exactly; Reset leaves no old cycle in the status bar. Waits are on states, never on sleeps."""

from __future__ import annotations

import json
import re

from test_gui_journey import says_the_truth

from specviz_app.cli import main
from specviz_core.analysis.race import make_race
from specviz_core.recording.store import Recording
from specviz_core.runtime.cost_files import load_cost_curve
from specviz_core.session.factory import MEASURING_CURVE
from specviz_core.viewer.comparison import load_comparison


def test_the_first_session_measures_once_and_its_numbers_agree_on_every_face(qtbot, window, tmp_path, monkeypatch,
                                                                              capfd):
    monkeypatch.setenv("SPECVIZ_DATA", str(tmp_path / "new-user-data"))  # no curve, no baseline: a first session
    w = window
    rp = w.run_panel
    rp.method.setCurrentIndex(rp.method.findData("goose"))
    rp.max_new_tokens.setValue(48)
    said: list[str] = []
    w.controller.session_status.connect(said.append)
    assert rp.status.text().startswith("No session")
    w.controller.run()
    qtbot.waitUntil(lambda: w.controller.live_done and w.controller.idle, timeout=120000)
    says_the_truth(w)
    # While it started, the Run panel said what it waited for: the model, then this device's verify cost, once.
    assert said[0] == "Starting a session: loading the model…"
    assert any(s.startswith(f"Starting a session: {MEASURING_CURVE}") for s in said), said
    assert not any(s.startswith("No session") for s in said[: said.index(next(s for s in said if "Session " in s))])
    info = w.model.source.info
    assert load_cost_curve(info.model, info.device, info.dtype) is not None  # kept for every later session
    db = rp.db_path()

    # The session's numbers, computed here from its recorded cycles.
    with Recording(db, read_only=True) as rec:
        cycles = list(rec.cycles(info.id))
        info = rec.session(info.id)
    tokens = sum(len(c.committed_ids) for c in cycles)
    forwards = sum(1 for c in cycles if not c.state.get("from_prefill"))
    per_forward = f"{tokens / forwards:.2f}"
    per_s = 1000.0 * tokens / sum(sum(c.timings_ms.values()) for c in cycles)
    assert not any("curve" in c.timings_ms for c in cycles)  # the measurement was in no cycle's time
    assert all("ceiling" in c.state["budget"] or c.state["budget"].get("flat") for c in cycles
               if c.state.get("budget"))  # every choice recorded with its cycle

    # The Run panel, the charts' header, `sessions`, `compare` and the race say the same.
    assert f"{tokens} tokens in {forwards} forwards, {per_forward} tokens/forward" in rp.status.text()
    w.docks["charts"].raise_()
    assert f"{per_forward} tokens/forward" in w.charts.chart("tau").header_text()
    assert capfd.readouterr().err == ""
    assert main(["sessions", "--db", str(db)]) == 0
    row = next(line for line in capfd.readouterr().out.splitlines() if line.startswith(info.id))
    assert re.search(rf"\b{tokens}\s+{forwards}\s+{re.escape(per_forward)}\s+{per_s:.1f}\b", row), row
    assert main(["record", "--method", "ar", "--model", info.model, "--prompt", info.prompt_text,
                 "--max-new-tokens", "48", "--db", str(db), "--quiet"]) == 0
    with Recording(db, read_only=True) as rec:
        ar = next(s for s in rec.sessions() if s.method == "ar")
    assert capfd.readouterr().err == ""
    assert main(["compare", "--db", str(db), ar.id, info.id, "--json"]) == 0
    mine = next(r for r in json.loads(capfd.readouterr().out)["sessions"] if r["session"] == info.id)
    assert f"{mine['tau']:.2f}" == per_forward and abs(mine["tokens_per_s"] - per_s) < 1e-6 * per_s
    comparison, _ = load_comparison(db, [ar.id, info.id])
    finish = make_race(comparison.sessions).at(1e12)[1]
    assert abs(finish.tokens_per_s - per_s) < 1e-6 * per_s

    # A fork of this default-budget session at cycle 3 re-runs its cycles exactly.
    assert capfd.readouterr().err == ""
    assert main(["record", "--fork", f"{info.id}:3", "--param", "budget=20", "--db", str(db), "--quiet"]) == 0
    assert f"fork of {info.id} at cycle 3 (reproduced cycles 0-2)" in capfd.readouterr().out

    # Reset: the session stays recorded, and the status bar shows no cycle of it any more.
    w.controller.reset()
    says_the_truth(w)
    assert w.info_label.text() == "" and rp.status.text().startswith("No session")
    assert capfd.readouterr().err == "", "nothing on standard error"

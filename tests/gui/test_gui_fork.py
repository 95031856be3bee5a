"""Fork in the window: the timeline's context menu opens the fork dialog pre-filled from the session; the fork
re-runs the parent's cycles with a progress bar, then continues; a failed check asks Continue anyway or Stop."""

from __future__ import annotations

import json
import sqlite3

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import QApplication

from specviz_core.cli.commands import main
from specviz_core.recording.store import Recording

PROMPT = "one two three one two three one two"
#: A menu and a dialog on the offscreen platform: it cannot raise windows or grab the keyboard, and says so.
pytestmark = pytest.mark.qt_log_ignore("does not support raise", "does not support grabbing the keyboard")


def record_parent(tiny_dir, db) -> str:
    assert main(["record", "--method", "tr", "--param", "budget=8", "--model", str(tiny_dir), "--prompt", PROMPT,
                 "--max-new-tokens", "30", "--temperature", "0.8", "--seed", "4", "--db", str(db), "--quiet"]) == 0
    with Recording(db) as rec:
        return rec.session().id


def fork_from_menu(window, qtbot, cycle: int):
    """Right-click the timeline over ``cycle`` and choose Fork from cycle…"""
    strip = window.timeline.strip
    n = window.model.n_cycles
    x = int((cycle + 0.5) * strip.width() / n)
    event = QContextMenuEvent(QContextMenuEvent.Reason.Mouse, QPoint(x, 5), strip.mapToGlobal(QPoint(x, 5)))
    QApplication.sendEvent(strip, event)
    menu = window.timeline.context_menu
    assert menu is not None and menu.actions()[0].text() == f"Fork from cycle {cycle}…"
    menu.actions()[0].trigger()
    menu.close()
    dialog = window.whatif.fork_dialog
    assert dialog is not None and dialog.isVisible()
    return dialog


def plain(c):
    return c.replace(timings_ms={})


def test_fork_from_the_timeline_menu_reproduces_the_parent(window, qtbot, tiny_dir):
    db = window.db_path
    pid = record_parent(tiny_dir, db)
    assert window.controller.open_session(str(db), pid)
    n = window.model.n_cycles
    assert n > 6
    cycle = n // 2
    dialog = fork_from_menu(window, qtbot, cycle)
    # Pre-filled from the session: its cycle, method, parameters and decoding settings.
    assert (dialog.cycle.value(), dialog.method.currentData()) == (cycle, "tr")
    assert dialog.param_widgets["budget"].currentText() == "8"
    assert (dialog.temperature.value(), dialog.seed.value(), dialog.max_new_tokens.value()) == (0.8, 4, 30)
    stages = []
    window.controller.progress.connect(lambda stage, f: stages.append((stage, f)))
    dialog.accept()
    qtbot.waitUntil(lambda: window.model.source is not None and window.model.source.live
                    and window.model.n_cycles == cycle and not window.controller.busy, timeout=60000)
    assert any(s.startswith(f"re-running cycle {cycle - 1} of {cycle}") for s, _ in stages)  # the progress bar
    assert stages[-1][0] == "ready"
    assert "re-ran exactly as recorded" in window.run_panel.status.text()
    assert not window.run_panel.method.isEnabled() and window.run_panel.method.currentData() == "tr"
    window.controller.run()
    qtbot.waitUntil(lambda: window.controller.live_done and not window.controller.busy, timeout=60000)
    fork_id = window.model.source.info.id
    with Recording(db) as rec:
        info = rec.session(fork_id)
        assert (info.parent_session, info.fork_cycle, info.status) == (pid, cycle, "complete")
        assert [plain(c) for c in rec.cycles(fork_id)] == [plain(c) for c in rec.cycles(pid)]  # seeded sampling too
    # The session browser shows the fork as its parent's child.
    window.sessions.refresh()
    ids = [s.id for s in window.sessions.sessions]
    row = ids.index(fork_id)
    assert ids[row - 1] == pid
    assert window.sessions.table.item(row, 0).text().strip().startswith("└ tr")
    assert window.sessions.table.item(row, 2).text() == f"fork of {pid}@{cycle}"


def test_a_failed_check_asks_and_stop_saves_the_fork_failed(window, qtbot, tiny_dir):
    db = window.db_path
    pid = record_parent(tiny_dir, db)
    conn = sqlite3.connect(db)
    with conn:  # cycle 1's bonus token changed, consistently: only a re-run can tell
        raw, bonus = conn.execute("SELECT committed_ids, bonus_token FROM cycles WHERE session_id = ? AND idx = 1",
                                  [pid]).fetchone()
        ids = json.loads(raw)
        ids[-1] = bonus + 1
        conn.execute("UPDATE cycles SET committed_ids = ?, bonus_token = ? WHERE session_id = ? AND idx = 1",
                     [json.dumps(ids), bonus + 1, pid])
    conn.close()
    assert window.controller.open_session(str(db), pid)
    window.model.set_cycle(4)
    window.run_panel.fork_button.click()  # the Run panel's button: from the current cycle
    dialog = window.whatif.fork_dialog
    assert dialog.cycle.value() == 4
    dialog.method.setCurrentIndex(dialog.method.findData("pld"))
    dialog.accept()
    qtbot.waitUntil(lambda: window.whatif.fork_box is not None and window.whatif.fork_box.isVisible(), timeout=60000)
    assert "cycle 1 did not reproduce" in window.whatif.fork_box.text()
    stop = next(b for b in window.whatif.fork_box.buttons() if b.text() == "Stop")
    stop.click()
    qtbot.waitUntil(lambda: window.controller.live_done and not window.controller.busy, timeout=30000)
    with Recording(db) as rec:
        fork = [s for s in rec.sessions() if s.parent_session == pid][0]
    assert fork.status == "failed" and "cycle 1 did not reproduce" in fork.stop_reason
    assert fork.method == "pld" and fork.n_cycles == 1


def test_compare_after_forking_a_replayed_file_lists_that_file(window, qtbot, tiny_dir, tmp_path):
    """Issue 30, item 2: replay a session of another file than the Run panel's, fork it (the fork goes to that file),
    then Compare: the dialog lists that file's sessions, parent and fork ticked, and Compare works. The red message
    of an earlier failure does not stay through a later replay."""
    runs = tmp_path / "runs.db"
    pid = record_parent(tiny_dir, runs)
    assert window.db_path != runs
    window.run_panel.show_message("an old failure")
    assert window.controller.open_session(str(runs), pid)
    assert not window.run_panel.message.isVisible(), "opening a replay clears an earlier failure's message"
    assert window.model.recording_path == runs and window.run_panel.db_path() == runs
    assert window.sessions.path == runs
    dialog = fork_from_menu(window, qtbot, 3)
    dialog.accept()
    qtbot.waitUntil(lambda: window.model.source is not None and window.model.source.live
                    and window.controller.state.phase in ("ready", "measuring baseline"), timeout=60000)
    fork_id = window.model.source.info.id
    with Recording(runs, read_only=True) as rec:
        assert rec.session(fork_id).parent_session == pid
    chooser = window.whatif.compare_dialog()
    assert chooser is not None
    items = [window.whatif.compare_list.item(i) for i in range(window.whatif.compare_list.count())]
    ids = {it.data(256): it.checkState().value for it in items}  # 256: Qt.UserRole
    assert set(ids) == {pid, fork_id}
    assert all(v == 2 for v in ids.values()), "the fork and its parent are ticked"
    chooser.accept()
    assert window.whatif.compare_windows, window.run_panel.message.text()
    assert not window.run_panel.message.isVisible()
    for w in window.whatif.compare_windows:
        w.close()

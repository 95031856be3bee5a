"""A user's journey through the race and the audit (issue 30), driving the real window with its keys on recordings
of the tiny model: open a recording (Ctrl+O) and replay a session from the Sessions panel; Ctrl+Shift+R, tick the
sessions, Race; the race window plays to the finish, Space pauses, R restarts, + and - change the pace, Ctrl+E
writes a GIF, Esc closes; Ctrl+Shift+A audits the replayed session and shows its verdict. At each step the status
line, the enabled actions and what the windows say are checked, and nothing is printed on standard error. Waits are
on states, never on sleeps."""

from __future__ import annotations

from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFileDialog
from test_gui_journey import says_the_truth

from specviz_app.windows.race.window import GIF_SIZE
from specviz_core.cli.commands import main
from specviz_core.recording.store import Recording

PROMPT = "one two three one two three one two"
CTRL_SHIFT = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier


def record(tiny_dir, db, *extra) -> str:
    """A session of the tiny model recorded into ``db`` by ``specviz record``; its id."""
    assert main(["record", "--model", str(tiny_dir), "--max-new-tokens", "24", "--db", str(db), "--quiet",
                 "--prompt", PROMPT, *extra]) == 0
    with Recording(db) as rec:
        return rec.session().id


def nothing_on_stderr(capfd, step: str) -> None:
    assert capfd.readouterr().err == "", f"nothing on standard error ({step})"


def open_recording(qtbot, w, db, monkeypatch) -> None:
    """Ctrl+O, the file chosen in the dialog: the Sessions panel lists the recording's sessions."""
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(db), "")))
    qtbot.keyClick(w, Qt.Key.Key_O, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: w.sessions.path == db and w.sessions.table.rowCount() > 0, timeout=10000)


def replay(qtbot, w, sid: str) -> None:
    """Click the session's row in the Sessions panel and press Enter: the window replays it."""
    row = next(i for i, s in enumerate(w.sessions.sessions) if s.id == sid)
    table = w.sessions.table
    rect = table.visualRect(table.model().index(row, 0))
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.keyClick(table, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: w.controller.state.phase == "replaying" and w.model.source.info.id == sid, timeout=10000)


def test_race_journey_from_the_open_recording_to_a_gif(qtbot, window, tiny_dir, tmp_path, monkeypatch, capfd):
    w = window
    db = tmp_path / "runs.db"
    ar, tr = record(tiny_dir, db, "--method", "ar"), record(tiny_dir, db, "--method", "tr", "--param", "budget=8")
    capfd.readouterr()  # what recording printed is not the window's
    says_the_truth(w)

    open_recording(qtbot, w, db, monkeypatch)
    assert {s.id for s in w.sessions.sessions} == {ar, tr}
    replay(qtbot, w, tr)
    says_the_truth(w)
    assert w.state_label.text().startswith(f"Replaying session {tr} (tr)")
    assert w.race.action.isEnabled() and w.audit.action.isEnabled()
    nothing_on_stderr(capfd, "replaying")

    # Ctrl+Shift+R: the race dialog on the open recording, the session shown and AR on its prompt ticked.
    qtbot.keyClick(w, Qt.Key.Key_R, CTRL_SHIFT)
    qtbot.waitUntil(lambda: w.race.chooser is not None and w.race.chooser.isVisible(), timeout=10000)
    dialog = w.race.chooser
    assert dialog.db == db and {s.id for s in dialog.sessions} == {ar, tr}
    assert dialog.tabs.currentIndex() == 0 and dialog.ok.text() == "Race" and dialog.ok.isEnabled()
    assert [s.id for s in dialog.ticked()] == [ar, tr]
    # One session is not a race: the dialog says so and stays; both ticked, Race.
    dialog.set_ticked([tr])
    qtbot.mouseClick(dialog.ok, Qt.MouseButton.LeftButton)
    assert dialog.isVisible() and dialog.message.text().startswith("Tick two to four sessions")
    dialog.set_ticked([tr, ar])
    before = len(w.race.windows)
    qtbot.mouseClick(dialog.ok, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(w.race.windows) > before and w.race.windows[-1].isVisible(), timeout=10000)
    rw = w.race.windows[-1]
    assert not dialog.isVisible()
    assert rw.windowTitle() == "SpecViz race — ar vs tr"  # AR first: the baseline
    assert w.statusBar().currentMessage().startswith("Race: Space plays or pauses, R restarts")
    says_the_truth(w)  # the main window still replays, its actions as they were
    nothing_on_stderr(capfd, "race opened")

    # It plays to the finish at the recorded pace; then every lane has written its session's answer.
    race = rw.view.race
    qtbot.waitUntil(lambda: not rw.playing and rw.ms >= race.duration_ms, timeout=60000)
    assert rw.play_action.text() == "Replay"
    with Recording(db) as rec:
        answers = [tuple(rec.session(sid).output_ids) for sid in (ar, tr)]
    states = rw.view.states()
    assert all(s.finished for s in states) and [s.tokens for s in states] == answers

    # + four times: 16× slower (the combo says so); Space replays from the start, Space again pauses.
    for _ in range(4):
        qtbot.keyClick(rw.view, Qt.Key.Key_Plus)
    assert rw.slowdown == 16.0 and rw.slow.currentText() == "16× slower"
    qtbot.keyClick(rw.view, Qt.Key.Key_Space)
    assert rw.playing and rw.play_action.text() == "Pause" and rw.ms < race.duration_ms
    qtbot.keyClick(rw.view, Qt.Key.Key_Space)
    assert not rw.playing and rw.play_action.text() == "Play"
    held = rw.ms
    assert held < race.duration_ms
    QApplication.processEvents()  # events pending when it paused move nothing
    assert rw.ms == held and not rw.playing
    # R: back to the start, playing.
    qtbot.keyClick(rw.view, Qt.Key.Key_R)
    assert rw.playing and rw.play_action.text() == "Pause" and rw.ms <= held
    # - four times: real time again, and it runs to the finish.
    for _ in range(4):
        qtbot.keyClick(rw.view, Qt.Key.Key_Minus)
    assert rw.slowdown == 1.0 and rw.slow.currentText() == "real time"
    qtbot.waitUntil(lambda: not rw.playing and rw.ms >= race.duration_ms, timeout=60000)
    nothing_on_stderr(capfd, "playing")

    # Ctrl+E: the file named in the dialog is written in the background, with progress; the message counts the
    # frames the file holds.
    out = tmp_path / "race.gif"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(out), "")))
    qtbot.keyClick(rw.view, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    assert rw.export is not None and not rw.export_action.isEnabled() and rw.progress.isVisible()
    assert rw.message.text().strip() == "Exporting race.gif…"
    qtbot.waitUntil(lambda: rw.export is None, timeout=120000)
    assert rw.export_action.isEnabled() and rw.progress.isHidden()
    with Image.open(out) as im:
        assert im.size == GIF_SIZE
        frames = im.n_frames
    assert rw.message.text().strip() == f"Saved {out} ({frames} frames)"
    nothing_on_stderr(capfd, "GIF export")

    # Esc closes the race window; the main window is as it was.
    qtbot.keyClick(rw.view, Qt.Key.Key_Escape)
    assert not rw.isVisible() and not rw.playing
    says_the_truth(w)
    assert w.model.source.info.id == tr and w.state_label.text().startswith(f"Replaying session {tr}")
    nothing_on_stderr(capfd, "race closed")


def test_audit_journey_on_a_replayed_session(qtbot, window, tiny_dir, tmp_path, monkeypatch, capfd):
    w = window
    db = tmp_path / "runs.db"
    sid = record(tiny_dir, db, "--method", "tr", "--param", "budget=8")
    capfd.readouterr()
    open_recording(qtbot, w, db, monkeypatch)
    replay(qtbot, w, sid)
    says_the_truth(w)
    assert w.audit.action.isEnabled()
    n = len(w.model.source.info.output_ids)

    # Ctrl+Shift+A: the prompt is decoded plainly on the session's own model (here the tiny one), on the engine
    # thread; the status bar says so, then the verdict opens in a message.
    qtbot.keyClick(w, Qt.Key.Key_A, CTRL_SHIFT)
    assert w.statusBar().currentMessage() == f"Auditing session {sid}: decoding its prompt plainly…" \
        or w.audit.result is not None
    qtbot.waitUntil(lambda: w.audit.result is not None and w.audit.box is not None and w.audit.box.isVisible(),
                    timeout=120000)
    result, box = w.audit.result, w.audit.box
    assert result.verdict == "identical", result.message
    assert box.windowTitle() == "Audit: identical" and box.text().startswith(f"Identical: all {n} tokens")
    assert w.statusBar().currentMessage() == "Audit: identical"
    # The verdict is reported before the job's end: the engine goes idle right after, still replaying the session.
    qtbot.waitUntil(lambda: w.controller.state.phase == "replaying", timeout=30000)
    assert w.model.source.info.id == sid
    says_the_truth(w)  # every action as before
    box.close()
    qtbot.waitUntil(lambda: w.controller.idle, timeout=30000)
    says_the_truth(w)
    nothing_on_stderr(capfd, "audit")

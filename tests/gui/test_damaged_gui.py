"""Issue 15.4 in the window: replaying a session with a damaged cycle shows that cycle as damaged in every panel and
on the timeline, stepping goes on past it, and the current index and the drawn cycle never part. ``gui`` and
``screenshot`` on a file that cannot be read give one line."""

from __future__ import annotations

import gc

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from test_damaged import BAD, CYCLE_DAMAGE, damaged_copy, good  # noqa: F401 - good: the recording, built once

from specviz_app.cli import main

SOOT = CYCLE_DAMAGE["unknown source"]


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    from specviz_app.shell.window import MainWindow

    w = MainWindow(tmp_path / "sessions.db")
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()
    gc.collect()


def test_the_window_steps_over_a_damaged_cycle(qtbot, window, good, tmp_path):  # noqa: F811
    w = window
    path = damaged_copy(good, tmp_path, SOOT[0])
    assert w.controller.open_session(str(path), "trsession")
    n = w.model.n_cycles
    assert w.model.index == 0 and w.model.record.index == 0
    message = f"Cycle {BAD} is damaged: node 0: source 'soot' is not one of root, spine,"
    for i in range(1, n):
        qtbot.keyClick(w, Qt.Key.Key_Right)
        assert w.model.index == i, "stepping goes on past the damaged cycle"
        assert w.timeline.label.text().startswith(f"cycle {i} · {n} cycles")
        if i == BAD:
            assert w.model.record is None and w.model.damage_text.startswith(message)
            assert w.tree.message().startswith(message) and w.mask.note_text().startswith(message)
            assert message in w.stop_cause.explanation()
            assert w.timeline.label.text().endswith("(damaged)")
            assert w.info_label.text().endswith(f"cycle {BAD} is damaged")
            assert w.info_label.toolTip().startswith(message)
            w.grab()  # every panel paints the damaged cycle without an exception
        else:
            rec = w.model.record
            assert rec is not None and rec.index == i and w.tree.message() == ""
            assert w.mask.note_text().startswith(f"Cycle {i} (")
            assert w.info_label.text().startswith(f"tr · cycle {i} ·")
    assert w.timeline.strip.damaged_indices() == [BAD]
    qtbot.keyClick(w, Qt.Key.Key_Home)
    assert w.model.index == 0 and w.model.record.index == 0 and not w.model.damage_text


def test_a_damaged_summary_marks_the_timeline_when_the_session_opens(qtbot, window, good, tmp_path):  # noqa: F811
    """A row whose summary and record are both damaged is known to be damaged before it is visited."""
    w = window
    path = damaged_copy(good, tmp_path, "UPDATE cycles SET summary = '[1', nodes = '{{' WHERE idx = {bad} "
                                        "AND session_id = '{sid}'")
    assert w.controller.open_session(str(path), "trsession")
    assert w.timeline.strip.damaged_indices() == [BAD]
    w.timeline.scrub_to(BAD)
    qtbot.waitUntil(lambda: w.model.index == BAD)
    assert w.model.record is None and "nodes: not valid JSON" in w.tree.message()
    w.charts.flush()
    w.grab()


def test_screenshot_of_a_damaged_cycle_shows_it_damaged(good, tmp_path, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    path = damaged_copy(good, tmp_path, SOOT[0])
    out = tmp_path / "tree.png"
    code = main(["screenshot", "--db", str(path), "--session", "trsession", "--cycle", str(BAD), "--panel", "tree",
                 "--size", "1200x800", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0 and not QImage(str(out)).isNull()
    assert f"specviz: cycle {BAD} is damaged: node 0: source 'soot'" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["gui"], ["screenshot", "--out", "x.png"]])
def test_gui_and_screenshot_on_a_file_that_cannot_be_read(good, tmp_path, monkeypatch, capsys, command):  # noqa: F811
    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "cut.db"
    path.write_bytes(good[0].read_bytes()[:20000])
    code = main([command[0], "--db", str(path), *command[1:]])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip() == f"specviz: error: {path} is damaged: SQLite cannot read it (database disk image is malformed)"


def test_the_sessions_panel_lists_a_damaged_session_apart(qtbot, window, good, tmp_path):  # noqa: F811
    from test_damaged import SESSION_DAMAGE

    path = damaged_copy(good, tmp_path, SESSION_DAMAGE["bad params JSON"][0])
    before = path.read_bytes()
    window.sessions.set_file(path)
    assert [s.id for s in window.sessions.sessions] == ["arsession"]
    assert "Session trsession is damaged: params: not valid JSON" in window.sessions.message.text()
    assert not window.controller.open_session(str(path), "trsession")
    assert "session trsession is damaged: params: not valid JSON" in window.run_panel.message.text()
    assert path.read_bytes() == before

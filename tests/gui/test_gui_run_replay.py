"""The Run panel tells the truth: replaying a TALON session it shows talon, its parameters, model and prompt,
read-only, with the action that starts a new session from them."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import Qt

from gui_records import keep_none_alive, session_info
from gui_trees import talon_cycle
from specviz_core.recording.store import Recording

keep_none_alive()

TALON = {"budget": 48, "top_k": 8, "mu": 0.05, "drafter": "table", "gated_shown": 17}
SHOWN = {**TALON, "head": ""}
"""What the panel shows of it: the recording predates the head parameter, which shows its default."""


@pytest.fixture
def talon_db(tmp_path):
    db = tmp_path / "talon.db"
    info = dataclasses.replace(session_info("talon", [5, 6, 7, 8], **TALON), id="talon1", model="/models/some-llama",
                               temperature=0.7, seed=11, max_new_tokens=77, chat_template=False, dtype="bfloat16")
    with Recording(db, create=True) as rec:
        writer = rec.new_session(info)
        for i in range(3):
            writer.append(talon_cycle(index=i, cache_len=3 + i, seed=i))
        writer.finish("complete", "eos")
    return db, info


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_CONFIG", str(tmp_path / "gui.ini"))
    from specviz_app.shell.window import MainWindow

    w = MainWindow(tmp_path / "sessions.db", restore_layout=False)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()


def test_replaying_a_talon_session_shows_talon_and_its_parameters_read_only(window, talon_db, qtbot) -> None:
    db, info = talon_db
    rp = window.run_panel
    assert rp.method.currentData() == "goose"  # the default before
    assert window.controller.open_session(str(db), "talon1")
    assert rp.method.currentData() == "talon" and rp.method.currentText() == "talon"
    assert rp.param_values() == SHOWN
    assert rp.model.currentText() == "/models/some-llama"
    assert rp.prompt.toPlainText() == info.prompt_text
    assert (rp.temperature.value(), rp.seed.value(), rp.max_new_tokens.value()) == (0.7, 11, 77)
    assert not rp.chat_template.isChecked() and rp.dtype.currentText() == "bfloat16"
    editors = [rp.method, rp.model, rp.prompt, rp.temperature, *rp.param_widgets.values()]
    assert not any(w.isEnabled() for w in editors), "read-only in replay"
    assert rp.from_replay.isVisible()
    # The action: the same settings, now editable, for a new live session.
    qtbot.mouseClick(rp.from_replay, Qt.MouseButton.LeftButton)
    assert all(w.isEnabled() for w in editors) and not rp.from_replay.isVisible()
    assert rp.method.currentData() == "talon" and rp.param_values() == SHOWN
    req = rp.request()  # what Step sends
    assert (req.method, req.model, req.temperature, req.seed) == ("talon", "/models/some-llama", 0.7, 11)
    assert req.choice.recorded_params == SHOWN


def test_reset_after_a_replay_unlocks_the_settings(window, talon_db) -> None:
    db, _ = talon_db
    rp = window.run_panel
    window.controller.open_session(str(db), "talon1")
    assert not rp.method.isEnabled()
    window.controller.reset()
    assert rp.method.isEnabled() and not rp.from_replay.isVisible()

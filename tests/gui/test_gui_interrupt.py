"""Pause, Reset and close while the model is still loading and a Run is queued behind it (offscreen).

The load is held by the test (as a long ``from_pretrained`` would hold it: no stage boundary to stop at), so each
test knows the window's requests arrive while it loads. Before the fix, the queued Run cleared the pause flag and
decoded the whole session, and closing waited for all of it.
"""

from __future__ import annotations

import threading
import time

import pytest

import specviz_core.session.factory as factory
from specviz_core.recording.store import Recording
from specviz_core.viewer.sources import LiveSource


@pytest.fixture
def held_load(monkeypatch):
    """Model loading that waits for ``release`` (set ``loading`` when it starts)."""
    loading, release = threading.Event(), threading.Event()
    real = factory.load_models

    def slow(checked, progress=None):
        loading.set()
        release.wait(60)
        return real(checked, progress)

    monkeypatch.setattr(factory, "load_models", slow)
    yield loading, release
    release.set()


def sessions_in(db) -> list:
    if not db.exists():
        return []
    with Recording(db) as rec:
        return rec.sessions()


def test_pause_while_loading_cancels_the_queued_run(qtbot, window, held_load):
    loading, release = held_load
    w = window
    w.run_panel.max_new_tokens.setValue(4000)
    w.controller.run()  # the load, then a long Run queued behind it
    assert loading.wait(30)
    w.controller.pause()
    release.set()
    qtbot.waitUntil(lambda: isinstance(w.model.source, LiveSource), timeout=60000)
    qtbot.waitUntil(lambda: w.controller.idle, timeout=60000)
    assert w.controller.worker.cycles_done == 0, "Pause pressed during the load stops the Run queued behind it"
    assert w.run_panel.step_button.isEnabled()
    # A request sent after the pause runs.
    w.controller.step()
    qtbot.waitUntil(lambda: w.model.n_cycles == 1, timeout=60000)


def test_pause_and_close_while_loading_ends_within_seconds(qtbot, window, held_load):
    loading, release = held_load
    w = window
    db = w.run_panel.db_path()
    w.run_panel.max_new_tokens.setValue(4000)
    w.controller.run()
    assert loading.wait(30)
    w.controller.pause()
    worker = w.controller.worker
    threading.Timer(1.0, release.set).start()  # the load finishes a second into the close
    t0 = time.perf_counter()
    w.close()
    waited = time.perf_counter() - t0
    assert release.is_set(), "closing waited for the load stage in flight"
    assert waited < 20, f"closing took {waited:.1f} s: it waited for more than the load"
    assert worker.cycles_done == 0, "nothing queued behind the load was decoded after the close"
    # The load ended after the close: no session was started, so none is left `running`.
    assert [s.status for s in sessions_in(db) if s.status == "running"] == []


def test_close_after_a_paused_load_marks_the_session_interrupted(qtbot, window, held_load):
    loading, release = held_load
    w = window
    db = w.run_panel.db_path()
    w.run_panel.max_new_tokens.setValue(4000)
    w.controller.run()
    assert loading.wait(30)
    w.controller.pause()
    release.set()
    qtbot.waitUntil(lambda: isinstance(w.model.source, LiveSource), timeout=60000)
    sid = w.model.source.info.id
    t0 = time.perf_counter()
    w.close()
    assert time.perf_counter() - t0 < 20
    with Recording(db) as rec:
        info = rec.session(sid)
    assert (info.status, info.stop_reason, info.n_cycles) == ("interrupted", "window closed", 0)


def test_reset_while_loading_starts_no_session(qtbot, window, held_load):
    loading, release = held_load
    w = window
    db = w.run_panel.db_path()
    w.controller.run()
    assert loading.wait(30)
    w.controller.reset()
    assert w.run_panel.prompt.isEnabled(), "Reset unlocks the settings at once"
    release.set()
    qtbot.waitUntil(lambda: w.controller.idle, timeout=60000)
    qtbot.wait(50)
    assert w.model.source is None, "the session whose load was reset does not open"
    assert w.controller.worker.cycles_done == 0
    assert [s.status for s in sessions_in(db)] in ([], ["interrupted"])
    # And the window starts a new session normally afterwards.
    w.controller.step()
    qtbot.waitUntil(lambda: w.model.n_cycles == 1, timeout=60000)

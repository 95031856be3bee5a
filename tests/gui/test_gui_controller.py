"""The session controller without a window: replay, autoplay and refused starts (no engine thread needed)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gui_records import goose_session, keep_none_alive
from specviz_app.session.controller import NO_SESSION, SessionController
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.viewer.filters import CycleFilter
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import RecordingSource

keep_none_alive()


class Settings:
    """A Run panel stand-in whose request is refused (a start that must not reach the engine)."""

    def __init__(self, db: Path) -> None:
        self.db = db

    def request(self):
        raise SpecVizError("the prompt is empty")

    def db_path(self) -> Path:
        return self.db

    def breakpoint(self) -> CycleFilter:
        return CycleFilter("spine_broke")


@pytest.fixture
def recording(tmp_path) -> tuple[Path, str]:
    live = goose_session(n_nodes=12, spine_len=5, spine_accepted=2, branch_continues=0)
    info = dataclasses.replace(live.info, id="replayme")
    path = tmp_path / "r.db"
    with Recording(path, create=True) as rec:
        writer = rec.new_session(info)
        for i in range(len(live)):
            writer.append(live.cycle(i))
        writer.finish("complete", "test")
    return path, info.id


class Reports:
    def __init__(self, c: SessionController) -> None:
        self.log: list[tuple] = []
        for name in ("session_status", "error", "autoplay_changed", "settings_locked",
                     "busy_changed"):
            getattr(c, name).connect(lambda *a, n=name: self.log.append((n, *a)))

    def last(self, name: str) -> tuple | None:
        return next((e[1:] for e in reversed(self.log) if e[0] == name), None)


@pytest.fixture
def controller(qtbot, tmp_path):
    c = SessionController(SessionModel(), Settings(tmp_path / "live.db"))
    yield c
    c.shutdown()


def test_replay_opens_the_session_in_the_model(controller, recording):
    path, sid = recording
    reports = Reports(controller)
    assert controller.open_session(str(path), sid)
    model = controller.model
    assert isinstance(model.source, RecordingSource) and model.n_cycles == 5 and model.index == 0
    assert reports.last("session_status")[0].startswith(f"Replaying session {sid}: goose on cpu, 5 cycles, from r.db")
    assert model.ar_baseline == (None, "", None)  # no AR session in the file: the session model's fact
    controller.reset()
    assert model.source is None and reports.last("session_status") == (NO_SESSION,)
    assert reports.last("busy_changed") == (False, False) and reports.last("settings_locked") == (False,)


def test_autoplay_steps_a_replay_to_its_end_and_stops(qtbot, controller, recording):
    controller.open_session(str(recording[0]), recording[1])
    reports = Reports(controller)
    controller.set_autoplay_speed("10 cycles/s")
    controller.toggle_autoplay()
    assert reports.last("autoplay_changed") == (True,)
    qtbot.waitUntil(lambda: reports.last("autoplay_changed") == (False,), timeout=5000)
    assert controller.model.index == controller.model.n_cycles - 1


def test_a_refused_start_reports_and_starts_no_engine(controller):
    reports = Reports(controller)
    controller.step()
    controller.run_to_breakpoint()
    assert reports.last("error") == ("the prompt is empty",) and reports.last("settings_locked") == (False,)
    assert controller.worker is None and controller.idle and controller.live_done


def test_a_missing_recording_is_a_message(controller, tmp_path):
    reports = Reports(controller)
    assert not controller.open_session(str(tmp_path / "nope.db"))
    assert reports.last("error") and controller.model.source is None

"""Run → Race… (issue 20): recorded sessions chosen in the window race at their recorded pace (checked with a fake
clock against the cycles' own timings), AR and the Run panel's method recorded one after the other race too (and
decode what plain greedy decoding decodes), mismatched prompts are refused, and the window's GIF has the frames the
recorded timings call for."""

from __future__ import annotations

import pytest
import torch
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from specviz_app.session.jobs.race import ar_request
from specviz_app.session.jobs.reports import RaceProgress
from specviz_app.windows.race.view import LANE_COLORS
from specviz_app.windows.race.window import GIF_FPS, GIF_SIZE
from specviz_core.cli.commands import main
from specviz_core.recording.store import Recording
from specviz_core.session.spec import SessionRequest

PROMPT = "one two three one two three one two"
pytestmark = pytest.mark.qt_log_ignore("does not support raise", "does not support grabbing the keyboard",
                                       "does not support full screen")


class FakeClock:
    """Seconds, moved by the test."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def record(tiny_dir, db, *extra) -> str:
    assert main(["record", "--model", str(tiny_dir), "--max-new-tokens", "24", "--db", str(db), "--quiet",
                 *extra]) == 0
    with Recording(db) as rec:
        return rec.session().id


def landings(db, sid: str) -> list[tuple[float, tuple[int, ...]]]:
    """(ms from the prefill's start when the cycle ended, the tokens it committed), from the cycle records."""
    with Recording(db) as rec:
        t = rec.session(sid).prefill_ms
        out = []
        for c in rec.cycles(sid):
            t += sum(c.timings_ms.values())
            out.append((t, tuple(c.committed_ids)))
    return out


def shown_at(land: list[tuple[float, tuple[int, ...]]], ms: float) -> tuple[int, ...]:
    return tuple(tok for end, ids in land if end <= ms for tok in ids)


def set_method(window, method: str) -> None:
    window.run_panel.method.setCurrentIndex(window.run_panel.method.findData(method))


def race_window_after(window, qtbot, act, timeout: int = 5000):
    before = len(window.race.windows)
    act()
    qtbot.waitUntil(lambda: len(window.race.windows) > before and window.race.windows[-1].isVisible(), timeout=timeout)
    return window.race.windows[-1]


@pytest.fixture
def two(window, tiny_dir):
    db = window.db_path
    ar = record(tiny_dir, db, "--method", "ar", "--prompt", PROMPT)
    tr = record(tiny_dir, db, "--method", "tr", "--param", "budget=8", "--prompt", PROMPT)
    return db, ar, tr


def test_race_of_recorded_sessions_follows_their_timings(window, qtbot, two, tmp_path):
    db, ar, tr = two
    assert window.controller.open_session(str(db), tr)
    dialog = window.race.dialog()
    assert [s.id for s in dialog.ticked()] == [ar, tr]  # the session shown and AR on its prompt; AR first
    rw = race_window_after(window, qtbot, dialog.ok.click)
    assert not dialog.isVisible()
    assert [lane.label.split()[0] for lane in rw.view.race.lanes] == ["ar", "tr"]
    lands = [landings(db, ar), landings(db, tr)]
    clock = FakeClock()
    rw.clock = clock
    rw.restart()
    assert rw.playing and rw.ms == 0 and all(not s.tokens for s in rw.view.states())
    # Between every two landings of either lane, each lane shows exactly the tokens of its cycles ended by then.
    events = sorted({0.0} | {end for land in lands for end, _ in land})
    t0 = clock.t
    for a, b in zip(events, events[1:]):
        mid = (a + b) / 2
        clock.t = t0 + mid / 1000
        rw.tick()
        assert [s.tokens for s in rw.view.states()] == [shown_at(land, mid) for land in lands], mid
    # Both lanes are drawn: each lane's colour is in the picture.
    img = rw.view.grab().toImage()
    colors = {img.pixelColor(x, y).name() for x in range(0, img.width(), 2) for y in range(0, img.height(), 2)}
    assert {QColor(c).name() for c in LANE_COLORS[:2]} <= colors
    # Pause holds the time shown however long the clock runs; Play goes on from there, slow motion slows it.
    rw.pause()
    held = rw.ms
    clock.t += 100
    qtbot.wait(60)
    assert rw.ms == held and not rw.playing
    rw.set_slowdown(4.0)
    rw.start()
    clock.t += 0.002
    rw.tick()
    assert rw.ms == pytest.approx(min(rw.view.race.duration_ms, held + 0.5))
    # At the end it stops on the finish; Restart starts from nothing.
    clock.t += 1000
    rw.tick()
    end = max(land[-1][0] for land in lands)
    assert rw.ms == pytest.approx(end) and not rw.playing and rw.play_action.text() == "Replay"
    assert all(s.finished for s in rw.view.states())
    assert [s.tokens for s in rw.view.states()] == [shown_at(land, end) for land in lands]
    rw.restart()
    assert rw.ms == 0 and rw.playing and all(not s.tokens for s in rw.view.states())

    # Export GIF: in the background, at the slow-motion factor; as many frames as the recorded timings call for.
    rw.pause()
    out = tmp_path / "race.gif"
    job = rw.export_gif(out)
    assert job is not None and rw.progress.isVisible()
    qtbot.waitUntil(lambda: rw.export is None, timeout=120000)
    assert rw.message.text().strip().startswith(f"Saved {out}")
    step = 1000 / GIF_FPS / 4.0
    n_frames = int(end // step) + 1 + (1 if int(end // step) * step < end else 0) + 2 * GIF_FPS  # 2 s hold
    with Image.open(out) as im:
        assert im.size == GIF_SIZE
        total = 0
        for k in range(im.n_frames):  # identical neighbours are one frame, their durations added up
            im.seek(k)
            total += im.info["duration"]
        written = im.n_frames
    assert total == n_frames * 1000 // GIF_FPS
    assert written < n_frames and f"({written} frames)" in rw.message.text(), "the message counts the file's frames"

    # The keys: Space plays and pauses, R restarts, F11's presentation grows the text, Esc leaves it, then closes.
    rw.activateWindow()
    qtbot.keyClick(rw.view, Qt.Key.Key_Space)
    assert rw.playing
    qtbot.keyClick(rw.view, Qt.Key.Key_Space)
    assert not rw.playing
    clock.t += 1
    rw.tick()
    qtbot.keyClick(rw.view, Qt.Key.Key_R)
    assert rw.ms == 0 and rw.playing
    normal_pt = rw.view.base_pt
    rw.set_presentation(True, full_screen=False)
    assert rw.view.base_pt > normal_pt and rw.bar.font().pointSizeF() > rw.font().pointSizeF()
    qtbot.keyClick(rw.view, Qt.Key.Key_Escape)
    assert not rw.presentation and rw.isVisible() and rw.view.base_pt == normal_pt
    qtbot.keyClick(rw.view, Qt.Key.Key_Escape)
    assert not rw.isVisible()


def test_mismatched_prompts_are_refused(window, qtbot, tiny_dir):
    db = window.db_path
    a = record(tiny_dir, db, "--method", "ar", "--prompt", PROMPT)
    b = record(tiny_dir, db, "--method", "tr", "--prompt", "something else entirely")
    window.sessions.set_file(db)
    dialog = window.race.dialog()
    dialog.set_ticked([a])
    dialog.ok.click()
    assert dialog.isVisible() and "two to four" in dialog.message.text()
    dialog.set_ticked([a, b])
    dialog.ok.click()
    assert dialog.isVisible() and dialog.message.isVisible()
    assert "2 different prompts" in dialog.message.text() and a in dialog.message.text()
    assert window.race.windows == []
    dialog.reject()


def test_ar_request_takes_the_methods_sampling():
    checked = SessionRequest(method="tr", prompt="p", params={"budget": 8}, max_new_tokens=9, temperature=0.7,
                             seed=5, chat_template=False, device="cpu", dtype="float32").check()
    ar = ar_request(checked)
    assert (ar.method, ar.choice.recorded_params, ar.draft_model) == ("ar", {}, None)
    assert (ar.prompt, ar.max_new_tokens, ar.temperature, ar.seed, ar.chat_template, ar.device, ar.dtype) == (
        "p", 9, 0.7, 5, False, "cpu", "float32")


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_record_ar_and_this_method_then_race(window, qtbot, tiny_dir, temperature):
    from transformers import LlamaForCausalLM

    set_method(window, "tr")
    window.run_panel.prompt.setPlainText(PROMPT)
    window.run_panel.max_new_tokens.setValue(16)
    window.run_panel.temperature.setValue(temperature)
    window.run_panel.seed.setValue(3)
    dialog = window.race.dialog()
    dialog.tabs.setCurrentIndex(1)
    assert dialog.ok.text() == "Record and race" and dialog.ok.isEnabled()
    stages = []
    window.controller.engine.on(RaceProgress, lambda rep: stages.append((rep.stage, rep.fraction)))
    rw = race_window_after(window, qtbot, dialog.ok.click, timeout=120000)
    qtbot.waitUntil(lambda: window.controller.idle and not window.controller.busy, timeout=30000)
    ids = [lane.label.split()[-1] for lane in rw.view.race.lanes]
    with Recording(window.db_path) as rec:
        infos = [rec.session(next(s.id for s in rec.sessions() if s.id.startswith(i))) for i in ids]
    ar, tr = infos
    assert (ar.method, tr.method) == ("ar", "tr") and ar.status == tr.status == "complete"
    # The same prompt and sampling for both: the method session's, as the Run panel set it.
    for s in infos:
        assert (s.prompt_ids, s.temperature, s.seed, s.max_new_tokens) == (tr.prompt_ids, temperature, 3, 16)
    # One after the other: every AR stage was reported before the first method stage.
    names = [s for s, _ in stages if s.startswith("recording")]
    assert names and names[0].startswith("recording plain") and names[-1].startswith("recording tr")
    assert not any(s.startswith("recording plain") for s in names[names.index(next(n for n in names
                                                                                   if n.startswith("recording tr"))):])
    if temperature == 0:
        model = LlamaForCausalLM.from_pretrained(tiny_dir).eval()
        x = torch.tensor([list(tr.prompt_ids)])
        with torch.no_grad():
            ref = model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=16,
                                 eos_token_id=2, pad_token_id=2)[0, x.shape[1]:].tolist()
        assert list(ar.output_ids) == ref and list(tr.output_ids) == ref
    rw.close()


def test_cancel_stops_the_recording_and_races_nothing(window, qtbot):
    set_method(window, "tr")
    window.run_panel.prompt.setPlainText(PROMPT)
    window.run_panel.max_new_tokens.setValue(3000)
    dialog = window.race.dialog()
    dialog.tabs.setCurrentIndex(1)

    def on_progress(stage: str, _f: float) -> None:
        if stage.startswith("recording plain") and dialog.cancel_button.isEnabled():
            dialog.cancel_button.click()

    window.controller.engine.on(RaceProgress, lambda rep: on_progress(rep.stage, rep.fraction))
    dialog.ok.click()
    assert dialog.progress.isVisible() and not dialog.ok.isEnabled()
    qtbot.waitUntil(lambda: not dialog.recording, timeout=120000)
    assert dialog.isVisible() and dialog.message.text().startswith("Cancelled")
    assert window.race.windows == []
    with Recording(window.db_path) as rec:
        assert [(s.method, s.status) for s in rec.sessions()] == [("ar", "interrupted")]
    qtbot.waitUntil(lambda: window.controller.idle, timeout=30000)
    dialog.reject()


def test_record_tab_explains_what_it_cannot_record(window):
    set_method(window, "ar")
    dialog = window.race.dialog()
    dialog.tabs.setCurrentIndex(1)
    assert not dialog.ok.isEnabled() and "method is AR" in dialog.record_problem
    dialog.reject()
    set_method(window, "tr")
    window.run_panel.prompt.setPlainText("   ")
    dialog = window.race.dialog()
    dialog.tabs.setCurrentIndex(1)
    assert not dialog.ok.isEnabled() and "prompt is empty" in dialog.record_problem
    dialog.reject()

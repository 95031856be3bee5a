"""The window tells the truth about the session's lifecycle: its status line and every lifecycle action follow the
controller's one state, on the paths a user takes (offscreen, the tiny model).

Each check reads what a user reads: the status bar's line, whether a toolbar action and the Run panel's buttons are
enabled. Waits are on states, never on sleeps.
"""

from __future__ import annotations

import pytest

from specviz_app.session.jobs.reports import BaselineDeferred
from specviz_core.viewer.filters import CycleFilter
from specviz_core.viewer.lifecycle import PHASES, enabled_actions, status_text


def status(w) -> str:
    return w.state_label.text()


def enabled(w) -> dict[str, bool]:
    return {name: a.isEnabled() for name, a in w.lifecycle_actions().items()}


def buttons(w) -> dict[str, bool]:
    rp = w.run_panel
    return {"step": rp.step_button.isEnabled(), "run": rp.run_button.isEnabled(), "pause": rp.pause_button.isEnabled(),
            "run_to_breakpoint": rp.bp_button.isEnabled(), "reset": rp.reset_button.isEnabled(),
            "fork": rp.fork_button.isEnabled()}


def test_every_state_is_shown_as_the_state_says(qtbot, window):
    """Pushed through every phase, the window's actions, buttons and status line are the state's."""
    from test_lifecycle import WALK

    for phase in PHASES:
        state = WALK[phase][0]
        window.controller.state = state
        window.controller.state_changed.emit(state)
        want = enabled_actions(state)
        assert enabled(window) == {k: want[k] for k in enabled(window)}, phase
        assert buttons(window) == {k: want[k] for k in buttons(window)}, phase
        assert status(window) == status_text(state), phase


def test_first_step_then_the_users_step_goes_before_the_background_baseline(qtbot, window, monkeypatch):
    """After the first cycle the AR baseline is measured in the background: it shows as such, Step stays enabled,
    and a Step pressed meanwhile decodes at once (the measurement gives way and starts again later)."""
    import time

    from specviz_app.session.jobs import measure as measure_mod

    measure = measure_mod.ar_speed
    calls = []

    def held_first(target, prompt_ids, tokens, progress, gave_way):
        """The first measurement runs until it is told to give way (however fast this machine decodes), as a long
        one would; later ones measure as usual."""
        calls.append(tokens)
        if len(calls) == 1:
            deadline = time.monotonic() + 120
            while not gave_way() and time.monotonic() < deadline:
                time.sleep(0.01)
            return None if gave_way() else measure(target, prompt_ids, tokens, progress, gave_way)
        return measure(target, prompt_ids, tokens, progress, gave_way)

    monkeypatch.setattr(measure_mod, "ar_speed", held_first)
    w = window
    assert "Press Step (F10)" in status(w) and enabled(w)["step"] and not enabled(w)["pause"]
    deferred = []
    w.controller.step()
    assert w.controller.state.phase == "loading" and not enabled(w)["step"] and enabled(w)["reset"]
    qtbot.waitUntil(lambda: w.controller.state.phase == "measuring baseline", timeout=60000)
    w.controller.engine.on(BaselineDeferred, lambda _report: deferred.append(True))
    assert w.model.n_cycles == 1
    assert enabled(w)["step"] and buttons(w)["step"] and not enabled(w)["pause"]
    assert "measuring the AR baseline in the background" in status(w) and "Model ready" not in status(w)
    w.controller.step()
    qtbot.waitUntil(lambda: w.model.n_cycles == 2, timeout=30000)
    qtbot.waitUntil(lambda: bool(deferred), timeout=30000)
    assert len(calls) >= 1
    # The measurement starts again once the engine is idle, and ends with a baseline for the charts.
    qtbot.waitUntil(lambda: w.controller.idle and w.controller.state.phase == "ready", timeout=120000)
    assert w.charts.chart("tps").ar_tokens_per_s is not None
    assert status(w).startswith("Ready: Step (F10)")


@pytest.mark.parametrize("preempted", [False, True])
def test_a_user_request_sent_while_the_baseline_waits_in_the_queue_makes_it_give_way(tiny, preempted):
    """The background baseline is queued when the engine goes idle; a Step pressed before the engine thread starts
    it must still make it give way (the Step is queued behind it). The job read the preempt count when it started,
    so a Step in that gap waited for the whole measurement: the full run's lifecycle test timed out on a busy
    machine. The job's ticket now stamps the count when it is sent."""
    from types import SimpleNamespace

    from specviz_app.session.jobs.base import Counts, JobContext
    from specviz_app.session.jobs.measure import BaselineJob
    from specviz_app.session.jobs.reports import BaselineReady
    from specviz_app.session.tickets import Tickets

    info = SimpleNamespace(model="tiny", device="cpu", dtype="float32", prompt_ids=(3, 4, 5, 6, 3, 4))
    held = SimpleNamespace(run=SimpleNamespace(info=info), models={("tiny",): (tiny, None)})
    tickets = Tickets()
    ticket = tickets.ticket()  # the job is sent
    if preempted:
        tickets.preempt()  # the user's Step, before the engine thread has started the job
    reports = list(BaselineJob().run(JobContext(held, tickets, ticket, lambda _r: None, {}, Counts())))
    kinds = [type(r) for r in reports]
    assert kinds == ([BaselineDeferred] if preempted else [BaselineReady])


def test_run_to_a_breakpoint_that_never_matches_says_so(qtbot, window):
    w = window
    rp = w.run_panel
    rp.method.setCurrentIndex(rp.method.findData("ar"))
    rp.max_new_tokens.setValue(6)
    rp.breakpoint_editor.kind.setCurrentIndex(rp.breakpoint_editor.kind.findData("mode"))
    rp.breakpoint_editor.mode.setCurrentText("bypass")
    assert rp.breakpoint() == CycleFilter("mode", mode="bypass")
    w.controller.run_to_breakpoint()
    qtbot.waitUntil(lambda: w.controller.state.phase in ("running to breakpoint", "finished"), timeout=60000)
    qtbot.waitUntil(lambda: w.controller.state.phase == "finished" and w.controller.idle, timeout=60000)
    assert "Running to" not in status(w)
    assert "No cycle matched the breakpoint (Mode is bypass)" in status(w)
    # A finished session: the status and the Run panel say what Step and Run do now.
    assert "starts a new session" in status(w) and "starts a new session" in rp.status.text()
    assert "Reset to start another" not in rp.status.text()
    assert enabled(w)["run"] and enabled(w)["reset"]
    first = w.model.source.info.id
    w.controller.run()
    qtbot.waitUntil(lambda: w.model.source is not None and w.model.source.info.id != first
                    and w.controller.state.phase == "finished" and w.controller.idle, timeout=60000)


def test_a_breakpoint_that_matches_stops_there_and_says_where(qtbot, window):
    w = window
    rp = w.run_panel
    rp.method.setCurrentIndex(rp.method.findData("ar"))
    rp.breakpoint_editor.kind.setCurrentIndex(rp.breakpoint_editor.kind.findData("mode"))
    rp.breakpoint_editor.mode.setCurrentText("ar")
    w.controller.run_to_breakpoint()
    qtbot.waitUntil(lambda: w.controller.state.phase == "paused" and w.controller.idle, timeout=60000)
    assert status(w).startswith("Stopped at cycle 0: Mode is ar") and enabled(w)["step"]


def test_reset_and_a_refused_start(qtbot, window):
    w = window
    w.controller.step()
    qtbot.waitUntil(lambda: w.model.n_cycles == 1 and not w.controller.busy, timeout=60000)
    w.controller.reset()
    qtbot.waitUntil(lambda: w.controller.idle, timeout=60000)
    assert w.controller.state.phase == "ready" and "Model ready" in status(w) and not enabled(w)["reset"]
    w.run_panel.prompt.setPlainText("")
    w.controller.step()
    assert w.controller.state.phase == "ready" and "the prompt is empty" in w.run_panel.message.text()
    assert enabled(w)["step"] and w.run_panel.prompt.isEnabled()


@pytest.mark.parametrize("where", ["while loading", "while running", "while measuring"])
def test_closing_at_any_moment_leaves_nothing_running(qtbot, window, where, monkeypatch):
    from specviz_app.session.jobs import measure as measure_mod

    monkeypatch.setattr(measure_mod, "BASELINE_TOKENS", 400)
    w = window
    if where == "while loading":
        w.controller.step()
        assert w.controller.state.phase == "loading"
    elif where == "while running":
        w.controller.step()
        qtbot.waitUntil(lambda: w.model.n_cycles >= 1 and not w.controller.busy, timeout=60000)
        w.controller.run()
        assert w.controller.state.phase == "running"
    else:
        w.controller.step()
        qtbot.waitUntil(lambda: w.controller.state.phase == "measuring baseline", timeout=60000)
    w.close()
    assert w.controller.worker is None


def test_one_status_line_at_a_time_also_in_presentation_mode(qtbot, window):
    """A passing message and the lifecycle's line were drawn one over the other after a change of font."""
    w = window
    w.statusBar().showMessage("a passing message", 60000)
    w.dock_layout.toggle_presentation()
    try:
        assert not w.state_label.isVisible() and w.statusBar().currentMessage() == "a passing message"
        w.statusBar().clearMessage()
        assert w.state_label.isVisible() and w.state_label.text() == status_text(w.controller.state)
    finally:
        w.dock_layout.toggle_presentation()

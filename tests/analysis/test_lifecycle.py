"""The session lifecycle is one value; the status text and the enabled actions are functions of it.

Every phase is walked: the table below says, independently of the code, what a user may do in each and what the
status bar must (and must not) say.
"""

from __future__ import annotations

import pytest

from specviz_core.viewer.lifecycle import ACTIONS, PHASES, Activity, Open, SessionState, enabled_actions, status_text

S = SessionState
#: phase -> (a state in that phase, the actions enabled there, words the status must hold, words it must not)
WALK = {
    "no model": (S(), {"step", "run", "run_to_breakpoint", "open", "compare", "race"},
                 ["Step (F10)"], ["Model ready", "Running"]),
    "loading": (S(activity=Activity.LOADING, detail="loading the model", progress=0.4),
                {"pause", "reset"}, ["Loading the model (40%)"], ["ready", "Ready"]),
    "measuring baseline": (S(open=Open.LIVE, activity=Activity.MEASURING_BASELINE, session_id="s1", has_model=True,
                             progress=0.5, detail="the AR baseline"),
                           {"step", "run", "run_to_breakpoint", "reset", "open", "fork", "compare", "race", "audit",
                            "measure"},
                           ["Step (F10)", "measuring the AR baseline in the background (50%)"], ["Model ready"]),
    "ready": (S(open=Open.LIVE, session_id="s1", has_model=True),
              {"step", "run", "run_to_breakpoint", "reset", "open", "fork", "compare", "race", "audit", "measure"},
              ["Ready", "session s1"], ["Running"]),
    "running": (S(open=Open.LIVE, activity=Activity.RUNNING, session_id="s1", has_model=True), {"pause"},
                ["Decoding session s1"], ["Ready"]),
    "pausing": (S(open=Open.LIVE, activity=Activity.PAUSING, session_id="s1", has_model=True), set(),
                ["Pausing"], ["Ready"]),
    "paused": (S(open=Open.LIVE, paused=True, session_id="s1", has_model=True, note="Stopped at cycle 4: Spine broke"),
               {"step", "run", "run_to_breakpoint", "reset", "open", "fork", "compare", "race", "audit", "measure"},
               ["Stopped at cycle 4: Spine broke", "Paused"], ["Running to"]),
    "running to breakpoint": (S(open=Open.LIVE, activity=Activity.RUNNING_TO_BREAKPOINT, detail="Spine broke",
                                session_id="s1", has_model=True), {"pause"},
                              ["Running to the first cycle where: Spine broke"], ["Ready"]),
    "measuring": (S(open=Open.REPLAY, activity=Activity.MEASURING, detail="Measuring the verify-cost curve",
                    session_id="r1", progress=0.25), {"pause"}, ["Measuring the verify-cost curve (25%)"], ["Ready"]),
    "finished": (S(open=Open.FINISHED, session_id="s1", has_model=True,
                   note="No cycle matched the breakpoint (Spine broke)"),
                 {"step", "run", "run_to_breakpoint", "reset", "open", "fork", "compare", "race", "audit", "measure"},
                 ["No cycle matched the breakpoint (Spine broke)", "starts a new session"],
                 ["Running to", "Reset to start another"]),
    "failed": (S(open=Open.FAILED, note="could not load model from /x: no config.json"),
               {"step", "run", "run_to_breakpoint", "reset", "open", "compare", "race", "measure"},
               ["could not load model from /x", "Reset (Ctrl+R)"], ["Ready"]),
    "replaying": (S(open=Open.REPLAY, session_id="r1", method="goose"),
                  {"step", "run", "run_to_breakpoint", "open", "fork", "compare", "race", "audit", "measure"},
                  ["Replaying session r1 (goose)"], ["Running"]),
}


def test_the_walk_covers_every_phase():
    assert set(WALK) == set(PHASES)
    for phase, (state, *_rest) in WALK.items():
        assert state.phase == phase


@pytest.mark.parametrize("phase", PHASES)
def test_each_phase_enables_what_a_user_may_do_and_says_so(phase):
    state, enabled, says, never = WALK[phase]
    got = enabled_actions(state)
    assert set(got) == set(ACTIONS)
    assert {a for a, on in got.items() if on} == enabled, phase
    text = status_text(state)
    for words in says:
        assert words in text, f"{phase}: {text!r} lacks {words!r}"
    for words in never:
        assert words not in text, f"{phase}: {text!r} says {words!r}"


def test_the_status_never_says_ready_when_step_is_greyed():
    """The bug a new user saw: "Model ready" while Step stayed greyed for minutes."""
    for phase in PHASES:
        state = WALK[phase][0]
        if not enabled_actions(state)["step"]:
            assert "ready" not in status_text(state).lower(), phase


def test_a_background_measurement_keeps_the_users_requests_open():
    base = WALK["ready"][0]
    measuring = base.with_(activity=Activity.MEASURING_BASELINE)
    assert not measuring.busy and base.busy is False
    assert enabled_actions(measuring)["step"] and enabled_actions(measuring)["run"]
    assert not enabled_actions(measuring)["pause"], "nothing of the user's is running to pause"
    assert enabled_actions(base.with_(activity=Activity.MEASURING))["step"] is False, \
        "work the user asked for (an audit, the cost curve) is waited for"


def test_states_are_values():
    a = S(open=Open.LIVE, session_id="s1")
    assert a.with_(paused=True) != a and a.with_(paused=True).with_(paused=False) == a
    with pytest.raises(AttributeError):
        a.paused = True  # type: ignore[misc]

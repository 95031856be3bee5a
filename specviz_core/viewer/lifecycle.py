"""The session's lifecycle as one value: what is open, what the engine is doing, and what follows from that.

The window's status bar text and which of its actions are enabled are functions of this value alone
(:func:`status_text`, :func:`enabled_actions`), so they cannot disagree with what is happening: the status bar
cannot say "Model ready" while Step is greyed, nor "Running to ..." after the run stopped. The controller owns the
current state and replaces it whole on every change; nothing else keeps lifecycle flags. No Qt here.

Two orthogonal parts make a state: the **session** open (none, a live one, a finished or failed live one, a
replayed recording) and the engine's **activity** (idle, loading, running, running to a breakpoint, pausing,
measuring). Background measurements (the AR baseline) never block the user: Step and Run stay enabled and go
first, the measurement resumes when the engine is idle again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum


class Open(str, Enum):
    """Which session the window holds."""

    NONE = "none"
    LIVE = "live"
    FINISHED = "finished"
    FAILED = "failed"
    REPLAY = "replay"


class Activity(str, Enum):
    """What the engine thread is doing."""

    IDLE = "idle"
    LOADING = "loading"
    RUNNING = "running"
    RUNNING_TO_BREAKPOINT = "running to breakpoint"
    PAUSING = "pausing"
    MEASURING = "measuring"
    """Work the user asked for besides decoding (an AR recording, the cost curve, an audit, a race recording)."""
    MEASURING_BASELINE = "measuring baseline"
    """Background work: the AR baseline of the live session's prompt. The user's requests go first."""


#: Every action whose enabled state the lifecycle decides, by the names the window gives its actions.
ACTIONS = ("step", "run", "pause", "run_to_breakpoint", "reset", "open", "fork", "compare", "race", "audit",
           "measure")


@dataclass(frozen=True)
class SessionState:
    """One moment of the lifecycle: replaced whole, never changed in place."""

    open: Open = Open.NONE
    activity: Activity = Activity.IDLE
    paused: bool = False
    """A live session stopped by Pause (or at a breakpoint) rather than after a Step."""
    session_id: str = ""
    method: str = ""
    detail: str = ""
    """What the activity is about: the loading stage, what is measured, the breakpoint's condition."""
    progress: float | None = None
    """The activity's fraction done (0..1), None when unknown."""
    note: str = ""
    """How the last run ended, in one line ("stopped at cycle 4: Spine broke", "no cycle matched: ..."), or the
    failure's message."""
    has_model: bool = False
    """A model is loaded on the engine thread (a replay has none until a live session or a job needs it)."""
    live_id: str = ""
    """The live session's id, once it is there (kept after it finished, until Reset, a replay or another start)."""
    starting: bool = False
    """A start was sent and its session has not arrived (the model may be loading)."""
    then: Activity = Activity.IDLE
    """What the Step or Run sent behind a start does once the session is there."""
    breakpoint: str = ""
    """The condition the Run in flight stops at, in words ('' for none)."""

    @property
    def phase(self) -> str:
        """The lifecycle's name for this state: no model, loading, measuring baseline, ready, running, pausing,
        paused, running to breakpoint, measuring, finished, failed or replaying."""
        if self.activity is not Activity.IDLE:
            return self.activity.value
        if self.open is Open.LIVE:
            return "paused" if self.paused else "ready"
        if self.open is Open.NONE:
            return "ready" if self.has_model else "no model"
        return {Open.FINISHED: "finished", Open.FAILED: "failed", Open.REPLAY: "replaying"}[self.open]

    @property
    def busy(self) -> bool:
        """The engine is doing something the user waits for (a background measurement does not count)."""
        return self.activity not in (Activity.IDLE, Activity.MEASURING_BASELINE)

    @property
    def live(self) -> bool:
        """A live session is open and can decode further."""
        return self.open is Open.LIVE

    def with_(self, **changes) -> SessionState:
        return replace(self, **changes)


#: Every phase a state can have, for tests and documentation.
PHASES = ("no model", "loading", "measuring baseline", "ready", "running", "pausing", "paused",
          "running to breakpoint", "measuring", "finished", "failed", "replaying")


def enabled_actions(state: SessionState) -> dict[str, bool]:
    """Which of :data:`ACTIONS` the user can take now."""
    busy = state.busy
    decoding = state.activity in (Activity.RUNNING, Activity.RUNNING_TO_BREAKPOINT)
    has_session = state.open is not Open.NONE
    return {
        # Step and Run start a new live session when none can go on (no session, finished, failed, replaying).
        "step": not busy,
        "run": not busy,
        "run_to_breakpoint": not busy,
        "pause": decoding or state.activity in (Activity.LOADING, Activity.MEASURING),
        # Reset ends the session between cycles (Pause first), or stops a model that is loading.
        "reset": (state.open in (Open.LIVE, Open.FINISHED, Open.FAILED) and not busy)
        or state.activity is Activity.LOADING,
        "open": not busy,
        "fork": has_session and not busy and state.open is not Open.FAILED,
        "compare": not busy,
        "race": not busy,
        "audit": state.open in (Open.LIVE, Open.FINISHED, Open.REPLAY) and not busy,
        "measure": has_session and not busy,
    }


def _fraction(p: float | None) -> str:
    return f" ({p:.0%})" if p is not None and 0 < p < 1 else ""


def status_text(state: SessionState) -> str:
    """The status bar's line for ``state``: what is happening and what the user can do next."""
    a, sid = state.activity, f"session {state.session_id}" if state.session_id else "the session"
    if a is Activity.LOADING:
        stage = state.detail or "loading the model"
        return f"{stage[:1].upper()}{stage[1:]}{_fraction(state.progress)}… (Reset stops it)"
    if a is Activity.RUNNING:
        return f"Decoding {sid}… (Pause: F6)"
    if a is Activity.RUNNING_TO_BREAKPOINT:
        return f"Running to the first cycle where: {state.detail} (Pause: F6)"
    if a is Activity.PAUSING:
        return "Pausing after the cycle in flight…"
    if a is Activity.MEASURING:
        return f"{state.detail or 'Measuring'}{_fraction(state.progress)}… (Pause: F6 stops it)"
    note = f"{state.note}. " if state.note else ""
    if a is Activity.MEASURING_BASELINE:
        lead = f"{note}Ready: Step (F10) or Run (F5) goes on with {sid}"
        what = state.detail or "the AR baseline"
        return f"{lead}; measuring {what} in the background{_fraction(state.progress)}."
    if state.open is Open.LIVE:
        verb = "Paused" if state.paused else "Ready"
        return f"{note}{verb}: Step (F10) or Run (F5) goes on with {sid}."
    if state.open is Open.FINISHED:
        return f"{note}{sid[:1].upper()}{sid[1:]} finished: Step (F10) or Run (F5) starts a new session; Reset " \
               "(Ctrl+R) edits the settings first."
    if state.open is Open.FAILED:
        return f"{state.note or 'The session failed'}. Reset (Ctrl+R) to edit the settings, or Step (F10) to try again."
    if state.open is Open.REPLAY:
        return f"{note}Replaying {sid} ({state.method}): ←/→ move through its cycles; Step (F10) starts a new live " \
               "session with the Run panel's settings."
    if state.has_model:
        return f"{note}Model ready: press Step (F10) to decode the first cycle, or open a recording (Ctrl+O)."
    return f"{note}Press Step (F10) to load the model and decode the first cycle, or open a recording (Ctrl+O)."

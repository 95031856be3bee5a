"""What a job on the engine thread tells the window: one small record per fact, sent through the worker's one
``report`` signal and dispatched by type on the UI thread (:meth:`specviz_app.session.engine_link.EngineLink.on`).
Torch-free: the window reads these without the engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Report:
    """Something a job says."""


@dataclass(frozen=True)
class Progress(Report):
    stage: str
    fraction: float
    """0..1, or -1 when unknown; stage ``ready`` (or ``cancelled``) when the work is over."""


@dataclass(frozen=True)
class Busy(Report):
    """The engine started (``on``) or ended work the user may wait for."""

    on: bool


@dataclass(frozen=True)
class Error(Report):
    """A message for the user (never a traceback)."""

    text: str


@dataclass(frozen=True)
class SessionStarted(Report):
    """A live session was created and its row written."""

    info: Any
    tokenizer: Any


@dataclass(frozen=True)
class CycleReady(Report):
    """A decoded cycle (a :class:`~specviz_core.session.session.RecordedCycle`), already recorded."""

    cycle: Any


@dataclass(frozen=True)
class SessionFinished(Report):
    """The final SessionInfo (complete, interrupted or failed)."""

    info: Any


@dataclass(frozen=True)
class RunEnded(Report):
    """A Step or Run ended: ``steps`` (the cycles asked for), ``breakpoint``, ``paused``, ``finished`` or
    ``failed``; ``last``: the last cycle decoded (-1: none)."""

    how: str
    last: int


@dataclass(frozen=True)
class ForkMismatch(Report):
    """A fork's re-run cycle differs from its recording: the fork waits for a :class:`ForkChoiceJob`."""

    text: str


@dataclass(frozen=True)
class BaselineReady(Report):
    """Plain AR's speed on the session's prompt, how it was measured, and its median forward (ms; the load it ran
    under)."""

    tokens_per_s: float
    note: str
    forward_ms: float | None = None


@dataclass(frozen=True)
class BaselineProgress(Report):
    fraction: float


@dataclass(frozen=True)
class BaselineDeferred(Report):
    """The background AR baseline gave way to a request of the user's; it can be asked again."""


@dataclass(frozen=True)
class BaselineRecorded(Report):
    """An AR session recorded as the speed-up baseline (the recording gained a session)."""

    info: Any


@dataclass(frozen=True)
class CostCurveReady(Report):
    """A verify-cost curve measured and kept (the dict of :mod:`specviz_core.engine.cost_curve`)."""

    curve: dict


@dataclass(frozen=True)
class AuditReady(Report):
    """An :class:`~specviz_core.audit.AuditResult` of the session asked for."""

    result: Any


@dataclass(frozen=True)
class RaceProgress(Report):
    """The race's recording: what is happening, overall fraction 0..1 or -1 while a model loads."""

    stage: str
    fraction: float


@dataclass(frozen=True)
class RaceRecorded(Report):
    """Both sessions of a race decoded to the end: the recording and [AR session id, method session id]."""

    db_path: str
    session_ids: list


@dataclass(frozen=True)
class RaceFailed(Report):
    """The race's recording failed (a message) or was cancelled ('')."""

    text: str


@dataclass(frozen=True)
class Done(Report):
    """A job ended (the worker says it, after the job's own reports): one less in flight."""

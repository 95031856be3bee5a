"""The engine thread's forks: re-run a parent session's cycles, checked against its recording, then go on with
other settings (:mod:`specviz_core.session.fork`). :class:`ForkJob` is owned by
:class:`specviz_app.session.worker.EngineWorker` and given its :class:`~specviz_app.session.jobs.state.EngineState`;
the worker reports what it yields."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from specviz_app.session.jobs.state import EngineState
from specviz_core.recording.store import Recording
from specviz_core.records import SessionInfo
from specviz_core.runtime.models import LoadedModel
from specviz_core.session.fork import Fork, fork_request
from specviz_core.session.request import CheckedRequest
from specviz_core.session.session import RecordedCycle


@dataclass(frozen=True)
class ForkStart:
    """A fork to start instead of a new session: session ``parent_id`` of the recording, from ``cycle``, with
    ``changes`` (the keyword arguments of :func:`~specviz_core.session.fork.fork_request`)."""

    parent_id: str
    cycle: int
    changes: dict


class ForkJob:
    """The stages of a fork on the engine thread: its request, its run, its re-run cycles."""

    def __init__(self, state: EngineState) -> None:
        self.state = state

    def request(self, fork: ForkStart, db_path: str) -> tuple[SessionInfo, CheckedRequest]:
        """The parent session in ``db_path`` and the fork's request (on the device the parent can run on)."""
        from specviz_core.audit import audit_device

        with Recording(db_path, read_only=True) as rec:
            parent = rec.session(fork.parent_id)
        device, dtype = audit_device(parent.device), parent.dtype
        return parent, fork_request(parent, **fork.changes, device=device, dtype=dtype)

    def run(self, fork: ForkStart, parent: SessionInfo, checked: CheckedRequest, target: LoadedModel,
            draft: LoadedModel | None) -> Fork:
        """The fork, recorded in the state's recording, its parent's cycles before ``fork.cycle`` to re-run."""
        assert self.state.recording is not None
        return Fork.start(self.state.recording, parent, fork.cycle, checked, target, draft=draft)

    def rerun(self, run: Fork, stop: Callable[[], bool],
              progress: Callable[[str, float], None]) -> Iterator[RecordedCycle]:
        """The fork's cycles before its fork cycle, re-run and checked one by one until ``stop()``; raises
        :class:`~specviz_core.session.fork.ForkMismatch` at the first that differs from the parent's."""
        while run.rerun_left and not stop():
            n = run.cycle_index
            progress(f"re-running cycle {n} of {run.fork_cycle} and checking it", n / run.fork_cycle)
            yield run.step()

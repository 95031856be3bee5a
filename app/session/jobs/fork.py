"""The engine worker's forks: re-run a parent session's cycles, checked against its recording, then go on with
other settings (:mod:`specviz_core.session.fork`). A mixin of :class:`specviz_app.session.worker.EngineWorker`."""

from __future__ import annotations

from dataclasses import dataclass

from specviz_core.crash import one_line
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.records import SessionInfo
from specviz_core.runtime.models import LoadedModel
from specviz_core.session.factory import load_draft
from specviz_core.session.fork import ForkedRun, ForkMismatch, fork_request, load_prefix, parent_choice, prepare_fork
from specviz_core.session.request import CheckedRequest


@dataclass(frozen=True)
class ForkStart:
    """A fork to start instead of a new session: session ``parent_id`` of the recording, from ``cycle``, with
    ``changes`` (the keyword arguments of :func:`~specviz_core.session.fork.fork_request`)."""

    parent_id: str
    cycle: int
    changes: dict


class ForkWorkerMixin:
    """Fork stages of the engine worker (its signals, models and recording are the worker's)."""

    def _fork_parent(self, fork: ForkStart, db_path: str) -> tuple[SessionInfo, CheckedRequest]:
        from specviz_core.audit import audit_device

        with Recording(db_path, read_only=True) as rec:
            parent = rec.session(fork.parent_id)
        device, dtype = audit_device(parent.device), parent.dtype
        return parent, fork_request(parent, **fork.changes, device=device, dtype=dtype)

    def _fork_run(self, fork: ForkStart, parent: SessionInfo, checked: CheckedRequest, target: LoadedModel,
                  draft: LoadedModel | None) -> ForkedRun:
        assert self.recording is not None
        old = parent_choice(parent)
        parent_draft = load_draft(target, parent.draft_model, checked.request.device, checked.request.dtype,
                                  same_tokenizer=old.cls.draft_shares_tokenizer) if old.wants_draft_model else None
        recorded = load_prefix(self.recording, parent, fork.cycle)
        prepared = prepare_fork(parent, checked, fork.cycle, target, parent_draft, draft)
        return ForkedRun(prepared, self.recording, parent, recorded, checked, draft)

    def _rerun(self, ticket) -> None:  # ticket: specviz_app.session.worker.Ticket
        """Re-run a fork's cycles before its fork cycle, with a progress bar; stops at the first difference."""
        run = self.run_
        assert isinstance(run, ForkedRun)
        self.busy_changed.emit(True)
        try:
            while run.rerun_left and not self._paused(ticket):
                n = run.engine.cycle_index
                self.progress.emit(f"re-running cycle {n} of {run.fork_cycle} and checking it", n / run.fork_cycle)
                try:
                    cycle = run.step()
                except ForkMismatch as e:
                    self.progress.emit("ready", 1.0)
                    self.fork_mismatch.emit(str(e))
                    return
                self.cycles_done += 1
                self.cycle_ready.emit(cycle)
            self.progress.emit("ready", 1.0)
        except SpecVizError as e:
            self.error.emit(str(e))
        except Exception as e:
            self.error.emit(f"the fork failed: {one_line(e)}")
        finally:
            self.busy_changed.emit(False)
        if run.writer.finished:
            self.session_finished.emit(self._final_info(run))

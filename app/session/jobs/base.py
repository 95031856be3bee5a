"""A job: one piece of work the engine thread does, a generator of reports over what the thread holds.

:class:`Job` subclasses are small frozen dataclasses made on the UI thread (their fields are the request); the
worker runs each one's :meth:`Job.run` on the engine thread with a :class:`JobContext`: the held models, recording and
session, whether the job was paused or cancelled since it was sent, and ``emit`` for reports from inside a callback
(a model's load stages) where a generator cannot yield.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from specviz_app.session.jobs.reports import Busy, Error, Progress, Report
from specviz_app.session.tickets import Ticket, Tickets
from specviz_core.crash import one_line
from specviz_core.errors import SpecVizError

if TYPE_CHECKING:
    from specviz_app.session.jobs.holdings import Holdings
    from specviz_core.records import SessionInfo
    from specviz_core.runtime.models import LoadedModel


class Cancelled(Exception):
    """A load stopped by Reset or close at a stage boundary."""


class Counts:
    """What the engine thread has done (read from the UI thread: ints, so reads are atomic)."""

    cycles_done = 0
    """Cycles decoded so far."""


class JobContext:
    """What a running job may use: the thread's holdings, its ticket's state, a way to report."""

    def __init__(self, held: Holdings, tickets: Tickets, ticket: Ticket, emit: Callable[[Report], None],
                 baselines: dict[tuple, float], counts: Counts) -> None:
        self.held = held
        """The models, the recording and the live session the engine thread holds."""
        self.tickets = tickets
        self.ticket = ticket
        self.emit = emit
        self.baselines = baselines
        """AR speeds measured on this thread, by (model, device, dtype, prompt ids)."""
        self._counts = counts

    @property
    def cycles_done(self) -> int:
        return self._counts.cycles_done

    @cycles_done.setter
    def cycles_done(self, n: int) -> None:
        self._counts.cycles_done = n

    def paused(self) -> bool:
        """A pause (or cancel) came after this job was sent."""
        return self.tickets.paused(self.ticket)

    def preempted(self) -> bool:
        """A request of the user's came after this job was sent (while it was queued too): background work gives
        way."""
        return self.tickets.preempted(self.ticket)

    def cancelled(self) -> bool:
        """A cancel (Reset, close) came after this job was sent."""
        return self.tickets.cancelled(self.ticket)

    def loading(self, stage: str, fraction: float | None) -> None:
        """A load stage's progress, reported; raises :class:`Cancelled` once the job was cancelled."""
        if self.cancelled():
            raise Cancelled
        self.emit(Progress(stage, -1.0 if fraction is None else fraction))


@dataclass(frozen=True)
class Job:
    """One request to the engine thread."""

    key: ClassVar[str | None] = None
    """Jobs with a key replace a queued (not yet started) job of the same key: the newer request wins."""
    what: ClassVar[str] = "Working"
    """What the status bar says while the job runs, when it is not a step of the session (every report names its job:
    :attr:`specviz_app.session.engine_link.EngineLink.reporting`)."""

    def run(self, ctx: JobContext) -> Iterator[Report]:
        raise NotImplementedError


def with_target(ctx: JobContext, info: SessionInfo, work: Callable[[object], Iterator[Report]], what: str = "measure"
                ) -> Iterator[Report]:
    """Load ``info``'s target model (if it is not held), then ``work(target)``; errors become one-line messages."""
    if ctx.paused():
        return
    yield Busy(True)
    try:
        target = target_for(ctx.held.models, info, lambda s, f: ctx.emit(Progress(s, -1.0 if f is None else f)))
        yield from work(target)
    except SpecVizError as e:
        yield Error(str(e))
    except Exception as e:  # out of memory, a model folder gone since the recording...: a message, not a crash
        yield Error(f"could not {what}: {one_line(e)}")
    finally:
        yield Progress("ready", 1.0)
        yield Busy(False)


def target_for(cache: dict[tuple, tuple[LoadedModel, LoadedModel | None]], info: SessionInfo,
               progress: Callable[[str, float | None], None]) -> LoadedModel:
    """The session's target model on its device and dtype: the one already loaded, else loaded (and kept)."""
    from specviz_core.audit import audit_device
    from specviz_core.session.factory import load_checked_model

    device = audit_device(info.device)
    for target, _ in cache.values():
        if target.name == info.model and str(target.device) == device and str(target.dtype).endswith(info.dtype):
            return target
    target = load_checked_model(info.model, device, info.dtype or None, progress)
    cache.clear()  # keep one set: models are large
    cache[(info.model, None, device, info.dtype)] = (target, None)
    return target

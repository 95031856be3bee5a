"""A fork on the engine thread: its parent and request read from the recording, then its parent's cycles re-run and
checked against the recording, with a progress bar (:mod:`specviz_core.session.fork`). Started by
:class:`~specviz_app.session.jobs.session.StartJob` with a :class:`ForkStart`; a failed check waits for a
:class:`~specviz_app.session.jobs.session.ForkChoiceJob`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specviz_app.session.jobs import reports as r
from specviz_core.crash import one_line
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.records import SessionInfo
from specviz_core.session.spec import SessionSpec

if TYPE_CHECKING:
    from specviz_app.session.jobs.base import JobContext


@dataclass(frozen=True)
class ForkStart:
    """A fork to start instead of a new session: session ``parent_id`` of the recording, from ``cycle``, with
    ``changes`` (the keyword arguments of :func:`~specviz_core.session.fork.fork_request`)."""

    parent_id: str
    cycle: int
    changes: dict


def fork_parent(fork: ForkStart, db_path: str) -> tuple[SessionInfo, SessionSpec]:
    """The parent session in ``db_path`` and the fork's request (on the device the parent can run on)."""
    from specviz_core.audit import audit_device
    from specviz_core.session.fork import fork_request

    with Recording(db_path, read_only=True) as rec:
        parent = rec.session(fork.parent_id)
    device, dtype = audit_device(parent.device), parent.dtype
    return parent, fork_request(parent, **fork.changes, device=device, dtype=dtype)


def rerun(ctx: JobContext) -> Iterator[r.Report]:
    """The held fork's cycles before its fork cycle, re-run and checked one by one until a pause; stops at the
    first that differs from the parent's (the fork then waits for the user's choice)."""
    from specviz_core.session.fork import Fork, ForkMismatch

    run = ctx.held.run
    assert isinstance(run, Fork)
    yield r.Busy(True)
    try:
        while run.rerun_left and not ctx.paused():
            n = run.cycle_index
            yield r.Progress(f"re-running cycle {n} of {run.fork_cycle} and checking it", n / run.fork_cycle)
            cycle = run.step()
            ctx.cycles_done += 1
            yield r.CycleReady(cycle)
        yield r.Progress("ready", 1.0)
    except ForkMismatch as e:
        yield r.Progress("ready", 1.0)
        yield r.ForkMismatch(str(e))
        return
    except SpecVizError as e:
        yield r.Error(str(e))
    except Exception as e:
        yield r.Error(f"the fork failed: {one_line(e)}")
    finally:
        yield r.Busy(False)
    if run.finished:
        yield r.SessionFinished(ctx.held.final_info(run))

"""The live session's jobs: start one (or a fork), decode it (Step, Run, Run to a breakpoint), end it (Reset), and
answer a fork's failed check. Each runs over the session the engine thread holds (``ctx.held.run``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from specviz_app.session.jobs import reports as r
from specviz_app.session.jobs.base import Cancelled, Job, JobContext
from specviz_app.session.jobs.fork import ForkStart, fork_parent, rerun
from specviz_core.crash import one_line
from specviz_core.errors import SpecVizError
from specviz_core.session.spec import SessionSpec
from specviz_core.viewer.filters import CycleFilter

# The engine (torch) is imported inside the jobs, on the engine thread: a window that only replays never loads it.


def end_current(ctx: JobContext, status: str, reason: str) -> Iterator[r.Report]:
    """The session held, if it has not ended, ended as ``status``."""
    info = ctx.held.finish(status, reason)
    if info is not None:
        yield r.SessionFinished(info)


@dataclass(frozen=True)
class StartJob(Job):
    """Load the models if they are not held and create a recorded session (or a fork, which re-runs its parent's
    cycles first); the first cycle waits for a :class:`DecodeJob`."""

    request: SessionSpec | ForkStart
    db_path: str

    def run(self, ctx: JobContext) -> Iterator[r.Report]:
        yield r.Busy(True)
        try:
            yield from self._start(ctx)
        except Cancelled:
            yield r.Progress("cancelled", 1.0)
        except SpecVizError as e:
            ctx.held.run = None
            yield r.Error(str(e))
        except Exception as e:  # a broken model folder, out of memory...: a message, not a crash
            ctx.held.run = None
            yield r.Error(f"could not start the session: {one_line(e)}")
        finally:
            yield r.Busy(False)

    def _start(self, ctx: JobContext) -> Iterator[r.Report]:
        from specviz_core.runtime import threads as cpu_threads
        from specviz_core.session.factory import load_models
        from specviz_core.session.fork import Fork
        from specviz_core.session.session import Session

        yield from end_current(ctx, "interrupted", "reset by the user")
        if ctx.cancelled():
            return
        fork = self.request if isinstance(self.request, ForkStart) else None
        parent = None
        spec = self.request
        if fork is not None:
            parent, spec = fork_parent(fork, self.db_path)
        assert isinstance(spec, SessionSpec)
        key = (spec.model, spec.draft_model, spec.device, spec.dtype)
        models = ctx.held.models.get(key)
        if models is None:
            yield r.Progress("loading the model", -1.0)
            models = load_models(spec, ctx.loading)
            ctx.held.models = {key: models}  # keep one set: models are large
        if ctx.cancelled():  # reset or closed while the last stage loaded: no session to record
            yield r.Progress("cancelled", 1.0)
            return
        target, draft = models
        recording = ctx.held.record_to(self.db_path)
        if fork is not None:
            assert parent is not None
            ctx.held.run = Fork.start(recording, parent, fork.cycle, spec, target, draft=draft)
        else:  # a device's first budget=auto session measures its verify cost first (seconds, once)
            # The Run panel's Threads field holds for every session it starts: its "auto" chooses again for the
            # machine as it is now, rather than keeping the number an earlier session asked for.
            cpu_threads.request(spec.threads)
            ctx.held.run = Session(spec, target, draft, recording=recording, progress=ctx.loading)
        yield r.Progress("ready", 1.0)
        yield r.SessionStarted(ctx.held.run.info, target.tokenizer)
        if fork is not None:
            yield from rerun(ctx)


@dataclass(frozen=True)
class DecodeJob(Job):
    """Decode ``cycles`` cycles (None: until the session ends), stopping at a pause or a cycle that matches
    ``breakpoint``."""

    cycles: int | None = 1
    breakpoint: CycleFilter | None = None

    def run(self, ctx: JobContext) -> Iterator[r.Report]:
        from specviz_core.session.fork import ForkMismatch

        run = ctx.held.run
        if run is None or ctx.paused():
            return
        yield r.Busy(True)
        done, last, how = 0, -1, "paused"
        try:
            while not run.done and not ctx.paused():
                cycle = run.step()
                ctx.cycles_done += 1
                yield r.CycleReady(cycle)
                done, last = done + 1, cycle.record.index
                if self.breakpoint is not None and self.breakpoint(cycle.summary):
                    how = "breakpoint"
                    break
                if self.cycles is not None and done >= self.cycles:
                    how = "steps"
                    break
            else:
                how = "finished" if run.done else "paused"
        except ForkMismatch as e:  # a fork stepped through its re-run cycles: the user chooses
            how = "paused"
            yield r.ForkMismatch(str(e))
        except SpecVizError as e:
            how = "failed"
            yield r.Error(str(e))
        except Exception as e:
            how = "failed"
            yield r.Error(f"the decode failed: {one_line(e)}")
        finally:
            yield r.Busy(False)
        yield r.RunEnded(how, last)
        if run.finished:
            yield r.SessionFinished(ctx.held.final_info(run))


@dataclass(frozen=True)
class ResetJob(Job):
    """End the live session (it stays recorded as interrupted) and let it go."""

    def run(self, ctx: JobContext) -> Iterator[r.Report]:
        yield from end_current(ctx, "interrupted", "reset by the user")
        ctx.held.run = None


@dataclass(frozen=True)
class ForkChoiceJob(Job):
    """After a fork's failed check: go on from the re-run state (``go_on``), or end the fork as failed."""

    go_on: bool

    def run(self, ctx: JobContext) -> Iterator[r.Report]:
        from specviz_core.session.fork import Fork

        run = ctx.held.run
        if not isinstance(run, Fork) or run.finished:
            return
        if self.go_on:
            run.continue_anyway()
            yield from rerun(ctx)
        else:
            run.stop()
            yield r.SessionFinished(ctx.held.final_info(run))

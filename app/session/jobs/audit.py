"""The audit on the engine thread: decode a session's prompt plainly on its model and compare the outputs
(:mod:`specviz_core.audit`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from specviz_app.session.jobs import reports as r
from specviz_app.session.jobs.base import Job, JobContext, with_target
from specviz_core.records import SessionInfo


@dataclass(frozen=True)
class AuditJob(Job):
    what = "Auditing against plain decoding"
    """Audit ``info`` (its cycles committed ``cycle_lengths`` tokens each) against plain greedy decoding."""

    info: SessionInfo
    cycle_lengths: tuple[int, ...]

    def run(self, ctx: JobContext) -> Iterator[r.Report]:
        from specviz_core.audit import audit

        def work(target) -> Iterator[r.Report]:
            yield r.AuditReady(audit(self.info, list(self.cycle_lengths), target,
                                     progress=lambda s: ctx.emit(r.Progress(s, -1.0))))

        yield from with_target(ctx, self.info, work)

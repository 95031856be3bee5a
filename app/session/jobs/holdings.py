"""What the engine thread holds between requests: the loaded models, the recording it writes to, the session it
decodes. The worker owns one :class:`Holdings`; every job it runs is given it (``ctx.held``). Touched on the engine
thread only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from specviz_core.recording.store import Recording
from specviz_core.records import SessionInfo

if TYPE_CHECKING:
    from specviz_core.runtime.models import LoadedModel
    from specviz_core.session.session import Session


class Holdings:
    """The models, the recording and the run of the engine thread."""

    def __init__(self) -> None:
        self.models: dict[tuple, tuple[LoadedModel, LoadedModel | None]] = {}
        """One set of (target, draft) models, by (model, draft model, device, dtype): models are large."""
        self.recording: Recording | None = None
        """The recording live sessions are written to (opened by the first one)."""
        self.run: Session | None = None
        """The live session being decoded (a fork is one too), or None."""

    def record_to(self, db_path: str) -> Recording:
        """The recording at ``db_path``, kept open for the sessions that follow (the one open before is closed)."""
        if self.recording is None or str(self.recording.path) != str(Path(db_path)):
            if self.recording is not None:
                self.recording.close()
            Path(db_path).parent.mkdir(parents=True, exist_ok=True)
            self.recording = Recording(db_path, create=True)
        return self.recording

    def final_info(self, run: Session) -> SessionInfo:
        """``run``'s session as recorded now (complete, interrupted or failed)."""
        assert self.recording is not None
        return self.recording.session(run.info.id)

    def finish(self, status: str, reason: str) -> SessionInfo | None:
        """End the session being decoded, if it has not ended, as ``status``; its final info (None if none)."""
        run = self.run
        if run is not None and not run.finished:
            run.finish(status, reason)
            return self.final_info(run)
        return None

    def close(self) -> None:
        """Forget the run, close the recording, drop the models."""
        self.run = None
        if self.recording is not None:
            self.recording.close()
            self.recording = None
        self.models.clear()

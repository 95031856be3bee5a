"""``specviz.record``: your own ``model.generate(...)`` calls, recorded cycle by cycle where they run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specviz.cycle import Cycle
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.session.capture import GenerateCapture


class Recorder(GenerateCapture):
    """What ``with specviz.record(db) as rec`` gives: ``rec.path``, ``rec.sessions`` (the ids of the calls
    recorded, in order) and ``rec.cycles()``."""

    def cycles(self, call: int = -1) -> list[Cycle]:
        """The cycles of a recorded call (the last by default), read back from the file: each draws itself in a
        notebook and says why it stopped, as :meth:`specviz.Session.step`'s do."""
        if not self.sessions:
            raise SpecVizError(f"specviz.record has recorded no generate call to {self.path} yet")
        try:
            session_id = self.sessions[call]
        except IndexError:
            raise SpecVizError(f"specviz.record recorded {len(self.sessions)} generate calls, not call {call}") from None
        with Recording(self.path, read_only=True) as rec:
            return [Cycle.of(r, self.tokenizer) for r in rec.cycles(session_id)]


def record(db: str | Path, tokenizer: Any = None) -> Recorder:
    """Record transformers' speculative ``generate`` calls made inside the ``with`` block, unchanged::

        with specviz.record("runs.db") as rec:
            out = model.generate(**inputs, assistant_model=assistant, max_new_tokens=64)
        specviz.open(rec)

    Each call that drafts (``assistant_model=``, ``prompt_lookup_num_tokens=``, universal assisted decoding with
    ``tokenizer=`` and ``assistant_tokenizer=``), greedy or sampled, becomes one session of the SQLite file ``db``
    (created if missing; sessions are added to an existing one), in the format the window opens: each cycle's
    drafted chain, the target's top-5 at every verified position, the accepted tokens, the bonus token, the KV
    crop, and the settings as ``generate`` resolved them. ``rec.sessions`` lists the ids recorded and
    ``rec.cycles()`` reads a call's cycles back. A call that would not draft (plain greedy search or sampling,
    beam search) raises :class:`specviz.SpecVizError` before it decodes anything. Only calls made in the thread
    that entered the block are recorded. ``tokenizer``: the target's, to store each prompt's text and name tokens
    in pictures (the token ids are stored anyway).
    """
    return Recorder(db, tokenizer)


__all__ = ["Recorder", "record"]

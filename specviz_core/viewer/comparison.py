"""Sessions of a recording side by side, read for showing: what ``specviz compare``, ``specviz race`` and the
window's Compare and Race read (so the window needs nothing of the command line)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specviz_core.analysis.compare import Comparison, compare
from specviz_core.analysis.timing import CostCurve
from specviz_core.errors import SpecVizError
from specviz_core.recording.store import Recording
from specviz_core.records import SessionInfo
from specviz_core.runtime.vocab import TokenText, load_token_text
from specviz_core.viewer.sources import session_curve


def load_comparison(db: Path, ids: Sequence[str]) -> tuple[Comparison, TokenText]:
    """The sessions ``ids`` of recording ``db`` as a :class:`~specviz_core.analysis.compare.Comparison`, and their token text
    (ids only if the tokenizer is not on this machine)."""
    if len(ids) < 2:
        raise SpecVizError("compare needs two session ids or more")
    with Recording(db, read_only=True) as rec:
        known = {s.id for s in rec.sessions()}
        missing = [i for i in ids if i not in known]
        if missing:
            raise SpecVizError(f"no session {', '.join(missing)} in {db} (specviz sessions --db {db} lists them)")
        pairs = [(rec.session(i), rec.cycle_summaries(i)) for i in ids]
    return compare(pairs), load_token_text(pairs[0][0].tokenizer)


def race_sessions(db: Path, most: int = 4) -> list[str]:
    """The sessions a race takes when none are named: the latest complete session's prompt and model, its latest
    AR session first (the baseline), then the latest others of that prompt, one per method (forks left out), up to
    ``most``."""
    with Recording(db, read_only=True) as rec:
        done = [s for s in rec.sessions() if s.status == "complete"]
    if not done:
        raise SpecVizError(f"{db} has no complete session to race: record some first (specviz record ... --db {db})")
    latest = max(done, key=lambda s: s.created)
    same = sorted((s for s in done if s.prompt_ids == latest.prompt_ids and s.model == latest.model
                   and s.parent_session is None),  # a fork re-ran part of another session: not a method's own race
                  key=lambda s: s.created, reverse=True)
    ar = next((s for s in same if s.method == "ar"), None)
    if ar is None:
        raise SpecVizError(f"no AR session of the latest prompt in {db} to race against: record one "
                           f"(specviz record --method ar ...) or name the sessions")
    picked, methods = [ar.id], {"ar"}
    for s in same:
        if s.method not in methods and len(picked) < most:
            picked.append(s.id)
            methods.add(s.method)
    if len(picked) < 2:
        raise SpecVizError(f"only an AR session of the latest prompt in {db}: record another method on it to race")
    return picked


def stored_curve_of(info: SessionInfo) -> CostCurve | None:
    """A recorded session's verify-cost curve (:func:`~specviz_core.viewer.sources.session_curve`), or None: what a
    race's lane behind the baseline explains itself with."""
    curve, _ = session_curve(info)
    return CostCurve.from_dict(curve) if curve else None

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
from specviz_core.runtime.cost_files import load_cost_curve
from specviz_core.runtime.vocab import TokenText, load_token_text


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


def stored_curve_of(info: SessionInfo) -> CostCurve | None:
    """The stored verify-cost curve of a recorded session's model, device and dtype, or None: what a race's lane
    behind the baseline explains itself with."""
    stored = load_cost_curve(info.model, info.device, info.dtype)
    return CostCurve.from_dict(stored) if stored else None

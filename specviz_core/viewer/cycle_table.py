"""A session's cycles as a table, one row per cycle: what "Export cycles to CSV" writes."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Iterator
from typing import Any

from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.cycle_state import GooseFacts
from specviz_core.runtime.vocab import TokenText

#: Column names, in order. Times in ms; ``tokens`` is the committed text.
COLUMNS = ("cycle", "mode", "verified", "accepted", "committed", "tokens", "cycle_ms", "spine_broke_at",
           "spine_continued", "spine_ratio", "ema_p_s")


def cycle_rows(summaries: Iterable[CycleSummary], vocab: TokenText) -> Iterator[list[Any]]:
    """One row per cycle, in :data:`COLUMNS` order; a value the cycle does not have is ``""``."""
    for s in summaries:
        yield [s.index, s.mode, s.n_verified, s.n_accepted, s.n_committed, vocab.text(s.committed_ids),
               f"{s.cycle_ms:.3f}", "" if s.spine_broke_at is None else s.spine_broke_at, int(s.spine_continued),
               _or_blank(GooseFacts.read(s.state).spine_ratio), _or_blank(GooseFacts.read(s.state).ema_p_s)]


def write_cycles_csv(path: str | os.PathLike, summaries: list[CycleSummary], vocab: TokenText) -> int:
    """Write the header and one row per cycle; returns the number of rows."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        w.writerows(cycle_rows(summaries, vocab))
    return len(summaries)


def _or_blank(value: object) -> object:
    """A fact the cycle did not record, as an empty cell."""
    return "" if value is None else value

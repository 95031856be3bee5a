"""``specviz.Cycle``: one decoded cycle, every field of its record, with why it stopped."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

from specviz_core.analysis.stop_cause import CAUSES, StopCause, stop_cause
from specviz_core.records import CycleRecord


@dataclass(frozen=True, eq=False)  # as the record: compared by identity (it holds arrays)
class Cycle(CycleRecord):
    """A cycle as :class:`~specviz_core.records.CycleRecord` (its tree ``nodes``, ``mask``, ``positions``,
    ``accepted_path``, ``bonus_token``, ``committed_ids``, ``kv_keep``, ``target_topk``...; see
    ``docs/record-format.md``), plus the analysis the window shows for it: ``stop_cause`` and ``headroom``."""

    @classmethod
    def of(cls, record: CycleRecord) -> Cycle:
        if isinstance(record, Cycle):
            return record
        return cls(**{f.name: getattr(record, f.name) for f in dataclasses.fields(CycleRecord)})

    @cached_property
    def stop_cause(self) -> StopCause:
        """Why the cycle stopped where it did: ``kind`` (``gated``, ``budget``, ``not_drafted``, ``not_offered``,
        ``rejected``), the node, the token the target wanted there, which source had it and what cut it;
        ``.sentence()`` says it in words, ``.to_json()`` as the export writes it."""
        return stop_cause(self)

    @property
    def cause(self) -> str:
        """The stop cause's kind, e.g. ``"gated"`` (``CAUSES`` gives each a label)."""
        return self.stop_cause.kind

    @property
    def headroom(self) -> dict[str, int]:
        """Per node source (and ``"*"`` for all together): the tokens it would have supplied along this cycle's
        committed path with unlimited width (hindsight, within the cycle)."""
        return dict(self.stop_cause.headroom)


__all__ = ["CAUSES", "Cycle"]

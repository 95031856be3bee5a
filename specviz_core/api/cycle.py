"""``specviz.Cycle``: one decoded cycle, every field of its record, with why it stopped."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from html import escape
from typing import Any

from specviz_core.analysis.stop_cause import CAUSES, StopCause, stop_cause
from specviz_core.records import CycleRecord
from specviz_core.runtime.vocab import TokenText
from specviz_core.viewer import svg

#: Characters of a token shown in a box (as the window's tree).
LABEL_CHARS = 10


@dataclass(frozen=True, eq=False)  # as the record: compared by identity (it holds arrays)
class Cycle(CycleRecord):
    """A cycle as :class:`~specviz_core.records.CycleRecord` (its tree ``nodes``, ``mask``, ``positions``,
    ``accepted_path``, ``bonus_token``, ``committed_ids``, ``kv_keep``, ``target_topk``...; see
    ``docs/record-format.md``), plus the analysis the window shows for it: ``stop_cause`` and ``headroom``."""

    @classmethod
    def of(cls, record: CycleRecord, tokenizer: Any = None) -> Cycle:
        """The cycle of ``record``; ``tokenizer`` names its tokens in pictures (else ``#id``)."""
        cycle = record if isinstance(record, Cycle) else cls(
            **{f.name: getattr(record, f.name) for f in dataclasses.fields(CycleRecord)})
        object.__setattr__(cycle, "_text", TokenText(tokenizer))
        return cycle

    def _label(self, token: int) -> str:
        text = getattr(self, "_text", None) or TokenText(None)
        return text.label(token, LABEL_CHARS)

    # -- pictures (a notebook shows them inline; no Qt) --------------------------------------------------------------
    def tree_svg(self, show_gated: bool = False) -> str:
        """The draft tree as the window draws it, as SVG text."""
        return svg.tree_svg(self, self._label, show_gated)

    def mask_svg(self) -> str:
        """The tree attention mask in verify order (rows labelled with their position ids), as SVG text."""
        return svg.mask_svg(self, self._label)

    def _repr_html_(self) -> str:
        head = (f"<b>Cycle {self.index}</b> · {escape(self.mode)} · {len(self.accepted_path)} accepted + bonus "
                f"· {len(self.verify_order)} verified · cache {self.cache_len}")
        why = escape(self.stop_cause.sentence(lambda t: repr(self._label(t))))
        return (f"<div>{head}<div style='display:flex;gap:16px;align-items:flex-start;overflow:auto'>"
                f"{self.tree_svg()}{self.mask_svg()}</div><div>{why}</div></div>")

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

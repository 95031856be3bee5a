"""Conditions on a cycle, shared by the timeline's filter and the engine's breakpoints."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from specviz_core.analysis.cycle_summary import CycleSummary
from specviz_core.analysis.stop_cause import CAUSES
from specviz_core.errors import SpecVizError

#: Filter kinds, with a label for menus.
KINDS: dict[str, str] = {
    "all": "All cycles",
    "spine_broke": "Spine broke",
    "spine_continued": "Branch continued the spine",
    "bypass": "Bypass cycles",
    "accepted_le": "Accepted ≤ k",
    "accepted_ge": "Accepted ≥ k",
    "mode": "Mode is …",
    **{f"stop_{c}": f"Stopped: {label}" for c, label in CAUSES.items()},
}
#: Kinds that compare with ``k``, and kinds that take a ``mode`` (one of ``records.MODES``).
K_KINDS = frozenset({"accepted_le", "accepted_ge"})
MODE_KINDS = frozenset({"mode"})


@dataclass(frozen=True)
class CycleFilter:
    """One condition: ``kind`` from :data:`KINDS`, with ``k`` or ``mode`` where the kind needs one."""

    kind: str = "all"
    k: int = 0
    mode: str = "tree"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SpecVizError(f"unknown cycle filter {self.kind!r} (known: {', '.join(KINDS)})")

    def __call__(self, s: CycleSummary) -> bool:
        if self.kind == "all":
            return True
        if s.damaged:  # nothing is known of a damaged cycle but its place
            return False
        if self.kind == "spine_broke":
            return s.spine_broke
        if self.kind == "spine_continued":
            return s.spine_continued
        if self.kind == "bypass":
            return s.mode == "bypass"
        if self.kind == "accepted_le":
            return s.n_accepted <= self.k
        if self.kind == "accepted_ge":
            return s.n_accepted >= self.k
        if self.kind.startswith("stop_"):
            return s.cause == self.kind[5:]
        return s.mode == self.mode

    def label(self) -> str:
        if self.kind in K_KINDS:
            return KINDS[self.kind].replace("k", str(self.k))
        if self.kind in MODE_KINDS:
            return f"Mode is {self.mode}"
        return KINDS[self.kind]

    def matching(self, summaries: Iterable[CycleSummary]) -> list[int]:
        """Indices of the matching cycles, in order."""
        return [s.index for s in summaries if self(s)]

    @classmethod
    def parse(cls, text: str) -> CycleFilter:
        """``spine_broke``, ``bypass``, ``accepted<=2``, ``accepted>=4``, ``mode=ar``, ``stop_budget``..."""
        t = text.strip().replace(" ", "")
        if t.startswith("accepted<="):
            return cls("accepted_le", k=_int(t[10:], text))
        if t.startswith("accepted>="):
            return cls("accepted_ge", k=_int(t[10:], text))
        if t.startswith("mode="):
            return cls("mode", mode=t[5:])
        return cls(t or "all")


def _int(s: str, text: str) -> int:
    try:
        return int(s)
    except ValueError:
        raise SpecVizError(f"bad cycle filter {text!r}: expected a whole number after the comparison") from None

"""A cycle in a few numbers: what the timeline, the filters, the charts and the output view need.

A :class:`CycleSummary` is computed once from a :class:`CycleRecord` (when the cycle is recorded,
or live) and stored next to it, so opening a 10,000-cycle recording reads small rows instead of
every tree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from specviz_core.analysis.spine import analyze_spine
from specviz_core.analysis.stop_cause import stop_cause
from specviz_core.cycle_state import EngineFacts, GooseFacts
from specviz_core.records import CycleRecord

#: How a committed token got into the output, besides a drafted node's own source.
BONUS = "bonus"
AR = "ar"
PROMPT = "prompt"


@dataclass(frozen=True, slots=True)
class CycleSummary:
    """One cycle, summarised. Counts are in tokens, times in ms."""

    index: int
    """Cycle number in the session, from 0."""
    mode: str
    """``ar``, ``chain``, ``tree`` or ``bypass``."""
    n_verified: int
    """Tokens in the verify block (root included)."""
    n_accepted: int
    """Draft tokens accepted (bonus excluded)."""
    committed_ids: tuple[int, ...]
    """Tokens committed by this cycle."""
    committed_kinds: tuple[str, ...]
    """Per committed token: the accepted node's source, ``bonus``, or ``ar`` (an AR cycle's token)."""
    cycle_ms: float
    """Wall time of the whole cycle (every timing summed)."""
    spine_broke_at: int | None
    """Depth of the first rejected spine (or copied n-gram) token; None if the spine held or there was none."""
    spine_continued: bool
    """A branch continued the accepted path after the spine broke."""
    by_source: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per node source: (verified, accepted) counts."""
    depth_rank: list[list[int]] = field(default_factory=list)
    """Per (depth, sibling rank) seen: ``[depth, rank, verified, accepted]``; rank 0 is the first child tried.
    Kept as stored (lists), because converting 200,000 of them is most of opening a long session."""
    state: dict[str, Any] = field(default_factory=dict)
    """The method's state for this cycle (spine ratio, EMA, delta, ...)."""
    frontier: int | None = None
    """Verified children of the node where the walk stopped (the last accepted node, or the root): 0 when the
    draft ran out there, else the target rejected them all. None in recordings made before it was stored."""
    damaged: str = ""
    """Why the cycle could not be read from its recording ('' when it was): a damaged cycle has no numbers."""
    cause: str = ""
    """Why the cycle stopped: a key of :data:`specviz_core.analysis.stop_cause.CAUSES` ('' in recordings made before it was stored)."""
    headroom: dict[str, int] = field(default_factory=dict)
    """Per source (and ``"*"`` for all): tokens it would have supplied with unlimited width (:mod:`specviz_core.analysis.stop_cause`)."""
    timings_ms: dict[str, float] = field(default_factory=dict)
    """The cycle's timings by stage (draft, forward, walk, trim, harvest, build, record), ms; read from the row."""
    accepted_rows: tuple[int, ...] | None = None
    """Verify-order row of each accepted node, in path order (the root is row 0): how far into the verify block
    the accepted path reached. None in recordings made before it was stored."""
    cache_len: int | None = None
    """Tokens in the cache before the cycle (the record's ``cache_len``): where the cost curve reads this cycle's
    forward and its 1-token unit. None where it is not known (a damaged row)."""

    @property
    def route(self) -> str:
        """How the drafter routed the cycle (Goose: ``prefill``, ``spine_tree``, ``branch_tree``, ``chain``, ``bypass``,
        ``ar``); the mode for methods that record no route."""
        route = GooseFacts.read(self.state).route
        return str(route if route is not None else self.mode)

    @property
    def path(self) -> str | None:
        """Goose's path category: ``pure_spine``, ``spine_continuation``, ``pure_branch`` or ``none``; None if unrecorded."""
        return GooseFacts.read(self.state).path

    @property
    def by_depth_rank(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(depth, rank) -> (verified, accepted)."""
        return {(d, r): (v, a) for d, r, v, a in self.depth_rank}

    @property
    def n_committed(self) -> int:
        return len(self.committed_ids)

    @property
    def ran_forward(self) -> bool:
        """Whether the cycle ran a target forward of its own: a cycle 0 that took its token from the prefill's last
        row did not (tokens per forward count the forwards, so that cycle's token is free)."""
        return not EngineFacts.read(self.state).from_prefill and not self.damaged

    @property
    def spine_broke(self) -> bool:
        return self.spine_broke_at is not None

    @property
    def tokens_per_s(self) -> float:
        return self.n_committed / self.cycle_ms * 1000.0 if self.cycle_ms > 0 else 0.0

    # -- storage ------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The parts not already stored in the cycle row (compact keys)."""
        return {
            "kinds": list(self.committed_kinds),
            "broke": self.spine_broke_at,
            "cont": self.spine_continued,
            "src": {k: list(v) for k, v in self.by_source.items()},
            "dr": self.depth_rank,
            "fr": self.frontier,
            "ca": self.cause,
            "hr": self.headroom,
            "rows": list(self.accepted_rows) if self.accepted_rows is not None else None,
        }


def damaged_summary(index: int, reason: str) -> CycleSummary:
    """The place of cycle ``index`` in a session whose recording could not give it back (``reason`` says why)."""
    return CycleSummary(index=index, mode="", n_verified=0, n_accepted=0, committed_ids=(), committed_kinds=(),
                        cycle_ms=0.0, spine_broke_at=None, spine_continued=False, damaged=reason)


def summary_from_row(index: int, mode: str, n_verified: int, n_accepted: int, committed_ids: list[int],
                     state: dict[str, Any], timings_ms: dict[str, float], extra: dict[str, Any],
                     cache_len: int | None = None) -> CycleSummary:
    """Rebuild a summary from a recording row (``cache_len``: its column, where it holds a count) and its stored
    ``to_json`` part."""
    return CycleSummary(
        index=index, mode=mode, n_verified=n_verified, n_accepted=n_accepted,
        committed_ids=tuple(committed_ids), committed_kinds=tuple(extra["kinds"]),
        cycle_ms=float(sum(timings_ms.values())), spine_broke_at=extra["broke"], spine_continued=bool(extra["cont"]),
        by_source={k: (v[0], v[1]) for k, v in extra["src"].items()},
        depth_rank=extra["dr"],
        state=state,
        frontier=extra.get("fr"),
        cause=str(extra.get("ca") or ""),
        headroom=dict(extra.get("hr") or {}),
        timings_ms=dict(timings_ms),
        accepted_rows=_rows(extra.get("rows")),
        cache_len=cache_len if type(cache_len) is int and cache_len >= 0 else None,
    )


def _rows(value: Any) -> tuple[int, ...] | None:
    """A stored ``rows`` list, or None when absent or not a list of non-negative ints (never fails a read)."""
    if type(value) is not list or any(type(v) is not int or v < 0 for v in value):
        return None
    return tuple(value)


def summarize(record: CycleRecord) -> CycleSummary:
    """Compute a cycle's summary from its record."""
    nodes = record.node_by_id
    accepted = set(record.accepted_path)
    verified = [n for n in record.nodes if n.verified and n.parent >= 0]

    by_source: dict[str, list[int]] = {}
    for n in verified:
        c = by_source.setdefault(n.source, [0, 0])
        c[0] += 1
        c[1] += n.id in accepted

    # Sibling rank follows verify order, which puts higher-priority and better-scored children first.
    order = {nid: i for i, nid in enumerate(record.verify_order)}
    children: dict[int, list[int]] = {}
    for n in verified:
        children.setdefault(n.parent, []).append(n.id)
    by_depth_rank: dict[tuple[int, int], list[int]] = {}
    for kids in children.values():
        for rank, nid in enumerate(sorted(kids, key=lambda k: order.get(k, k))):
            c = by_depth_rank.setdefault((nodes[nid].depth, rank), [0, 0])
            c[0] += 1
            c[1] += nid in accepted

    stop = record.accepted_path[-1] if record.accepted_path else record.verify_order[0]
    why = stop_cause(record)
    spine = analyze_spine(record)
    n_committed = len(record.committed_ids)
    kinds = [nodes[a].source for a in record.accepted_path][:n_committed]
    if len(kinds) < n_committed:
        kinds.append(AR if record.mode == "ar" else BONUS)
    return CycleSummary(
        index=record.index, mode=record.mode, n_verified=record.n_verified, n_accepted=record.n_accepted,
        committed_ids=tuple(record.committed_ids), committed_kinds=tuple(kinds),
        cycle_ms=float(sum(record.timings_ms.values())), spine_broke_at=spine.broke_at,
        spine_continued=spine.continued,
        by_source={k: (v[0], v[1]) for k, v in by_source.items()},
        depth_rank=[[d, r, v[0], v[1]] for (d, r), v in by_depth_rank.items()],
        state=dict(record.state),
        frontier=len(children.get(stop, ())),
        cause=why.kind,
        headroom=why.headroom,
        timings_ms=dict(record.timings_ms),
        accepted_rows=tuple(order[a] for a in record.accepted_path if a in order),
        cache_len=record.cache_len,
    )


def accepted_by_path(summaries: Iterable[CycleSummary]) -> dict[str, int]:
    """Accepted draft tokens (bonus excluded) per Goose path category, over cycles that recorded one. Section 5.4
    reports spine continuations at 12-44% of accepted tokens (Llama-3-8B)."""
    out: dict[str, int] = {}
    for s in summaries:
        if s.path and s.path != "none":
            out[s.path] = out.get(s.path, 0) + s.n_accepted
    return out

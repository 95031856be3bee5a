"""A cycle's spine and where it broke, worked out once from its record.

A spine is the chain of context-copied tokens hanging from the root: Goose's ``spine`` nodes or PLD's ``ngram``
nodes. The summary stores where it broke; the draft tree marks the break; the spine panel explains it. All three
read the same :class:`SpineAnalysis`, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz_core.cycle_state import ContextMatchFacts
from specviz_core.records import CycleRecord

#: Sources whose chain is a "spine": a break in it is what the spine-break filter finds.
SPINE_SOURCES = ("spine", "ngram")

TopK = tuple[tuple[int, float], ...]


@dataclass(frozen=True, slots=True)
class SpineMatch:
    """Where the drafter copied the spine from (``state["match"]``). Spans are context token indices, end
    exclusive, where the context is the prompt followed by every token committed before the cycle."""

    ngram: int
    """Length of the context suffix that was found earlier in the context (tokens)."""
    matched: tuple[int, int]
    """The earlier occurrence of that suffix."""
    copied: tuple[int, int]
    """The tokens that followed it, copied as the spine."""


@dataclass(frozen=True, slots=True)
class SpineAnalysis:
    """One cycle's spine: its nodes, how much of it the target took, and what happened where it broke."""

    chain: tuple[int, ...]
    """Node ids of the spine, root's child first, in depth order (verified nodes only); empty if there is none."""
    n_accepted: int
    """Spine tokens the target accepted (a prefix of ``chain``)."""
    broken: int | None
    """The first rejected spine node's id; None if the spine held or there is none."""
    broke_at: int | None
    """That node's depth (tokens from the root)."""
    wanted: int
    """The token the target chose at the broken node's position; -1 if the spine did not break."""
    topk: TopK
    """The target's top-5 (token, probability) at that position: the verify row of the broken node's parent."""
    proposed_prob: float | None
    """The target's probability of the rejected spine token; None where unknown (not in its top-5)."""
    wanted_prob: float | None
    """The target's probability of ``wanted`` there; None where it is not in the top-5."""
    continued: bool
    """After the break, an accepted non-spine node hangs off a spine node: a branch carried the spine on."""
    after: tuple[int, ...]
    """Accepted node ids past the spine's accepted prefix, in depth order (what carried the path on, if anything)."""
    siblings: tuple[int, ...]
    """The other candidates at the broken position (the broken node's siblings, gated ones included)."""
    wanted_gated: bool
    """A gated sibling proposed ``wanted`` but was cut before verification."""
    match: SpineMatch | None
    """Where the spine was copied from, if the drafter recorded it."""

    @property
    def broke(self) -> bool:
        return self.broken is not None


def topk_after(record: CycleRecord, node_id: int) -> TopK:
    """The target's top-5 (token, probability) after ``node_id``: its verify row (empty if it was not verified)."""
    try:
        return record.target_topk[record.verify_order.index(node_id)]
    except (ValueError, IndexError):
        return ()


def spine_match(state: dict) -> SpineMatch | None:
    """The recorded context match (``state["match"]``), or None."""
    m = ContextMatchFacts.read(state).match or None
    if not m:
        return None
    ms, me = (int(x) for x in m["match_span"])
    cs, ce = (int(x) for x in m["copy_span"])
    return SpineMatch(int(m["ngram"]), (ms, me), (cs, ce))


def analyze_spine(record: CycleRecord) -> SpineAnalysis:
    """Follow the spine from the root and describe its first rejected node."""
    nodes = record.node_by_id
    accepted = set(record.accepted_path)
    spine_child = {n.parent: n for n in record.nodes if n.verified and n.parent >= 0 and n.source in SPINE_SOURCES}
    chain: list[int] = []
    node = spine_child.get(0)
    while node is not None:
        chain.append(node.id)
        node = spine_child.get(node.id)
    broken = next((nodes[i] for i in chain if i not in accepted), None)
    n_accepted = sum(1 for i in chain if i in accepted)
    after = record.accepted_path[n_accepted:]
    if broken is None:
        return SpineAnalysis(tuple(chain), n_accepted, None, None, -1, (), None, None, False, after, (), False,
                             spine_match(record.state))

    parent = nodes.get(broken.parent)
    top = topk_after(record, broken.parent)
    probs = dict(top)
    wanted = parent.target_token if parent is not None and parent.target_token >= 0 else (top[0][0] if top else -1)
    siblings = tuple(n for n in record.nodes if n.parent == broken.parent and n.id != broken.id)
    continued = any(nodes[a].source not in SPINE_SOURCES and nodes[nodes[a].parent].source in SPINE_SOURCES
                    for a in accepted if nodes[a].parent > 0)
    return SpineAnalysis(
        chain=tuple(chain), n_accepted=n_accepted, broken=broken.id, broke_at=broken.depth, wanted=wanted, topk=top,
        proposed_prob=broken.target_prob if broken.target_prob is not None else probs.get(broken.token),
        wanted_prob=probs.get(wanted), continued=continued, after=after,
        siblings=tuple(n.id for n in siblings), wanted_gated=any(n.gated and n.token == wanted for n in siblings),
        match=spine_match(record.state))

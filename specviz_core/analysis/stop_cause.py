"""Why a cycle stopped, for every method, from recorded data alone.

Every cycle stops at one node: the last accepted node, or the root when nothing was accepted. There the target
wanted a token w (the bonus token) that the tree did not hold as a verified child. Exactly one cause is given:

- ``gated``: w was a candidate there but a confidence gate cut it (TALON's mu, Goose's ``min_score``, an
  assistant's confidence threshold): its score against the threshold;
- ``budget``: w was a candidate there but the node budget or a depth limit cut it (EAGLE-2's reranking on path
  probability: ``rerank``), or the tree ended at that node (a leaf the method never expanded: its size or depth
  limit, or, for ``eagle``, a node outside the top-k of its level);
- ``not_drafted``: a source offered w there at rank r, but the tree's width at that node was smaller;
- ``not_offered``: no source offered w there (no n-gram match, a table row without w, a draft model's top
  candidates without w): what each source did offer;
- ``rejected`` (sampling only): w was drafted there and the sampling walk rejected it (the draft's probability
  of it exceeded the target's), then drew it again from the residual.

The candidate lists come from the drafters (``state["offers"]``, recorded at the root and the accepted nodes:
:meth:`~specviz_core.tree.DraftTree.offer`); transformers' assisted generation says why its chain ended
(``state["draft_stop"]``). A method that records no lists (STAND) is judged from the tree alone: a gated child
holding w, else a leaf (``budget``), else ``not_offered``.

**Headroom** (hindsight, within the cycle): the tokens the cycle committed are the target's own path from the
root (accepted tokens, then w). With unlimited width, a source would have supplied the longest run of those
tokens it offered at each node along the path; :attr:`StopCause.headroom` gives that run per source, and
``"*"`` for all sources together (accepted tokens plus one when some source offered w). It is never below
what the cycle accepted from that source. It looks one token past the stop only: the target's choice after w
is not known to this cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specviz_core.cycle_state import AssistedFacts, EngineFacts, GooseFacts
from specviz_core.records import CycleRecord

#: Cause codes, with a short label for charts, filters and menus.
CAUSES: dict[str, str] = {
    "gated": "gated",
    "budget": "cut by the budget",
    "not_drafted": "offered, not drafted",
    "not_offered": "no source offered it",
    "rejected": "drafted, rejected by sampling",
}

#: transformers' reasons a draft chain ended (``state["draft_stop"]``) -> cause.
_HF_STOPS = {"confidence": "gated", "num_assistant_tokens": "budget", "max_length": "budget", "num_tokens": "budget"}


@dataclass(frozen=True)
class SourceOffer:
    """What one source offered at the stop node, best first."""

    source: str
    tokens: tuple[int, ...]
    scores: tuple[float, ...]
    fates: tuple[str, ...]
    threshold: float | None = None
    note: str = ""
    """The drafter's word on the list: ``rerank`` (its ``budget`` cut is EAGLE-2's reranking, ``threshold`` the cut
    line), or why nothing was drafted below the node."""

    @property
    def width(self) -> int:
        """Candidates of this source drafted (verified) at the node."""
        return sum(1 for f in self.fates if f == "drafted")


@dataclass(frozen=True)
class StopCause:
    """Why one cycle stopped where it did."""

    kind: str
    """A key of :data:`CAUSES`."""
    node: int
    """Node id where the walk stopped (0: the root)."""
    depth: int
    wanted: int
    """The token the target chose there (the bonus token)."""
    wanted_prob: float | None
    """The target's probability of it there (None when it is not in the recorded top-5)."""
    topk: tuple[tuple[int, float], ...]
    """The target's top-5 there."""
    source: str | None = None
    """The source that offered w (gated, budget, not_drafted)."""
    rank: int | None = None
    """w's rank (1 = best) in that source's list."""
    width: int | None = None
    """Candidates that source drafted at the node."""
    score: float | None = None
    threshold: float | None = None
    offers: tuple[SourceOffer, ...] = ()
    detail: str = ""
    """A fact that is not in the fields (the tree ended at this leaf; a draft-stop sentence)."""
    chain_end: bool = False
    """transformers' assistant stopped its chain at this node (``detail`` says why): it proposed nothing after
    it, so no claim is made about w."""
    headroom: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return CAUSES[self.kind]

    @property
    def reranked(self) -> bool:
        """EAGLE-2's reranking on path probability cut w (the offer's ``budget`` fate is the reranking's)."""
        o = next((o for o in self.offers if o.source == self.source), None)
        return o is not None and o.note == "rerank" and not self.cut_after_drafting

    @property
    def cut_after_drafting(self) -> bool:
        """w was drafted (its offer's fate says so) and then not verified: ``budget=auto`` cut it, not the method."""
        o = next((o for o in self.offers if o.source == self.source), None)
        return o is not None and self.rank is not None and o.fates[self.rank - 1:self.rank] == ("drafted",)

    def to_json(self) -> dict[str, Any]:
        """The cause as plain JSON (the export's ``stop_cause``, ``docs/record-format.md``)."""
        return {
            "kind": self.kind, "node": self.node, "depth": self.depth, "wanted": self.wanted,
            "wanted_prob": self.wanted_prob, "source": self.source, "rank": self.rank, "width": self.width,
            "score": self.score, "threshold": self.threshold, "chain_end": self.chain_end, "detail": self.detail,
            "offers": [{"source": o.source, "tokens": list(o.tokens), "scores": list(o.scores), "fates": list(o.fates),
                        "threshold": o.threshold, **({"note": o.note} if o.note else {})} for o in self.offers],
            "headroom": dict(self.headroom),
        }

    def sentence(self, text: Callable[[int], str] = str) -> str:
        """The cause in one plain sentence; ``text`` renders a token."""
        p = f" (p {self.wanted_prob:.2f})" if self.wanted_prob is not None else ""
        where = "at the root" if self.node == 0 else f"after node {self.node} (depth {self.depth})"
        head = f"The target wanted {text(self.wanted)}{p} {where}"
        src = f"the {self.source} source" if self.source else "a source"
        rank = f" at rank {self.rank}" if self.rank else ""
        if self.chain_end:
            return f"{head}; the assistant's chain ended there, so nothing was drafted after it:" + _tail(self.detail)
        if self.kind == "gated":
            sc = f" (score {self.score:.3g}" + (f", below the threshold {self.threshold:.3g})"
                                                 if self.threshold is not None else ")") if self.score is not None else ""
            return f"{head}; {src} had it{rank} but the confidence gate cut it{sc}." + _tail(self.detail)
        if self.kind == "budget":
            if self.source is None:
                return f"{head}; the tree ended there: {self.detail or 'the budget or depth limit stopped it'}."
            if self.reranked and self.score is not None and self.threshold is not None:
                return (f"{head}; {src} offered it{rank} with path probability {self.score:.3g}, but the reranking "
                        f"kept only the budget's most probable candidates, down to {self.threshold:.3g}."
                        + _tail(self.detail))
            cutter = "budget=auto" if self.cut_after_drafting else "the budget or depth limit"
            return f"{head}; {src} offered it{rank}, but {cutter} cut it." + _tail(self.detail)
        if self.kind == "not_drafted":
            return (f"{head}; {src} offered it{rank}, but the tree drafted only {self.width} candidate"
                    f"{'' if self.width == 1 else 's'} of that source there (its width)." + _tail(self.detail))
        if self.kind == "rejected":
            return f"{head}; it was drafted there, but the sampling walk rejected it and then drew it again."
        offered = "; ".join(f"{o.source}: {', '.join(text(t) for t in o.tokens[:5]) or 'nothing'}" for o in self.offers)
        return (f"{head}; no source offered it" + (f" ({offered})" if offered else "") + "."
                + _tail(self.detail))


def _tail(detail: str) -> str:
    return f" {detail[:1].upper()}{detail[1:].rstrip('.')}." if detail else ""


def offers_at(record: CycleRecord, node: int) -> tuple[SourceOffer, ...] | None:
    """The recorded candidate lists below ``node``; None when the method recorded none there."""
    raw = EngineFacts.read(record.state).offers
    if not isinstance(raw, dict) or str(node) not in raw:
        return None
    out = []
    for o in raw[str(node)]:
        out.append(SourceOffer(str(o.get("source", "")), tuple(int(t) for t in o.get("tokens", ())),
                               tuple(float(s) for s in o.get("scores", ())), tuple(str(f) for f in o.get("fates", ())),
                               o.get("threshold"), str(o.get("note", "") or "")))
    return tuple(out)


def stop_cause(record: CycleRecord) -> StopCause:
    """The one cause of ``record``'s stop (see the module's text)."""
    nodes = record.node_by_id
    stop = record.accepted_path[-1] if record.accepted_path else 0
    w = int(record.bonus_token)
    row = record.verify_order.index(stop) if stop in record.verify_order else 0
    topk = tuple(record.target_topk[row]) if row < len(record.target_topk) else ()
    prob = next((p for t, p in topk if t == w), None)
    base: dict[str, Any] = dict(node=stop, depth=nodes[stop].depth if stop in nodes else 0, wanted=w, wanted_prob=prob,
                                topk=topk)
    kids = [n for n in record.nodes if n.parent == stop]
    offers = offers_at(record, stop)
    base["headroom"] = headroom(record, stop, w)
    hit = None
    for o in offers or ():
        if w in o.tokens:
            i = o.tokens.index(w)
            hit = (o, i)
            break
    gated_kid = next((n for n in kids if n.gated and n.token == w), None)
    if any(n.verified and n.token == w for n in kids):
        o, i = hit if hit is not None else (None, None)
        return StopCause("rejected", **base, source=o.source if o else None, rank=None if i is None else i + 1,
                         offers=offers or ())
    if hit is not None:
        o, i = hit
        fate = o.fates[i]
        info = dict(source=o.source, rank=i + 1, width=o.width, score=o.scores[i], threshold=o.threshold, offers=offers)
        if fate == "gate":
            return StopCause("gated", **base, **info)
        if fate == "width":
            return StopCause("not_drafted", **base, **info)
        return StopCause("budget", **base, **info)  # "drafted" and not verified: budget=auto cut it after drafting
    if gated_kid is not None:
        rerank = next((o for o in offers or () if o.note == "rerank" and o.source == gated_kid.source), None)
        if rerank is not None:  # a candidate EAGLE-2's reranking cut, past the list's recorded length
            return StopCause("budget", **base, source=gated_kid.source, score=gated_kid.score,
                             threshold=rerank.threshold, offers=offers or ())
        return StopCause("gated", **base, source=gated_kid.source, score=gated_kid.score, offers=offers or ())
    hf = AssistedFacts.read(record.state)
    if hf.draft_stop and not any(n.verified for n in kids):  # transformers' chain ended here
        kind = _HF_STOPS.get(str(hf.draft_stop), "not_offered")
        thr = hf.assistant_confidence_threshold if kind == "gated" else None
        return StopCause(kind, **base, threshold=thr, detail=str(hf.draft_stop_text or ""),
                         offers=offers or (), chain_end=True)
    leaf_note = next((o.note for o in offers or () if o.note and o.note != "rerank" and not o.tokens), None)
    if leaf_note and not kids:  # the drafter says why it drafted nothing below this node
        return StopCause("budget", **base, detail=leaf_note)
    if offers is None and not kids and record.mode != "ar":
        return StopCause("budget", **base,
                         detail="the method's node budget or depth limit drafted nothing below this leaf")
    if offers is None and record.mode == "ar":
        return StopCause("not_offered", **base, detail="Nothing was drafted this cycle.")
    shown = offers if offers is not None else _drafted_as_offers(kids)
    return StopCause("not_offered", **base, offers=shown)


def ar_reason(record: CycleRecord, no_draft_reason: str) -> str:
    """Why an AR cycle verified nothing but its root: the method drafted nothing (``no_draft_reason``, the method's
    own words), or it drafted candidates and ``budget=auto`` or a gate cut every one."""
    drafted = sum(1 for n in record.nodes if n.id > 0)
    if not drafted:
        return no_draft_reason
    budget = EngineFacts.read(record.state).budget
    if isinstance(budget, dict) and budget.get("chosen") == 0 and budget.get("candidates"):
        n = drafted
        return (f"budget=auto verified none of the {n} drafted node{'' if n == 1 else 's'}: on this device none "
                "was expected to pay for its row")
    return f"{drafted} candidate{'' if drafted == 1 else 's'} drafted, every one cut by the gate or the budget"


def _drafted_as_offers(kids: list) -> tuple[SourceOffer, ...]:
    """What was drafted below a node, per source, when the method recorded no candidate list."""
    by: dict[str, list] = {}
    for n in kids:
        if n.verified:
            by.setdefault(n.source, []).append(n)
    return tuple(SourceOffer(s, tuple(n.token for n in ns), tuple(n.score for n in ns), ("drafted",) * len(ns))
                 for s, ns in by.items())


def headroom(record: CycleRecord, stop: int, wanted: int) -> dict[str, int]:
    """Per source, the longest run of the target's path tokens (accepted, then ``wanted``) that the source offered
    at each node along it, width unlimited; ``"*"``: all sources together. See the module's text."""
    path = [0, *record.accepted_path]
    tokens = [record.node_by_id[n].token for n in record.accepted_path] + [wanted]
    nodes = record.node_by_id
    offered: list[set[str]] = []  # per step i: sources that offered tokens[i] below path[i]
    for i, parent in enumerate(path):
        srcs = {o.source for o in (offers_at(record, parent) or ()) if tokens[i] in o.tokens}
        if i < len(record.accepted_path):
            srcs.add(nodes[path[i + 1]].source)  # it was drafted, so its source offered it
        offered.append(srcs)
    out: dict[str, int] = {}
    for s in sorted(set().union(*offered)):
        best = run = 0
        for srcs in offered:
            run = run + 1 if s in srcs else 0
            best = max(best, run)
        out[s] = best
    out["*"] = len(record.accepted_path) + (1 if offered[-1] else 0)
    return out


_ROUTES = {
    "prefill": "the first token comes from the prompt's last row, with no draft (the official decoder's prefill)",
    "spine_tree": "a spine tree: the context match's chain as the spine, adjacency-table branches around it",
    "branch_tree": "a branch tree: no context match, branches from the adjacency table alone",
    "chain": "the match verified as a chain (the table had no successors for the root)",
    "bypass": "the chain alone: confidence gave it the whole budget",
    "ar": "one AR step: no match and no table successors (or all below min_score)",
}
_PATHS = {"pure_spine": "spine tokens only", "spine_continuation": "spine, then a branch where it broke",
          "pure_branch": "branch tokens only"}


def method_notes(state: dict[str, Any], rows: int | None = None, drafted: int | None = None) -> list[str]:
    """What a cycle's method state says about why it drafted what it did, in plain sentences: Goose's route,
    confidence, budget and path; transformers' reason for ending the draft and its schedule. ``rows``: the rows the
    cycle verified (root included), for the sentence on a padded forward; ``drafted``: the draft nodes the cycle's tree
    holds (verified and gated), which the budget's sentence counts against."""
    e, g, a = EngineFacts.read(state), GooseFacts.read(state), AssistedFacts.read(state)
    out = []
    if e.from_prefill:
        out.append("No forward of its own: the token comes from the prefill's last row (the prompt ran in one "
                   "forward, as generate and the official decoders run it).")
    if e.prefill_in_forward:
        n = int(e.prefill_in_forward)
        out.append(f"This forward also ran the prompt's {n} token{'s' if n != 1 else ''} before the root: "
                   "transformers' generate has no separate prefill.")
    # nothing drafted: nothing to choose from, unless budget=auto chose to draft nothing (a plain cycle)
    if isinstance(e.budget, dict) and (e.budget.get("candidates") or e.budget.get("plain")):
        out.append(budget_note(e.budget, drafted))
    if e.padded_to:
        out.append(padding_note(state, rows))
    if g.route in _ROUTES:
        bits = [f"Route: {_ROUTES[g.route]}."]
        if g.confidence is not None and g.route not in ("prefill", "ar"):
            c = f"Match confidence {float(g.confidence):.2f}"
            if g.chain_extended:
                c += (f"; above 0.6, so the chain grew by repeated matching from {_or_unknown(g.match_len)} to "
                      f"{_or_unknown(g.chain_len)} tokens")
            if g.node_budget is not None:
                c += f"; node budget {g.node_budget} (root included)"
            bits.append(c + ".")
        if g.spine_ratio is not None and g.spine_len:
            binding = " It cut the chain." if g.ratio_binding else ""
            tier = g.spine_ratio_tier
            bits.append(f"Spine ratio r = {float(g.spine_ratio):.2f}"
                        + (f" (tier {float(tier):.2f})" if tier is not None else "")
                        + f": {g.spine_len} spine nodes.{binding}")
        if g.path in _PATHS:
            won = g.continuation_tokens or 0
            bits.append(f"Accepted path: {_PATHS[g.path]}"
                        + (f" ({won} branch token{'s' if won != 1 else ''} won after the break)." if won else "."))
        out.append(" ".join(bits))
    if a.num_assistant_tokens is not None:  # why the chain ended is the stop cause's own sentence
        s = f"Assistant schedule: num_assistant_tokens {a.num_assistant_tokens}"
        thr = a.assistant_confidence_threshold
        s += f", confidence threshold {float(thr):.2f}" if thr is not None else ""
        nxt = a.num_assistant_tokens_next
        if nxt is not None and nxt != a.num_assistant_tokens:
            s += f"; the schedule moves it to {nxt} for the next cycle"
        out.append(s + ".")
    return out


def _or_unknown(value: Any) -> Any:
    return "?" if value is None else value


def padding_note(state: dict[str, Any], rows: int | None = None) -> str:
    """Why a cycle's forward ran more rows than it verified (its ``state["padded_to"]``; ``rows``: the rows it
    verified, root included), in one sentence."""
    run = int(EngineFacts.read(state).padded_to or 0)
    if rows:
        pad = run - rows
        return (f"The forward ran {run} rows, {pad} of them padding: on this device a forward of {run} rows costs "
                f"less than one of {rows} (the verify-cost curve). The padding rows see only themselves and no node "
                "sees them.")
    return (f"The forward ran {run} rows, some of them padding: on this device that costs less than the verified rows "
            "alone (the verify-cost curve). The padding rows see only themselves and no node sees them.")


def _tokens_left(n: int) -> str:
    return "the last token" if n == 1 else f"the {n} tokens left"


def budget_note(b: dict[str, Any], drafted: int | None = None) -> str:
    """``budget=auto``'s choice for a cycle (its ``state["budget"]``), in one sentence; ``drafted``: the draft nodes its
    tree holds, verified and gated (what the tree shows; the candidates the budget chose among where not given)."""
    chosen, paper = b.get("chosen"), b.get("paper")
    candidates = drafted if drafted is not None else b.get("candidates")
    paper_s = f"the paper's {paper}" if paper else "the method's own"
    if "measuring" in b:
        done, total = b["measuring"]
        return (f"Budget: {paper_s} ({chosen} draft nodes verified) while SpecViz measures this device's verify cost "
                f"between cycles ({done} of {total} steps); budget=auto chooses once it is known.")
    if b.get("plain"):
        gain = b.get("gain_vs_ar")
        how = f" (recent drafted cycles gave {gain:.2f}x a plain cycle's tokens per ms)" \
            if isinstance(gain, (int, float)) else ""
        if isinstance(b.get("catch_up"), int):
            ms = b.get("catch_up_ms")
            cost = f" (about {ms:.0f} ms)" if isinstance(ms, (int, float)) and not b.get("prior") else ""
            left = f" in {_tokens_left(b['room'])}" if isinstance(b.get("room"), int) else ""
            return (f"Budget: a plain cycle (budget=auto): nothing was drafted, because the draft head or model would "
                    f"first have run over the {b['catch_up']} tokens it has not seen{cost}, more than drafts could "
                    f"save{left}.")
        if isinstance(b.get("try_ms"), (int, float)):
            cost = f" (about {b['try_ms']:.0f} ms)" if not b.get("prior") else ""
            left = f" in {_tokens_left(b['room'])}" if isinstance(b.get("room"), int) else ""
            odds = f", at the odds its tries have shown (one in {b['waited']})" if isinstance(b.get("waited"), int) \
                else ""
            return (f"Budget: a plain cycle (budget=auto): nothing was drafted, because the session's drafts have not "
                    f"paid for their drafting{how}, and trying one again{cost} would cost more than drafts could "
                    f"save{left}{odds}.")
        if b.get("remembered"):
            how = f" ({gain:.2f}x a plain cycle's tokens per ms)" if isinstance(gain, (int, float)) else ""
            return (f"Budget: a plain cycle (budget=auto): nothing was drafted, because this drafter's drafts did not "
                    f"pay for their drafting in the last session on this device{how}; this session tries a draft "
                    f"after as many plain cycles as that one waited between its tries.")
        return (f"Budget: a plain cycle (budget=auto): nothing was drafted, because the session's recent drafts did "
                f"not pay for their drafting{how}; a draft is tried again after a few plain cycles.")
    if b.get("flat"):
        return (f"Budget: {paper_s} ({chosen} draft nodes verified): on this device a bigger tree costs next to "
                "nothing more (a flat verify cost), so budget=auto keeps the method's own tree.")
    gain = b.get("gain_vs_ar")
    if b.get("prior"):  # priced in units of a 1-row forward, by the device's prior: no ms to say
        tail = f"; expected {b['expected_tokens']:.2f} tokens" if "expected_tokens" in b else ""
        tail += f", {gain:.2f}x an AR step" if isinstance(gain, (int, float)) else ""
        return (f"Budget chosen for this device (budget=auto) from a cautious prior, its verify cost not measured "
                f"yet: {chosen} of {candidates} drafted nodes verified (the paper's budget: {paper}){tail}.")
    tail = f"; expected {b['expected_tokens']:.2f} tokens in {b['expected_ms']:.0f} ms" if "expected_tokens" in b else ""
    if isinstance(b.get("draft_ms"), (int, float)) and tail:
        tail += f" (drafting {b['draft_ms']:.0f} ms of it, priced)"
    tail += f", {gain:.2f}x an AR step" if isinstance(gain, (int, float)) else ""
    calibration = b.get("calibration")
    if isinstance(calibration, (int, float)) and abs(calibration - 1.0) >= 0.05:
        tail += (f" (the session's earlier trees were accepted at {calibration:.2f}x what they were expected to be, "
                 "and this expectation is scaled so)")
    paper_note = f"the paper's budget: {paper}" if paper else "the method alone verifies all"
    return (f"Budget chosen for this device (budget=auto): {chosen} of {candidates} drafted nodes verified "
            f"({paper_note}){tail}.")

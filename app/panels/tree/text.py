"""What the draft tree says in words: node and bonus tooltips, the spine-break callout, the legend."""

from __future__ import annotations

from specviz_app.theme import ACCEPTED, GATED, REJECTED, SOURCE_COLORS, SOURCE_LABELS
from specviz_core.analysis.spine import SpineAnalysis, topk_after
from specviz_core.cycle_state import TalonFacts
from specviz_core.records import CycleRecord, Node
from specviz_core.runtime.vocab import TokenText

HELP = ("Wheel: zoom · drag: pan · double-click: fit · click a node: select it · click \"+N gated\": open it · "
        "Enter (with the focus): enter the tree, then arrows move along the edges, Enter selects, Esc leaves")


def _p(p: float | None) -> str:
    return "–" if p is None else f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def legend_sources(rec: CycleRecord) -> list[str]:
    """The node sources in ``rec``, in the theme's order."""
    order = list(SOURCE_COLORS)
    return sorted({n.source for n in rec.nodes}, key=lambda s: order.index(s) if s in order else len(order))


def legend_html(rec: CycleRecord, spine_broke: bool) -> str:
    parts = [f"<span style='color:{SOURCE_COLORS.get(s, '#7f8c8d')}'>■</span>&nbsp;{s}" for s in legend_sources(rec)]
    parts.append(f"<span style='color:{ACCEPTED}'>━</span>&nbsp;accepted")
    parts.append(f"<span style='color:{SOURCE_COLORS['bonus']}'>★</span>&nbsp;bonus")
    if any(n.gated for n in rec.nodes):
        cut = TalonFacts.read(rec.state).rerank_cut
        parts.append(f"<span style='color:{GATED}'>┅</span>&nbsp;gated" + (
            f" (the reranking kept path p ≥ {_p(cut)})" if cut is not None else ""))
    if spine_broke:
        parts.append(f"<span style='color:{REJECTED}'>▢</span>&nbsp;spine broke")
    return "&nbsp;&nbsp; ".join(parts)


def legend_tip(rec: CycleRecord) -> str:
    return "\n".join([f"{s}: {SOURCE_LABELS.get(s, s)}" for s in legend_sources(rec)] + [HELP])


def callout_text(spine: SpineAnalysis, broken: Node, vocab: TokenText) -> str:
    """The break callout: the rejected spine token, what the target wanted there, and its top-5."""
    lines = [f"✗ spine broke at depth {broken.depth}: proposed '{vocab.label(broken.token)}' "
             f"(p {_p(spine.proposed_prob)})",
             f"target wanted '{vocab.label(spine.wanted)}' (p {_p(spine.wanted_prob)})"]
    if spine.topk:
        lines.append("top-5: " + "   ".join(f"{vocab.label(t)} {p:.2f}" for t, p in spine.topk))
    return "\n".join(lines)


def node_tip(n: Node, vocab: TokenText, broken: bool, path_scores: bool = False) -> str:
    """A node's hover text; ``broken``: it is the first rejected spine node; ``path_scores``: its score is its path
    probability (TALON and the EAGLE trees)."""
    status = ("gated (never verified)" if n.gated else "verified, accepted" if n.accepted
              else "verified, rejected" if n.verified else "not verified")
    lines = [f"node {n.id} · depth {n.depth} · {SOURCE_LABELS.get(n.source, n.source)}",
             f"token '{vocab.label(n.token, 40)}' (id {n.token})",
             f"{'path probability' if path_scores else 'score'} {_p(n.score) if path_scores else f'{n.score:.3f}'}"
             f" · target p {_p(n.target_prob)}", status]
    if n.parent < 0:
        lines[-1] = "root: the last committed token (accepted)"
    if n.target_token >= 0:
        lines.append(f"target's next token: '{vocab.label(n.target_token, 40)}'")
    if broken:
        lines.append("the first rejected spine token")
    return "\n".join(lines)


def marker_tip(hidden: list[Node], vocab: TokenText, rerank_cut: float | None = None) -> str:
    """The hover text of a "+N gated" box: the gated candidates it stands for, best first; ``rerank_cut``: the
    path probability of the last candidate EAGLE-2's reranking kept (what cut these)."""
    best = sorted(hidden, key=lambda n: -n.score)
    names = ", ".join(f"'{vocab.label(n.token)}' {_p(n.score)}" for n in best[:8])
    more = f", … {len(best) - 8} more" if len(best) > 8 else ""
    why = (f"cut by the reranking: path probability below {_p(rerank_cut)}, the last one the budget kept"
           if rerank_cut is not None else "cut by the confidence gate or the budget")
    return f"{len(hidden)} gated candidates ({why}, never verified)\n{names}{more}\nclick: show them"


def bonus_tip(rec: CycleRecord, last: Node, vocab: TokenText) -> str:
    """The bonus token's hover text; ``last`` is the last accepted node (or the root)."""
    top = dict(topk_after(rec, last.id))
    return (f"bonus token '{vocab.label(rec.bonus_token, 40)}' (id {rec.bonus_token})\n"
            f"the target's own token after node {last.id}, the last accepted one · target p "
            f"{_p(top.get(rec.bonus_token))}")


def alignment_tip(alignment: dict, depth: int) -> str:
    """Universal decoding (hf_universal): which assistant tokens the chain's target token at ``depth`` was re-encoded
    from, then the whole draft in both tokenizations; "" where the record has no such pairing for it."""
    try:
        t_pieces, a_pieces = alignment["target_pieces"], alignment["assistant_pieces"]
        pairs, a_ids = alignment["target_to_assistant"], alignment["assistant_tokens"]
        k = depth - 1
        if not 0 <= k < len(t_pieces):
            return ""
        mine = ", ".join(f"{a_pieces[i]!r} ({a_ids[i]})" for i in pairs[k]) or "none"
        lines = [f"re-encoded from the assistant's tokens: {mine}",
                 "the draft in both tokenizations (target ← assistant):"]
        for j, piece in enumerate(t_pieces[:24]):
            mark = "▶" if j == k else " "
            lines.append(f"{mark} {piece!r} ← {' '.join(repr(a_pieces[i]) for i in pairs[j]) or '–'}")
        if len(t_pieces) > 24:
            lines.append(f"  … {len(t_pieces) - 24} more")
        if not alignment.get("text_agrees", True):
            lines.append("the two texts differ: the pairing is approximate")
        return "\n".join(lines)
    except (KeyError, IndexError, TypeError):
        return ""

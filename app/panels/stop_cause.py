"""Why did this cycle stop: a few plain sentences about the current cycle, for every method.

First the cause the core gives (:mod:`specviz_core.analysis.stop_cause`: gated, cut by the budget, offered but not drafted, no source
offered it) with the token the target wanted, then what the method's own state says (Goose's route and confidence,
why transformers' assistant stopped drafting), then the spine's story where there is one. A spine is the chain of context-copied tokens from the root: Goose's ``spine`` nodes or PLD's ``ngram`` nodes. The
panel says where it was copied from (the matched n-gram and the copied span of the context), how much of it the target
accepted, what it proposed where it broke against what the target wanted (with both probabilities and the top-5), and
whether a branch carried the accepted path on. ``span_changed`` tells the output view which context tokens matched.
"""

from __future__ import annotations

import html
import logging
from collections import Counter
from dataclasses import dataclass, field

from PySide6.QtCore import QUrl, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QTextBrowser, QWidget

from specviz_app.panels.base import PanelMixin, placeholder
from specviz_app.theme import REJECTED, SOURCE_COLORS
from specviz_core.analysis.metrics import oracle_runs
from specviz_core.analysis.spine import SpineAnalysis, analyze_spine
from specviz_core.analysis.stop_cause import ar_reason, method_notes, stop_cause
from specviz_core.analysis.timing import CostCurve, cycle_cost, plain_unit
from specviz_core.cycle_state import ContextMatchFacts, TalonFacts
from specviz_core.methods import CARDS, MethodCard
from specviz_core.records import CycleRecord, Node
from specviz_core.viewer.session_model import SessionModel

log = logging.getLogger(__name__)


@dataclass
class Explanation:
    """What the panel says about one cycle: HTML paragraphs and the context spans it refers to."""

    paragraphs: list[str] = field(default_factory=list)
    matched: tuple[int, int] | None = None
    copied: tuple[int, int] | None = None


class StopCausePanel(PanelMixin, QTextBrowser):
    """Why the current cycle stopped where it did, in plain language (its spine, its cut, its time).

    ``matched_span()`` / ``copied_span()``: context token indices ``(start, end)``, end exclusive, of the matched
    n-gram and of the copied tokens, where the context is the prompt ids followed by every token committed before this
    cycle (index < len(prompt_ids) is a prompt token). ``span_changed`` is emitted with ``matched_span()`` (a tuple
    or None) whenever it changes.
    """

    title = "Why did this cycle stop"
    span_changed = Signal(object)

    def __init__(self, model: SessionModel, parent: QWidget | None = None) -> None:
        QTextBrowser.__init__(self, parent)
        self.setOpenLinks(False)
        self.anchorClicked.connect(self._on_link)
        self.setToolTip("Why this cycle stopped where it did: the token the target wanted and why the tree did not "
                        "hold it (gated, cut by the budget, offered but not drafted, or offered by no source),\n"
                        "then the spine's story where there is one (Goose's context-matched chain, PLD's copied "
                        "n-gram).\nClick a node link to select that node in the tree.")
        self._explanation = Explanation()
        self._flat: list[int] = []
        self._cum: list[int] = [0]
        self.connect_model(model)
        self._show()

    # -- model callbacks ----------------------------------------------------------------------------------------------
    def on_session_opened(self, source) -> None:
        self._flat, self._cum = [], [0]
        self._show()

    def on_session_closed(self) -> None:
        self._flat, self._cum = [], [0]
        self._show()

    def on_cycle_changed(self, record: CycleRecord) -> None:
        self._show()

    # -- public -------------------------------------------------------------------------------------------------------
    def matched_span(self) -> tuple[int, int] | None:
        """Context token indices (start, end exclusive) of the n-gram the spine's match was found with."""
        return self._explanation.matched

    def copied_span(self) -> tuple[int, int] | None:
        """Context token indices (start, end exclusive) of the tokens copied as the spine."""
        return self._explanation.copied

    def explanation(self) -> str:
        """The panel's text, plain."""
        return self.toPlainText()

    # -- context ------------------------------------------------------------------------------------------------------
    def context_tokens(self, start: int, end: int) -> list[int]:
        """Context tokens ``start:end`` as the current cycle saw them (prompt, then tokens committed before it)."""
        source, rec = self.model.source, self.model.record
        if source is None or rec is None:
            return []
        summaries = source.summaries()
        while len(self._cum) <= min(rec.index, len(summaries)):  # grows with live sessions, never re-read
            ids = summaries[len(self._cum) - 1].committed_ids
            self._flat.extend(ids)
            self._cum.append(self._cum[-1] + len(ids))
        prompt = source.info.prompt_ids
        n_ctx = len(prompt) + self._cum[min(rec.index, len(self._cum) - 1)]
        out = []
        for i in range(max(0, start), min(end, n_ctx)):
            out.append(prompt[i] if i < len(prompt) else self._flat[i - len(prompt)])
        return out

    # -- text ---------------------------------------------------------------------------------------------------------
    def _show(self) -> None:
        rec = self.model.record
        old = self._explanation.matched
        if rec is None or self.model.source is None:
            self._explanation = Explanation()
            hint = self.palette().color(QPalette.ColorRole.PlaceholderText).name()
            self.setHtml(f"<p style='color:{hint}'>{html.escape(placeholder(self.model))}</p>")
        else:
            try:
                self._explanation = self._explain(rec)
                self.setHtml("".join(f"<p>{p}</p>" for p in self._explanation.paragraphs))
            except Exception as exc:  # noqa: BLE001 - one odd record must not stop the other panels' updates
                log.exception("stop-cause panel: cannot explain cycle %s", rec.index)
                self._explanation = Explanation()
                self.setPlainText(f"Cannot explain this cycle ({type(exc).__name__}: {exc})")
        if self._explanation.matched != old:
            self.span_changed.emit(self._explanation.matched)

    def _explain(self, rec: CycleRecord) -> Explanation:
        info = self.model.source.info
        method = CARDS.get(info.method)
        name = method.display_name if method is not None else info.method
        spine = analyze_spine(rec)
        nodes = rec.node_by_id
        head = f"<b>Cycle {rec.index}</b> · {name} · {rec.mode}"
        out = Explanation()
        why = [c for c in [self._cause(rec, with_topk=not (spine.chain and spine.topk))] if c] + [html.escape(t) for t in method_notes(
            rec.state, rec.n_verified, sum(1 for n in rec.nodes if n.parent >= 0))]
        time_note = self._time_note(rec)
        if time_note:
            why.append(f"<small>{html.escape(time_note)}</small>")
        if not spine.chain:
            out.paragraphs = [f"{head}<br>{self._no_spine(rec, method, name)}", *why]
            return out
        n = len(spine.chain)
        kind = " (PLD's copied n-gram continuation)" if nodes[spine.chain[0]].source == "ngram" else ""
        st = rec.state
        paras = [f"{head} · a spine of {n} token{_s(n)}{kind}", *why]
        match = spine.match
        if match is not None:
            (ms, me), (cs, ce) = out.matched, out.copied = match.matched, match.copied
            where = "the prompt" if ce <= len(info.prompt_ids) else "the output" if cs >= len(info.prompt_ids) \
                else "the prompt and output"
            paras.append(
                f"<b>Where it came from:</b> copied from tokens {cs}–{ce - 1} of {where} "
                f"{self._quote(self.context_tokens(cs, ce))}, after matching the {match.ngram}-gram "
                f"{self._quote(self.context_tokens(ms, me))} at tokens {ms}–{me - 1}: the context ended with the "
                f"same {match.ngram} token{_s(match.ngram)}.")
        n_acc = spine.n_accepted
        if spine.broken is None:
            paras.append(f"<b>Accepted:</b> the target accepted all {n} spine tokens; "
                         f"then it added the bonus token {self._chip(rec.bonus_token, 'bonus')}.")
        else:
            paras.append(f"<b>Accepted:</b> the target accepted {n_acc} of {n} spine tokens.")
            paras.append(self._break(spine, nodes[spine.broken]))
            after = [nodes[a] for a in spine.after]
            if after:
                paras.append(
                    f"<b>Branch:</b> a {after[0].source} continued the accepted path for {len(after)} more "
                    f"token{_s(len(after))} ({' '.join(self._chip(n.token, n.source, n.id) for n in after)}), "
                    f"then the bonus {self._chip(rec.bonus_token, 'bonus')}.")
            else:
                note, k, want = "", len(spine.siblings), spine.wanted
                if spine.wanted_gated:
                    note = f"; a gated candidate had {self._chip(want, 'branch')} but was cut before verification"
                elif k:
                    note = (f"; none of the {k} other candidate{_s(k)} at that position proposed "
                            f"{self._chip(want, None)}")
                paras.append(f"<b>Branch:</b> no branch continued the path{note}. The cycle committed {n_acc} "
                             f"spine token{_s(n_acc)} and the bonus {self._chip(rec.bonus_token, 'bonus')}.")
        if "spine_ratio" in st and rec.mode == "tree":
            ema = f"{st['ema_p_s']:.2f}" + (f" → {st['ema_p_s_after']:.2f}" if "ema_p_s_after" in st else "")
            paras.append(f"<small>Spine share r = {st['spine_ratio']:.2f} of the node budget "
                         f"(EMA of spine acceptance p_s {ema}).</small>")
        out.paragraphs = paras
        return out

    def _time_note(self, rec: CycleRecord) -> str:
        """This cycle's time against plain decoding, in words (:func:`specviz_core.analysis.timing.cycle_cost`), when a
        unit is known: the session model's cost curve or AR baseline (the same the charts use)."""
        src = self.model.source
        if src is None or not rec.timings_ms or src.info.method == "ar":
            return ""
        stored, (tps, note, forward_ms) = self.model.cost_curve, self.model.ar_baseline
        summaries = src.summaries()
        key = (id(src), id(stored), tps, forward_ms, len(summaries))
        if getattr(self, "_unit_key", None) != key:  # the charts' unit, worked out by the same core function
            curve = None
            try:
                curve = CostCurve.from_dict(stored) if stored is not None else None
            except Exception:  # noqa: BLE001 - an unreadable measurement is "not measured"
                pass
            t_ar, _ = plain_unit(summaries, curve, 1000.0 / tps if tps else None, note, forward_ms)
            self._unit_key, self._unit = key, (curve, t_ar)
        curve, t_ar = self._unit
        if t_ar is None:
            return ""
        return "Time: " + cycle_cost(rec, curve, t_ar).sentence

    def _oracle_runs(self) -> list[int | None]:
        """:func:`~specviz_core.analysis.metrics.oracle_runs` of the session, counted again only when it grew."""
        src = self.model.source
        if src is None:
            return []
        summaries = src.summaries()
        key = (id(src), len(summaries))
        if getattr(self, "_runs_key", None) != key:
            self._runs_key, self._runs = key, oracle_runs(summaries)
        return self._runs

    def _cause(self, rec: CycleRecord, with_topk: bool = True) -> str:
        """The core's cause in one sentence, its tokens as chips, the target's top-5 there (unless the spine's
        break paragraph shows them) and the headroom beside what was accepted."""
        cause = stop_cause(rec)
        if rec.mode == "ar" and cause.kind == "not_offered" and not cause.offers:
            return ""  # an AR cycle: the paragraph above says it all
        marks: list[str] = []

        def mark(t: int) -> str:
            marks.append(self._chip(t, None))
            return f"\x00{len(marks) - 1}\x00"

        text = html.escape(cause.sentence(mark))
        for i, chip in enumerate(marks):
            text = text.replace(f"\x00{i}\x00", chip)
        room = cause.headroom.get("*", 0)
        runs = self._oracle_runs()
        run = runs[self.model.index] if 0 <= self.model.index < len(runs) else None
        if with_topk and cause.topk:
            listing = ", ".join(f"{self._chip(t, None)} {p:.3f}" for t, p in cause.topk)
            text += f"<br><small>Target's top-{len(cause.topk)} there: {listing}</small>"
        extra = (f"<br><small>Headroom: with unlimited width this cycle's sources had {room} of the target's tokens "
                 f"in reach; it accepted {rec.n_accepted}.</small>") if room > rec.n_accepted else ""
        if run is not None and run > room:
            extra += (f"<br><small>Had the tree followed the target's path with unlimited width, its sources would "
                      f"have supplied {run} tokens in a row from this root on (through later cycles).</small>")
        return f"<b>Why it stopped ({html.escape(cause.label)}):</b> {text}{extra}"

    def _break(self, spine: SpineAnalysis, broken: Node) -> str:
        listing = ", ".join(f"{self._chip(t, None)} {p:.3f}" for t, p in spine.topk)
        return (f"<b>The break:</b> at depth {broken.depth} the spine proposed "
                f"{self._chip(broken.token, broken.source, broken.id, REJECTED)} "
                f"(target probability {_p(spine.proposed_prob)}); "
                f"the target wanted {self._chip(spine.wanted, None)} (probability {_p(spine.wanted_prob)})."
                + (f"<br><small>Target's top-5 there: {listing}</small>" if listing else ""))

    def _no_spine(self, rec: CycleRecord, method: MethodCard | None, name: str) -> str:
        if rec.mode == "ar":
            return (f"{'No spine this cycle: an' if method is None or method.no_match_note else 'An'} AR cycle "
                    f"({ar_reason(rec, (method or MethodCard).no_draft_reason)}), so the target produced one token, "
                    f"{self._chip(rec.bonus_token, 'bonus')}.")
        if method is not None and method.no_match_note and not ContextMatchFacts.read(rec.state).match:
            return f"No spine this cycle: {method.no_match_note}."
        drafted = [n for n in rec.nodes if n.parent >= 0]
        sources = ", ".join(sorted({n.source for n in drafted})) or "no"
        if method is not None and not method.no_match_note:  # not a spine method: say what it drafted
            kids = Counter(n.parent for n in drafted if n.verified)
            shape = "a chain" if max(kids.values(), default=0) <= 1 else "a tree"
            verified = sum(1 for n in drafted if n.verified)
            cut = len(drafted) - verified
            facts = TalonFacts.read(rec.state)
            rerank = facts.rerank_cut
            why = (f"cut by the reranking below path probability {_p(rerank)}" if rerank is not None
                   else "cut by the gate or the budget")
            if rerank is not None and facts.pruned:  # every candidate the reranking cut, not only those recorded
                cut = max(cut, int(facts.pruned))
            return (f"{name} drafted {shape} of {verified} {sources} token{_s(verified)}"
                    + (f" ({cut} more considered, {why})." if cut else "."))
        return f"No spine this cycle: {name} drafted a tree of {sources} nodes, with no context-copied chain."

    def _chip(self, token: int, source: str | None, node_id: int | None = None, border: str | None = None) -> str:
        """A token as a small coloured label; a link to its node when it has one."""
        text = html.escape(self.model.vocab.label(token, 24))
        if source is None:
            chip = f"<b>“{text}”</b>"
        else:
            bg = SOURCE_COLORS.get(source, "#7f8c8d")
            chip = f"<span style='background-color:{bg}; color:#ffffff'>&nbsp;{text}&nbsp;</span>"
            if border:
                chip = f"<span style='color:{border}'>✗</span>{chip}"
        return f"<a href='node:{node_id}' style='text-decoration:none'>{chip}</a>" if node_id is not None else chip

    def _quote(self, ids: list[int]) -> str:
        text = self.model.vocab.text(ids).replace("\n", "↵").strip()
        if len(text) > 90:
            text = text[:89] + "…"
        return f"“<i>{html.escape(text)}</i>”"

    def _on_link(self, url: QUrl) -> None:
        text = url.toString()
        if text.startswith("node:"):
            try:
                self.model.select_node(int(text[5:]))
            except ValueError:
                pass


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _p(p: float | None) -> str:
    return "not in its top-5" if p is None else f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"

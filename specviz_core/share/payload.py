"""What a shared page shows, computed here and embedded in the page as data: the page draws, it decides nothing.

Per cycle: the draft tree laid out by the window's layout (:func:`~specviz_core.viewer.tree_layout.layout_tree`,
boxes sized as the notebook's SVG sizes them), each box's source and outcome, "why did this cycle stop" in the
core's sentence, the tree attention mask as recorded (packed bits), the position ids, the KV trim and the committed
tokens with how each was committed. Per session: tokens per cycle, tokens/s, and one headline speed-up from
:mod:`specviz_core.analysis.metrics`, against the AR session of the same prompt in the file when there is one (the
window's baseline: :meth:`~specviz_core.viewer.sources.RecordingSource.ar_baseline`), else tokens per forward.
Tokens are written once, in a table, as text.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import numpy as np

from specviz_core.analysis import metrics
from specviz_core.analysis.cycle_summary import CycleSummary, summarize
from specviz_core.analysis.stop_cause import stop_cause
from specviz_core.recording.store import Recording
from specviz_core.records import CycleRecord, SessionInfo
from specviz_core.runtime.vocab import TokenText, load_token_text
from specviz_core.viewer.colors import ACCEPTED, FALLBACK, GATED, REJECTED, SOURCE_COLORS, SOURCE_LABELS
from specviz_core.viewer.sources import RecordingSource
from specviz_core.viewer.svg import FONT_PX, box_width
from specviz_core.viewer.tree_layout import BONUS, Metrics, is_marker, layout_tree

#: Bumped when the page's data changes shape (the page refuses data it does not know).
FORMAT = 1


@dataclass(frozen=True)
class Headline:
    """The one speed-up a page leads with, and what it compares."""

    value: float | None
    """Times faster (None: no baseline to compare with)."""
    short: str
    """What a slide shows large: "1.25x AR", or "1.84 tokens/forward"."""
    text: str
    """E.g. "2.31x AR (AR session ab12 on the same prompt)", or "1.84 tokens per forward (no AR session to compare
    with)"."""


def headline(info: SessionInfo, summaries: list[CycleSummary], baseline: tuple[float | None, str, float | None]) -> Headline:
    """The session's speed-up over AR from the metrics module, or its tokens per forward where there is no AR."""
    rate = metrics.tokens_per_s(summaries)
    tau = metrics.tokens_per_forward(summaries)
    ar_rate, source, _ = baseline
    if info.method == "ar":
        return Headline(None, f"{rate:.1f} tokens/s", "this session is the AR baseline: one token a forward")
    up = metrics.speedup(rate, ar_rate) if ar_rate else None
    if up is None:
        return Headline(None, f"{tau:.2f} tokens/forward", f"{rate:.1f} tokens/s; no AR session of this prompt in "
                                                            "the file to compare with")
    return Headline(up, f"{up:.2f}x AR", f"{rate:.1f} against {ar_rate:.1f} tokens/s ({source})")


def tree_data(rec: CycleRecord, text: TokenText, tok: TokenTable) -> dict[str, Any]:
    """The cycle's tree as boxes and edges, in the layout the window and the notebook draw."""
    m = Metrics(FONT_PX)
    lay = layout_tree(rec, False, lambda t: text.label(t), lambda s: box_width(s, m), m)
    accepted = {0, *rec.accepted_path}
    boxes = []
    for i in lay.pos:
        x, y, w, h = lay.rect(i)
        node = lay.nodes.get(i)
        if i == BONUS:
            kind, source, token = "bonus", "bonus", rec.bonus_token
        elif is_marker(i):
            kind, source, token = "marker", "gated", -1
        else:
            assert node is not None
            kind = "gated" if node.gated else "accepted" if i in accepted else "verified" if node.verified else "drafted"
            source, token = node.source, node.token
        extra = {}
        if node is not None and not is_marker(i):
            extra = {"depth": node.depth, "score": round(float(node.score), 4)}
            if node.verified and node.target_token >= 0:
                extra["wanted"] = tok.id(node.target_token)
            if node.target_prob is not None:
                extra["p"] = round(float(node.target_prob), 4)
        boxes.append({"id": i, "x": round(x + m.margin, 1), "y": round(y + m.margin, 1), "w": round(w, 1),
                      "label": lay.labels[i], "kind": kind, "source": source,
                      "token": tok.id(token) if token >= 0 else None, **extra})
    edges = [[p, c] for c, p in lay.parent.items()]
    return {"boxes": boxes, "edges": edges, "w": round(lay.width + 2 * m.margin, 1),
            "h": round(lay.height + 2 * m.margin, 1), "box_h": lay.node_h}


class TokenTable:
    """Every token a page shows, once: its index in the page's table of texts."""

    def __init__(self, text: TokenText) -> None:
        self.text = text
        self.index: dict[int, int] = {}
        self.texts: list[str] = []

    def id(self, token: int) -> int:
        at = self.index.get(token)
        if at is None:
            at = self.index[token] = len(self.texts)
            self.texts.append(self.text.piece(token))
        return at


def cycle_data(rec: CycleRecord, summary: CycleSummary, text: TokenText, tok: TokenTable) -> dict[str, Any]:
    """One cycle as the page draws it."""
    n = len(rec.verify_order)
    nodes = rec.node_by_id
    why = stop_cause(rec)
    accepted = {0, *rec.accepted_path}
    return {
        "index": rec.index,
        "mode": rec.mode,
        "tree": tree_data(rec, text, tok),
        "why": why.sentence(lambda t: repr(text.label(t))),
        "cause": why.label,
        "mask": base64.b64encode(np.packbits(np.asarray(rec.mask, dtype=bool).reshape(-1)).tobytes()).decode(),
        "rows": [{"node": int(i), "token": tok.id(nodes[i].token), "source": nodes[i].source,
                  "pos": int(rec.positions[r])} for r, i in enumerate(rec.verify_order)],
        "n": n,
        "cache_len": rec.cache_len,
        "kv_keep": list(rec.kv_keep),
        "accepted_rows": [r for r, i in enumerate(rec.verify_order) if i in accepted],
        "committed": [[tok.id(t), k] for t, k in zip(rec.committed_ids, summary.committed_kinds)],
        "ms": round(summary.cycle_ms, 3),
        "tau": summary.n_committed,
    }


def page_data(recording: Recording, session_id: str | None = None) -> dict[str, Any]:
    """Everything the page of one recorded session shows (``session_id``: the latest when None)."""
    source = RecordingSource(recording, session_id)
    info = source.info
    text = load_token_text(info.tokenizer or info.model)  # a session that names no tokenizer: its model's
    tok = TokenTable(text)
    damaged: list = []
    records = list(recording.cycles(info.id, damaged=damaged))  # a damaged cycle is left out, and said
    summaries = [summarize(r) for r in records]
    top = headline(info, summaries, source.ar_baseline())
    cycles = [cycle_data(r, s, text, tok) for r, s in zip(records, summaries)]
    per_cycle_rate = [metrics.cycle_rate(s) for s in summaries]
    return {
        "format": FORMAT,
        "session": {"id": info.id, "method": info.method, "model": info.model, "device": info.device,
                    "dtype": info.dtype, "created": info.created, "status": info.status,
                    "stop_reason": info.stop_reason, "n_cycles": len(records),
                    "n_tokens": sum(s.n_committed for s in summaries),
                    "tokens_per_s": round(metrics.tokens_per_s(summaries), 3),
                    "tokens_per_forward": round(metrics.tokens_per_forward(summaries), 4),
                    "prompt": info.prompt_text, "damaged": [d.index for d in damaged]},
        "headline": {"value": None if top.value is None else round(top.value, 4), "short": top.short, "text": top.text},
        "charts": {"tokens": [s.n_committed for s in summaries], "rate": [None if r is None else round(r, 2) for r in per_cycle_rate]},
        "cycles": cycles,
        "tokens": tok.texts,
        "colors": {"sources": SOURCE_COLORS, "labels": SOURCE_LABELS, "accepted": ACCEPTED, "rejected": REJECTED,
                   "gated": GATED, "fallback": FALLBACK},
    }

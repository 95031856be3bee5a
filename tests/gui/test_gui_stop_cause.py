"""The "why did the spine break" panel: what it says for hand-built Goose, PLD, bypass and AR cycles."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import QUrl

from gui_records import (
    WordTokenizer,
    goose_session,
    keep_none_alive,
    spine_nodes,
    word_id,
    word_vocab,
)
from specviz_app.panels.stop_cause import StopCausePanel
from specviz_core.viewer.session_model import SessionModel
from specviz_core.viewer.sources import LiveSource

keep_none_alive()


def open_panel(qtbot, source) -> tuple[StopCausePanel, list]:
    model = SessionModel()
    panel = StopCausePanel(model)
    qtbot.addWidget(panel)
    spans: list = []
    panel.span_changed.connect(spans.append)
    model.open(source, word_vocab())
    panel.resize(600, 400)
    panel.show()
    return panel, spans


def test_goose_spine_accepted_two_of_five_and_what_the_target_wanted(qtbot) -> None:
    source = goose_session(n_nodes=12, spine_len=5, spine_accepted=2, branch_continues=0, n_gated=2,
                           wanted=word_id("house"))
    panel, spans = open_panel(qtbot, source)
    rec = panel.model.record
    text = " ".join(panel.explanation().split())
    spine = spine_nodes(rec)
    assert [n.accepted for n in spine] == [True, True, False, False, False]
    broken = spine[2]
    top = dict(rec.target_topk[rec.verify_order.index(broken.parent)])

    assert "the target accepted 2 of 5 spine tokens" in text
    assert f"at depth 3 the spine proposed ✗ {panel.model.vocab.label(broken.token)}" in text
    assert f"(target probability {broken.target_prob:.3f})" in text
    assert f"the target wanted “␣house” (probability {top[word_id('house')]:.3f})" in text
    assert "no branch continued the path" in text and "the bonus ␣house" in text
    # Where it came from: the prompt's phrase; the context ends with the same 4 tokens, committed by earlier cycles.
    prompt = list(source.info.prompt_ids)
    phrase = prompt[100:109]
    assert panel.matched_span() == (100, 104) and panel.copied_span() == (104, 109)
    assert spans == [(100, 104)]
    ngram = WordTokenizer().decode(phrase[:4]).strip()
    assert f"after matching the 4-gram “{ngram}” at tokens 100–103" in text
    assert f"copied from tokens 104–108 of the prompt “{WordTokenizer().decode(phrase[4:]).strip()}”" in text
    assert [n.token for n in spine] == phrase[4:]
    committed = panel.context_tokens(len(prompt), len(prompt) + 4)
    assert committed == phrase[:4]  # built from the earlier cycles' committed ids
    assert panel.context_tokens(len(prompt) + 4, len(prompt) + 9) == []  # nothing after this cycle's root


def test_a_branch_that_continued_the_path(qtbot) -> None:
    panel, _ = open_panel(qtbot, goose_session(spine_len=9, spine_accepted=3, branch_continues=2))
    rec = panel.model.record
    text = " ".join(panel.explanation().split())
    assert "the target accepted 3 of 9 spine tokens" in text
    labels = [panel.model.vocab.label(rec.node_by_id[a].token) for a in rec.accepted_path[3:]]
    assert f"a branch continued the accepted path for 2 more tokens ( {labels[0]} {labels[1]} )" in text
    assert f"then the bonus {panel.model.vocab.label(rec.bonus_token)}" in text
    # The wanted token at the break is the branch's first token.
    assert f"the target wanted “{labels[0]}”" in text


def test_ar_cycle_and_span_reset(qtbot) -> None:
    panel, spans = open_panel(qtbot, goose_session(n_nodes=12, spine_len=5, spine_accepted=2, branch_continues=0))
    panel.model.set_cycle(0)
    text = panel.explanation()
    lines = text.splitlines()
    assert "No spine this cycle: an AR cycle" in text and len(lines) == 3
    # no curve and no AR session, but four plain cycles of its own: their forward is the unit, so an AR cycle's time
    # is its forward at about 1x plus its bookkeeping
    assert lines[2].startswith("Time: An AR cycle: one 1-row forward of 8.0 ms = 1.00x a 1-token forward (8.0 ms)")
    assert panel.matched_span() is None and spans == [(100, 104), None]


def test_bypass_cycle_says_why(qtbot) -> None:
    panel, _ = open_panel(qtbot, goose_session(spine_len=12, spine_accepted=12, branch_continues=0, mode="bypass",
                                               state={"consensus": True, "match_len": 12, "route": "bypass",
                                                      "confidence": 1.0, "chain_len": 12, "node_budget": 100}))
    text = " ".join(panel.explanation().split())
    assert "Route: the chain alone: confidence gave it the whole budget." in text
    assert "Match confidence 1.00; node budget 100 (root included)." in text
    assert "the target accepted all 12 spine tokens" in text
    # All 12 accepted and the chain ended there: the tree ended at a leaf, so the budget is the cause.
    assert "Why it stopped (cut by the budget)" in text


def test_pld_copy_is_a_spine(qtbot) -> None:
    panel, _ = open_panel(qtbot, goose_session(spine_len=6, spine_accepted=1, branch_continues=0, method="pld",
                                               mode="chain", ngram=2))
    text = " ".join(panel.explanation().split())
    assert "PLD · chain · a spine of 6 tokens (PLD's copied n-gram continuation)" in text
    assert "after matching the 2-gram" in text and "the target accepted 1 of 6 spine tokens" in text
    assert panel.matched_span() == (100, 102)


def test_tree_without_a_spine(qtbot) -> None:
    rec_source = goose_session(n_nodes=12, spine_len=5, spine_accepted=2, branch_continues=0)
    rec = rec_source.cycle(len(rec_source) - 1)
    # The same tree with its spine relabelled as branches and no match: Goose's root-branches-only tree.
    nodes = tuple(n.replace(source="branch") if n.source == "spine" else n for n in rec.nodes)
    live = LiveSource(rec_source.info)
    for i in range(len(rec_source) - 1):
        live.append(rec_source.cycle(i))
    live.append(rec.replace(nodes=nodes, state={**rec.state, "match": None}))
    panel, _ = open_panel(qtbot, live)
    assert "No spine this cycle: Goose found no context match" in panel.explanation()
    assert panel.matched_span() is None


def test_node_links_select_the_node(qtbot) -> None:
    panel, _ = open_panel(qtbot, goose_session(n_nodes=12, spine_len=5, spine_accepted=2, branch_continues=0))
    broken = spine_nodes(panel.model.record)[2]
    assert f"href=\"node:{broken.id}\"" in panel.toHtml()
    panel.anchorClicked.emit(QUrl(f"node:{broken.id}"))
    assert panel.model.selected_node == broken.id


@pytest.mark.parametrize("closed", [False, True])
def test_no_session_shows_the_hint(qtbot, closed: bool) -> None:
    model = SessionModel()
    panel = StopCausePanel(model)
    qtbot.addWidget(panel)
    if closed:
        model.open(goose_session(n_nodes=12, spine_len=5, spine_accepted=2, branch_continues=0), word_vocab())
        model.close()
    assert panel.explanation() == "Step a cycle (F10) or open a recording"
    assert panel.matched_span() is None


def test_a_tree_method_says_what_it_drafted_and_the_targets_top_5(qtbot) -> None:
    """A method without spines (Token Recycling) gets no 'no spine' line: the shape it drafted, and at the stop node
    the target's top-5 from the recorded logits, best first, with their probabilities."""
    goose = goose_session(n_nodes=12, spine_len=5, spine_accepted=2, branch_continues=0)
    live = LiveSource(dataclasses.replace(goose.info, method="tr", params={}))
    for i in range(len(goose) - 1):
        live.append(goose.cycle(i))
    rec = goose.cycle(len(goose) - 1)
    nodes = tuple(n.replace(source="table") if n.parent >= 0 else n for n in rec.nodes)
    rec = rec.replace(nodes=nodes, state={})
    live.append(rec)
    panel, _ = open_panel(qtbot, live)
    text = " ".join(panel.explanation().split())
    drafted = sum(1 for n in rec.nodes if n.parent >= 0 and n.verified)
    cut = sum(1 for n in rec.nodes if n.parent >= 0 and not n.verified)
    assert "No spine" not in text
    want = f"Token Recycling drafted a tree of {drafted} table tokens"
    assert want + (f" ({cut} more considered, cut by the gate or the budget)." if cut else ".") in text
    stop = rec.accepted_path[-1]
    top = rec.target_topk[rec.verify_order.index(stop)]
    listing = ", ".join(f"“{panel.model.vocab.label(t)}” {p:.3f}" for t, p in top)
    assert f"Target's top-{len(top)} there: {listing}" in text

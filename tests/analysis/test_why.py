"""Why a cycle stopped (specviz_core.analysis.stop_cause): each cause on constructed cycles of three methods (Token Recycling's
table, TALON with a controlled source, a draft-model tree), the wanted token checked against a plain forward, and
headroom never below what a source got accepted."""

from __future__ import annotations

import pytest
import torch

from helpers import make_engine, plain_logits, tiny_llama
from specviz_core.analysis.stop_cause import CAUSES, offers_at, stop_cause
from specviz_core.drafters.talon.next_token import NextTokenSource

PROMPT = [5, 17, 33, 2, 61, 40, 9, 12]


def target_next(m, ids: list[int]) -> int:
    return int(plain_logits(m, ids).argmax())


def accepted_by_source(record) -> dict[str, int]:
    out: dict[str, int] = {}
    for nid in record.accepted_path:
        s = record.node_by_id[nid].source
        out[s] = out.get(s, 0) + 1
    return out


def check_headroom(record, cause) -> None:
    for s, n in accepted_by_source(record).items():
        assert cause.headroom[s] >= n, (s, cause.headroom, n)
    assert cause.headroom["*"] >= record.n_accepted


# -- Token Recycling: the table row below the root is set by the test -------------------------------------------

def tr_cycle(tiny, row: list[int], budget: int = 3, max_depth: int = 1, leaf_row: tuple[int, list[int]] | None = None):
    e = make_engine(tiny, "tr", PROMPT, 4, budget=budget, max_depth=max_depth, k=8)
    e.prefill()
    table = e.drafter.table
    rows = [(PROMPT[-1], row)] + ([leaf_row] if leaf_row else [])
    for tok, ids in rows:
        table.ids[tok] = torch.tensor(ids)
        table.probs[tok] = torch.linspace(0.5, 0.1, len(ids))
        table.filled[tok] = True
    return e.step()


def others(tiny, avoid: set[int], n: int) -> list[int]:
    return [t for t in range(tiny.model.config.vocab_size) if t not in avoid][:n]


def test_tr_not_drafted_offered_beyond_the_template_width(tiny, one_thread):
    w = target_next(tiny, PROMPT)
    row = others(tiny, {w}, 7)
    row.insert(5, w)  # rank 6; the template drafts ranks 1-3 below the root
    rec = tr_cycle(tiny, row)
    c = stop_cause(rec)
    assert rec.bonus_token == w and rec.n_accepted == 0
    assert (c.kind, c.source, c.rank, c.width) == ("not_drafted", "recycle", 6, 3)
    assert "rank 6" in c.sentence() and "drafted only 3" in c.sentence()
    check_headroom(rec, c)
    assert c.headroom["*"] == 1  # the wider tree would have had it


def test_tr_not_offered_lists_what_the_table_had(tiny, one_thread):
    w = target_next(tiny, PROMPT)
    row = others(tiny, {w}, 8)
    rec = tr_cycle(tiny, row)
    c = stop_cause(rec)
    assert c.kind == "not_offered"
    assert c.offers[0].tokens == tuple(row)
    assert all(str(t) in c.sentence() for t in row[:5])
    assert c.headroom["*"] == 0


def test_tr_budget_at_a_leaf_of_the_template(tiny, one_thread):
    w = target_next(tiny, PROMPT)
    w2 = target_next(tiny, PROMPT + [w])
    row = [w] + others(tiny, {w}, 7)
    leaf = others(tiny, {w2}, 7)
    leaf.insert(2, w2)
    rec = tr_cycle(tiny, row, leaf_row=(w, leaf))
    c = stop_cause(rec)
    assert rec.n_accepted == 1 and rec.bonus_token == w2
    assert (c.kind, c.source, c.rank, c.depth) == ("budget", "recycle", 3, 1)
    check_headroom(rec, c)
    assert c.headroom == {"recycle": 2, "*": 2}


# -- TALON: its algorithm on a source whose candidates the test sets ---------------------------------------------

class FixedSource(NextTokenSource):
    kind = "table"
    node_source = "table"

    def __init__(self, root, below) -> None:
        super().__init__()
        self._root, self._below = root, below

    def root(self, ctx, m):
        return self._root

    def expand(self, tree, nodes, m):
        return [self._below.get(tree.tokens[n], ([], [])) for n in nodes]


def talon_cycle(tiny, root, below, **params):
    e = make_engine(tiny, "talon", PROMPT, 4, **params)
    e.prefill()
    e.drafter.source = FixedSource(root, below)
    return e.step()


def test_talon_gated_by_mu(tiny, one_thread):
    w = target_next(tiny, PROMPT)
    w2 = target_next(tiny, PROMPT + [w])
    x, y = others(tiny, {w, w2}, 2)
    rec = talon_cycle(tiny, ([w, x], [0.9, 0.1]), {w: ([y, w2], [0.99, 0.001])}, top_k=2, mu=0.03, budget=10)
    c = stop_cause(rec)
    assert rec.n_accepted == 1
    assert (c.kind, c.source, c.rank) == ("gated", "table", 2)
    # The gate compares path probabilities with mu x the layer's best, both computed here from the candidates.
    assert c.score == pytest.approx(0.9 * 0.001, rel=1e-4)
    assert c.threshold == pytest.approx(0.03 * 0.9 * 0.99, rel=1e-4)
    check_headroom(rec, c)


def test_talon_budget_cut_and_not_drafted_at_the_root(tiny, one_thread):
    w = target_next(tiny, PROMPT)
    w2 = target_next(tiny, PROMPT + [w])
    x, y = others(tiny, {w, w2}, 2)
    rec = talon_cycle(tiny, ([w, x], [0.9, 0.1]), {w: ([y, w2], [0.6, 0.4])}, top_k=2, mu=0.03, budget=3)
    c = stop_cause(rec)
    assert (c.kind, c.source, c.rank) == ("budget", "table", 2)  # both pass the gate, room for one
    rec = talon_cycle(tiny, ([x, y, w], [0.5, 0.3, 0.2]), {}, top_k=2, budget=10)
    c = stop_cause(rec)
    assert (c.kind, c.rank, c.width) == ("not_drafted", 3, 2)


def test_talon_not_offered(tiny, one_thread):
    w = target_next(tiny, PROMPT)
    x, y = others(tiny, {w}, 2)
    rec = talon_cycle(tiny, ([x, y], [0.5, 0.5]), {}, top_k=2)
    assert stop_cause(rec).kind == "not_offered"


# -- a draft-model tree: the draft model's own ranking, computed here ---------------------------------------------

def test_draft_tree_causes_follow_the_draft_models_ranking(tiny, one_thread):
    draft = tiny_llama(seed=3)
    found = set()
    for start in range(0, 60, 3):
        prompt = [(start + 7 * i) % 96 for i in range(8)]
        w = target_next(tiny, prompt)
        order = plain_logits(draft, prompt).argsort(descending=True).tolist()
        rank = order.index(w) + 1
        if rank == 1:
            continue
        width = min(rank - 1, 3)
        e = make_engine(tiny, "draft_tree", prompt, 4, draft=draft, width=width, depth=2)
        e.prefill()
        rec = e.step()
        c = stop_cause(rec)
        if rec.n_accepted:
            continue
        want = "not_drafted" if rank <= width + 6 else "not_offered"
        assert c.kind == want, (rank, width, c)
        if want == "not_drafted":
            assert (c.source, c.rank, c.width) == ("draft", rank, width)
            assert offers_at(rec, 0)[0].tokens == tuple(order[: width + 6])
        found.add(want)
        if found == {"not_drafted", "not_offered"}:
            break
    assert found == {"not_drafted", "not_offered"}


def test_draft_tree_budget_when_the_draft_is_the_target(tiny, one_thread):
    e = make_engine(tiny, "draft_tree", PROMPT, 8, draft=tiny, width=1, depth=2)
    e.prefill()
    rec = e.step()
    c = stop_cause(rec)
    assert rec.n_accepted == 2  # the draft is the target: it is right until the tree ends
    assert c.kind == "budget" and c.detail  # a leaf never expanded
    assert c.headroom["draft"] >= 2


# -- a real session: one cause per stopped cycle, consistent with what was recorded -------------------------------

@pytest.mark.default_model
@pytest.mark.parametrize("method", ["goose", "talon"])
def test_every_cycle_of_a_default_model_session_has_one_consistent_cause(smol, method):
    ids = smol.tokenizer("def total(xs):\n    t = 0\n    for x in xs:\n        t = t + x\n    return t\n\n"
                         "def mean(xs):\n")["input_ids"]
    e = make_engine(smol, method, ids, 32)
    records = list(e.cycles())
    kinds = set()
    for rec in records:
        c = stop_cause(rec)
        assert c.kind in CAUSES
        kinds.add(c.kind)
        assert rec.nodes[c.node].target_token == rec.bonus_token == c.wanted  # the target's own choice there
        offered = {t for o in c.offers for t in o.tokens}
        if c.kind == "not_offered":
            assert c.wanted not in offered
        elif c.kind in ("not_drafted", "budget", "gated") and c.source is not None and c.rank is not None:
            assert c.offers and c.wanted in offered
        check_headroom(rec, c)
    assert len(kinds) >= 2, kinds


def test_causes_round_trip_through_a_recording_and_the_filters(tmp_path, capsys, tiny, one_thread):
    """The cause stored with each summary is the one the record gives when read back; the timeline's filters and
    `sessions --metrics` count the same cycles."""
    from specviz_core.analysis.cycle_summary import summarize
    from specviz_core.analysis.metrics import session_metrics
    from specviz_core.recording.store import Recording
    from specviz_core.session.factory import session_info
    from specviz_core.session.spec import check_method
    from specviz_core.viewer.filters import CycleFilter

    e = make_engine(tiny, "tr", PROMPT, 40)
    records = list(e.cycles())
    db = tmp_path / "w.db"
    with Recording(db, create=True) as rec:
        writer = rec.new_session(session_info(tiny, check_method("tr", {}), PROMPT, max_new_tokens=40))
        for r in records:
            writer.append(r)
        writer.finish("complete")
    with Recording(db, read_only=True) as rec:
        sid = rec.sessions()[0].id
        stored = rec.cycle_summaries(sid)
        back = [rec.cycle(sid, i) for i in range(len(stored))]
    want = [stop_cause(r).kind for r in back]
    assert [s.cause for s in stored] == want == [summarize(r).cause for r in records]
    for kind in set(want):
        assert CycleFilter.parse(f"stop_{kind}").matching(stored) == [i for i, k in enumerate(want) if k == kind]
    m = session_metrics(stored)
    assert sum(m.causes.values()) == len(stored)
    assert m.headroom >= m.headroom_accepted == sum(r.n_accepted for r in records)


def test_an_ar_cycle_says_whether_anything_was_drafted():
    """An AR cycle verified its root alone: because nothing was drafted (the method's words), because budget=auto
    cut every drafted node, or because a gate did; the window says which (it used to say 'nothing was drafted'
    for all three)."""
    import dataclasses

    from helpers import tree_record
    from specviz_core.analysis.stop_cause import ar_reason

    def ar(nodes, **state):
        rec = tree_record(nodes, **state)
        gated = tuple(n.replace(verified=False, gated=True) if n.id else n for n in rec.nodes)
        return dataclasses.replace(rec, mode="ar", nodes=gated, accepted_path=())

    assert ar_reason(ar([]), "no match") == "no match"
    three = [(1, 0, "recycle", 0.6, 1, False), (2, 0, "recycle", 0.2, 1, False), (3, 1, "recycle", 0.5, 2, False)]
    cut = ar_reason(ar(three, budget={"chosen": 0, "candidates": 3, "ceiling": 16}), "no match")
    assert cut.startswith("budget=auto verified none of the 3 drafted nodes")
    assert ar_reason(ar(three[:1]), "no match") == "1 candidate drafted, every one cut by the gate or the budget"


def test_a_candidate_budget_auto_cut_is_said_to_be_cut_by_budget_auto():
    """The wanted token was drafted and then not verified: budget=auto cut it, and the sentence names it (the budget
    line beside it says what it kept); a candidate the method's own budget never drafted still reads 'the budget or
    depth limit'."""
    import dataclasses

    from helpers import tree_record

    def cut(fate: str, **state):
        rec = tree_record([(1, 0, "recycle", 0.6, 1, False), (2, 0, "recycle", 0.3, 1, False)], **state,
                          offers={"0": [{"source": "recycle", "tokens": [8, 7], "scores": [0.6, 0.3],
                                         "fates": ["drafted", fate]}]})
        nodes = tuple(n.replace(token=7 + (n.id == 1), verified=False, gated=True) if n.id else n
                      for n in rec.nodes)
        return stop_cause(dataclasses.replace(rec, mode="ar", nodes=nodes, accepted_path=(), bonus_token=7))

    by_auto = cut("drafted", budget={"chosen": 0, "candidates": 2, "ceiling": 16})
    assert (by_auto.kind, by_auto.source, by_auto.rank) == ("budget", "recycle", 2)
    text = by_auto.sentence()
    assert text.endswith("offered it at rank 2, but budget=auto cut it.")
    by_method = cut("budget")
    assert by_method.kind == "budget" and not by_method.cut_after_drafting
    assert "but the budget or depth limit cut it." in by_method.sentence()

"""Goose's rules, each pinned to the official implementation (2kinto/GOOSE_Speculative_Decoding, goose/) on
constructed contexts and tables: no model. Every expected value is worked out by hand below, following the
official rules as docs/goose.md states them, not by running the code under test."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import rows_of, top_of
from specviz_core.drafters.base import DraftContext
from specviz_core.drafters.goose.drafter import GooseDrafter, IsotropicDrafter
from specviz_core.drafters.goose.match import ContextIndex, extend_chain, match_confidence
from specviz_core.drafters.goose.stats import yield_bound
from specviz_core.drafters.goose.table import GooseTable
from specviz_core.drafters.goose.tree import BranchRules, build_spine_tree, harmonic_split, spine_ratio_tier
from specviz_core.errors import SpecVizError
from specviz_core.methods import parse_params
from specviz_core.methods.goose import GooseParams, IsotropicParams
from specviz_core.tree import DraftTree

V = 2048
#: Scores that float16 holds exactly, so hand arithmetic on them is exact.
HALVES = [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625, 0.001953125, 0.0009765625]


class StubTarget:
    vocab_size = V
    device = torch.device("cpu")


def goose(cls=GooseDrafter, **params) -> GooseDrafter:
    d = cls(parse_params(cls.method_id, cls.params_cls, params), StubTarget())
    d.start([])
    return d


def ctx(ids, budget: int | None = None) -> DraftContext:
    return DraftContext(ids=list(ids), cache_len=len(ids) - 1, max_depth=1000, generator=torch.Generator(),
                        temperature=0.0, budget=budget)


def set_row(table: GooseTable, token: int, succ: list[tuple[int, float]]) -> None:
    """Write a unigram row directly (ids padded with -1, as an unfilled table slot)."""
    ids = [t for t, _ in succ] + [-1] * (table.k - len(succ))
    scores = [s for _, s in succ] + [0.0] * (table.k - len(succ))
    table.ids[token] = torch.tensor(ids)
    table.scores[token] = torch.tensor(scores, dtype=torch.float16)
    table.observed[token] = True


def past_prefill(d: GooseDrafter, ids) -> None:
    """Cycle 0 is the official prefill's last position: no draft, one token."""
    tree = d.draft(ctx(ids))
    assert tree.mode == "ar" and tree.state["route"] == "prefill" and len(tree) == 1
    d.accepted(tree, [], [0])


def children(tree: DraftTree, node: int, gated: bool = False) -> list[int]:
    return [c for c in tree.children(node) if tree.gated[c] == gated]


# -- context matching ------------------------------------------------------------------------------------------

def index(pool, lengths=(5, 4, 3), **kw) -> ContextIndex:
    ix = ContextIndex(tuple(lengths), **kw)
    ix.extend(pool)
    return ix


def test_the_first_occurrence_is_copied():
    # (1, 2, 3) occurred at 0 (then 7 8 9) and at 6 (then 50 51): the official matcher copies after the first.
    pool = [1, 2, 3, 7, 8, 9, 1, 2, 3, 50, 51, 1, 2, 3]
    m = index(pool, (3,)).match(pool, 20)
    assert (m.ngram, m.match_start, m.copy_start) == (3, 0, 3)
    assert list(m.tokens) == pool[3:]  # runs to the end of the pool: 7 8 9 1 2 3 50 51 1 2 3
    assert list(index(pool, (3,), occurrence="last").match(pool, 20).tokens) == [50, 51, 1, 2, 3]
    assert list(index(pool, (3,)).match(pool, 4).tokens) == [7, 8, 9, 1]  # max_chain


def test_the_suffix_is_never_its_own_match_and_the_longest_length_wins():
    assert index([1, 2, 3]).match([1, 2, 3], 20) is None
    # (1,2,3) first continues with 50 (at 1); (9,1,2,3) occurred at 5 and continues with 100: the 4-gram wins.
    pool = [0, 1, 2, 3, 50, 9, 1, 2, 3, 100, 8, 9, 1, 2, 3]
    m = index(pool, (4, 3)).match(pool, 20)
    assert m.ngram == 4 and m.tokens[0] == 100


def test_consensus_counts_occurrences_of_the_longest_matching_ngram():
    assert not index(p := [1, 2, 3, 42, 5, 1, 2, 3], (3,)).consensus(p)  # one earlier occurrence
    assert index(p := [1, 2, 3, 42, 5, 1, 2, 3, 42, 6, 1, 2, 3], (3,)).consensus(p)  # two, both then 42
    assert not index(p := [1, 2, 3, 42, 5, 1, 2, 3, 43, 6, 1, 2, 3], (3,)).consensus(p)  # they disagree
    # Only the longest length with an occurrence counts: the 4-gram (9,1,2,3) occurred once (at 0), so no
    # consensus although the 3-gram (1,2,3) occurred twice, both times followed by 42.
    p = [9, 1, 2, 3, 42, 7, 1, 2, 3, 42, 8, 9, 1, 2, 3]
    assert not index(p, (4, 3)).consensus(p)
    assert index(p, (3,)).consensus(p)


def test_consensus_by_ngram_lengths_is_the_papers_reading():
    # One earlier occurrence, at which the 5-, 4- and 3-grams all match (nested n-grams at one position): the
    # official rule sees a single occurrence (no consensus); Section 4.3's reading sees three lengths agree.
    p = [10, 11, 12, 13, 14, 99, 20, 10, 11, 12, 13, 14]
    assert not index(p).consensus(p)
    assert index(p, consensus_rule="ngram_lengths").consensus(p)


def test_match_confidence_schedule():
    assert match_confidence(0, True, 8) == 0.0
    assert match_confidence(3, True, 8) == 1.0
    assert match_confidence(4, False, 8) == pytest.approx(0.6 * 4 / 8)  # 0.3
    assert match_confidence(7, False, 8) == pytest.approx(0.525)  # below the 0.6 extension threshold
    assert match_confidence(8, False, 8) == pytest.approx(0.7)
    assert match_confidence(14, False, 8) == pytest.approx(0.8)  # 0.7 + 0.2 * 6 / 12
    assert match_confidence(20, False, 8) == pytest.approx(0.9)
    assert match_confidence(40, False, 8) == pytest.approx(0.9)  # capped


# -- chain extension and the growing budget ----------------------------------------------------------------------

#: 30 distinct tokens, then the first five again: the 5-gram (10..14) occurred once, at 0.
CYCLE = list(range(10, 40))
POOL = CYCLE + CYCLE[:5]


def test_a_confident_chain_is_grown_by_repeated_matching():
    # Lookup 1: (10..14) at 0 -> pool[5:25] = 15..34, 20 tokens, no consensus: confidence min(0.9, 0.7 + 0.2 * 12/12)
    # = 0.9 > 0.6, so the chain grows to int(100 * 0.9) = 90. Each further lookup matches the drafted tail
    # against the committed pool: (30..34) at 20 -> pool[25:35] = 35..39 10..14 (10 tokens, the pool ends);
    # (10..14) at 0 -> 15..34 again (20). Lengths 20, 30, 50, 60, 80, 90: stop at the limit.
    ix = index(POOL)
    m = ix.match(POOL, 20)
    conf = match_confidence(len(m.tokens), ix.consensus(POOL), 8)
    assert list(m.tokens) == list(range(15, 35)) and conf == pytest.approx(0.9)
    ext = extend_chain(ix, POOL, m.tokens, conf, 100, 20, 8)
    lap = list(range(15, 40)) + list(range(10, 15))  # one period of the chain: 15..39 10..14 (30 tokens)
    assert ext.chain == (lap * 3)[:90]
    assert [len(e.tokens) for e in ext.pieces] == [10, 20, 10, 20, 10]
    assert [(e.copy_start, e.copy_end) for e in ext.pieces] == [(25, 35), (5, 25), (25, 35), (5, 25), (25, 35)]


def test_a_saturated_chain_grows_only_while_each_lookup_is_consensual():
    # (1,2,3) occurred twice, both times followed by 4: consensus, confidence 1. The chain 4 5 6 1 2 3 4 7 8 1 2 3
    # (12 tokens from the first occurrence) ends in (1,2,3) again, which is consensual: the lookup from there is
    # appended and judged consensual, so one more; after that the tail ... 7 8 1 2 3 ... is the same query; and so
    # on until int(100 * 1.0) = 100 tokens. With the pool's second 4 changed to 9 the first lookup has no consensus.
    pool = [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 7, 8, 1, 2, 3]
    ix = index(pool, (3,))
    m = ix.match(pool, 20)
    assert ix.consensus(pool) and match_confidence(len(m.tokens), True, 8) == 1.0
    ext = extend_chain(ix, pool, m.tokens, 1.0, 100, 20, 8)
    assert len(ext.chain) >= 100 and len(ext.chain) - len(ext.pieces[-1].tokens) < 100
    # A saturated cycle stops after the first lookup that is not consensual itself (it is still appended).
    # pool2: (1,2,3) at 0 and 6, both followed by 4: consensus. The copy (max_chain 8: 4 5 6 1 2 3 4 9) ends in
    # (3,4,9), which occurred once (at 8): not consensual, so its continuation pool[11:] = 9 8 1 2 3 is
    # appended and the extension stops.
    pool2 = [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 9, 9, 8, 1, 2, 3]
    ix2 = index(pool2, (3,))
    m2 = ix2.match(pool2, 8)
    assert ix2.consensus(pool2) and list(m2.tokens) == [4, 5, 6, 1, 2, 3, 4, 9]
    ext2 = extend_chain(ix2, pool2, m2.tokens, 1.0, 100, 20, 8)
    assert ext2.chain == [4, 5, 6, 1, 2, 3, 4, 9, 9, 8, 1, 2, 3] and len(ext2.pieces) == 1


def test_the_drafter_grows_the_chain_and_the_budget():
    # POOL as above, with every token having the successors 200, 201, 202 (scores 0.5, 0.25, 0.125):
    # confidence 0.9, budget 60 + int(0.9 * 40) = 96 (root included); EMA 0.5 -> tier 0.50, ratio 0.5 + 0.9 * 0.5
    # = 0.95; spine min(90, int(96 * 0.95) = 91) = 90; branch budget 96 - 1 - 90 = 5: spine share max(1, int(2.5))
    # = 2, root share 3. Root: 200 201 202 (none is the spine's first token, 15). Spine shares harmonic_split(2, 90)
    # = [1, 1, 0, ...]: spine nodes 1 and 2 get 200 each. Then remaining = 96 - 96 = 0: no extension.
    d = goose()
    for t in range(V):
        set_row(d.table, t, [(200, 0.5), (201, 0.25), (202, 0.125)])
    past_prefill(d, POOL[:-1])
    tree = d.draft(ctx(POOL))
    s = tree.state
    assert s["route"] == "spine_tree" and s["chain_extended"] and s["confidence"] == pytest.approx(0.9)
    assert (s["match_len"], s["chain_len"], s["node_budget"], s["spine_len"]) == (20, 90, 96, 90)
    assert s["spine_ratio"] == pytest.approx(0.95) and s["spine_ratio_tier"] == 0.5 and not s["ratio_binding"]
    assert (s["root_share"], s["spine_share"]) == (3, 2)
    spine = [i for i in range(len(tree)) if tree.sources[i] == "spine"]
    assert [tree.tokens[i] for i in spine] == ((list(range(15, 40)) + list(range(10, 15))) * 3)[:90]
    assert [tree.tokens[c] for c in children(tree, 0) if tree.sources[c] == "branch"] == [200, 201, 202]
    assert [len([c for c in children(tree, i) if tree.sources[c] == "branch"]) for i in spine[:4]] == [1, 1, 0, 0]
    assert tree.n_verified == 96 and tree.mode == "tree"


def test_a_saturated_cycle_spends_one_node_more_than_its_budget_on_the_chain():
    # Consensus: confidence 1, budget 60 + 40 = 100, ratio 1: spine min(len, 100) = 100, branch budget -1: no
    # branches. The root is not charged: 101 nodes (the official decoder's arithmetic). Recorded as a bypass.
    pool = [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 7, 8, 1, 2, 3]
    d = goose()
    for t in range(V):
        set_row(d.table, t, [(200, 0.5)])
    past_prefill(d, pool[:-1])
    tree = d.draft(ctx(pool))
    assert tree.state["confidence"] == 1.0 and tree.state["node_budget"] == 100 and tree.state["spine_len"] == 100
    assert tree.n_verified == 101 and set(tree.sources[1:]) == {"spine"} and tree.mode == "bypass"
    assert GooseDrafter.card.max_budget(d.params) == 100


def test_without_confidence_the_budget_and_the_chain_stay():
    d = goose(use_confidence=False)
    for t in range(V):
        set_row(d.table, t, [(200, 0.5)])
    past_prefill(d, POOL[:-1])
    tree = d.draft(ctx(POOL))
    s = tree.state
    assert (s["confidence"], s["chain_extended"], s["node_budget"], s["spine_len"]) == (0.0, False, 60, 20)
    assert s["spine_ratio"] == 0.5 and not s["ratio_binding"]  # int(60 * 0.5) = 30 >= 20: the tier changed nothing


def test_algorithm_2_reading_bypasses_long_matches():
    d = goose(confident_match="bypass")
    for t in range(V):
        set_row(d.table, t, [(200, 0.5)])
    past_prefill(d, POOL[:-1])
    tree = d.draft(ctx(POOL))  # 20 tokens >= long_match: verified as a chain, no extension
    assert tree.mode == "bypass" and tree.state["route"] == "bypass" and tree.n_verified == 21


# -- routes ------------------------------------------------------------------------------------------------------

def test_routes_prefill_chain_branch_tree_and_ar():
    d = goose()
    pool = [1, 2, 3, 7, 8, 1, 2, 3]
    past_prefill(d, pool[:-1])
    t = d.draft(ctx(pool))  # a match and an empty table: the chain route
    assert (t.mode, t.state["route"], t.state["confidence"]) == ("chain", "chain", 0.0)
    assert [t.tokens[i] for i in range(1, len(t))] == [7, 8, 1, 2, 3] and set(t.sources[1:]) == {"spine"}
    d.accepted(t, [], [7])
    set_row(d.table, 9, [(300, 0.5)])
    t = d.draft(ctx(pool + [7, 9]))  # no n-gram of ...3 7 9 occurred; a table row for 9: a branch tree
    assert (t.mode, t.state["route"]) == ("tree", "branch_tree") and t.tokens[1] == 300
    d.accepted(t, [], [5])
    t = d.draft(ctx(pool + [7, 9, 300, 5]))  # neither: AR
    assert (t.mode, t.state["route"], len(t)) == ("ar", "ar", 1)


# -- the spine tree ----------------------------------------------------------------------------------------------

def rules(**kw) -> BranchRules:
    return BranchRules(**{"min_score": 0.01, "top_k": 10, "max_branch_depth": 6, **kw})


def lookup_from(rows: dict[int, list[tuple[int, float]]], default=()):
    return lambda token, prev: list(rows.get(token, default))


def test_harmonic_split_gives_every_spine_node_a_branch_while_the_share_lasts():
    # H_3 = 11/6: int(5 / H_3) = int(2.73) = 2, int(2.5 / H_3) = int(1.36) = 1, int(1.67 / H_3) = int(0.91) = 0 -> 1.
    assert harmonic_split(5, 3) == [2, 1, 1]
    assert harmonic_split(2, 4) == [1, 1, 0, 0]  # int(2 / H_4) = int(0.96) = 0 -> 1; one left -> 1; none left
    assert harmonic_split(30, 4) == [14, 7, 4, 3]  # int(14.4), int(7.2), int(4.8), int(3.6)
    assert harmonic_split(25, 8) == [9, 4, 3, 2, 1, 1, 1, 1]  # int(9.2), int(4.6), int(3.07), int(2.3), then 1s


def test_bfs_widths_follow_remaining_times_score_and_k_over_depth():
    # No spine, B = 60. The root has one successor, 100 (0.5); every other token has ten, all scored 0.5.
    # remaining = 60 - 2 = 58. Node 100 (depth 1): min(ceil(58 * 0.5) = 29, 10 // 1 = 10) = 10 -> remaining 48.
    # Depth-2 nodes: min(ceil(r * 0.5), 10 // 2 = 5): r = 48, 43, ..., 13 give 5 each (8 nodes, 40 children),
    # r = 8 gives ceil(4) = 4, r = 4 gives 2. Depth-3 nodes: r = 2 -> ceil(1) = 1; r = 1 -> ceil(0.5) = 1. Done.
    fresh = iter(range(1000, 2000))
    rows: dict[int, list] = {7: [(100, 0.5)]}

    def lookup(token, prev):
        if token not in rows:
            rows[token] = [(next(fresh), 0.5) for _ in range(10)]
        return rows[token]

    tree = DraftTree(root_token=7)
    build_spine_tree(tree, lookup, [], 60, 0.5, rules(), None)
    assert tree.n_verified == 60
    assert len(children(tree, 0)) == 1 and len(children(tree, 1)) == 10
    depth2 = children(tree, 1)
    assert [len(children(tree, n)) for n in depth2] == [5] * 8 + [4, 2]
    depth3 = [c for n in depth2 for c in children(tree, n)]
    assert [len(children(tree, n)) for n in depth3[:3]] == [1, 1, 0]


def test_bfs_width_uses_the_score_a_node_was_drafted_at_and_stops_at_min_score():
    # B = 20, no spine. Root successors 100 (0.5), 101 (0.25), 102 (0.0078 < 0.01: cut, kept gated).
    # remaining = 20 - 3 = 17. Node 100 (0.5): width min(ceil(8.5) = 9, 10) = 9; its successors score 0.5, 0.25, ...
    # halving, so the 7th (0.0078) stops it after 6 (the 7th to 9th are gated) -> remaining 11.
    # Node 101 (0.25): ceil(11 * 0.25) = 3 -> 3, remaining 8. Then depth 2 (10 // 2 = 5): the first child of 100
    # (0.5): ceil(4) = 4 -> remaining 4; the next ones (0.25, 0.125, 0.0625, 0.03125): ceil(1), ceil(0.375),
    # ceil(0.125), ceil(0.03125) = 1 each -> remaining 0.
    fresh = iter(range(1000, 2000))
    rows: dict[int, list] = {7: [(100, 0.5), (101, 0.25), (102, 0.0078125)]}

    def lookup(token, prev):
        if token not in rows:
            rows[token] = [(next(fresh), s) for s in HALVES]
        return rows[token]

    tree = DraftTree(root_token=7)
    build_spine_tree(tree, lookup, [], 20, 0.5, rules(), None)
    assert tree.n_verified == 20
    assert [tree.tokens[c] for c in children(tree, 0)] == [100, 101]
    assert [tree.tokens[c] for c in children(tree, 0, gated=True)] == [102]
    n100, n101 = children(tree, 0)
    assert len(children(tree, n100)) == 6 and len(children(tree, n100, gated=True)) == 3
    assert len(children(tree, n101)) == 3
    assert [len(children(tree, n)) for n in children(tree, n100)] == [4, 1, 1, 1, 1, 0]


def test_spine_tree_shares_and_depth_from_the_root():
    # Spine of 8, B = 60, ratio 0.5: m = min(8, 30) = 8; branch budget 51: spine share int(25.5) = 25, root 26.
    # harmonic_split(25, 8) = [9, 4, 3, 2, 1, 1, 1, 1]. Every token has ten successors 500.. scored 0.09 each, except
    # that the spine's own next token is skipped. Spine node i sits at depth i; its branches at depth i + 1 are
    # extended only if i + 1 < 6, so branches off spine nodes 5..8 stay leaves (depth counted from the root).
    chain = list(range(20, 28))
    succ = [(500 + j, 0.09) for j in range(10)]
    tree = DraftTree(root_token=7)
    shape = build_spine_tree(tree, lambda t, p: succ, chain, 60, 0.5, rules(), None)
    assert (shape.spine_len, shape.root_share, shape.spine_share) == (8, 26, 25)
    assert shape.allowances == [9, 4, 3, 2, 1, 1, 1, 1]
    spine = [i for i in range(len(tree)) if tree.sources[i] == "spine"]
    assert [len([c for c in children(tree, s) if tree.sources[c] == "branch"]) for s in spine] == [9, 4, 3, 2, 1, 1, 1, 1]
    assert len(children(tree, 0)) == 1 + 10  # the spine and 10 root branches (the root share of 26 is not reached)
    for s in spine[4:]:
        for b in children(tree, s):
            if tree.sources[b] == "branch":
                assert children(tree, b) == [], "a branch at depth >= 6 is never extended"
    assert tree.n_verified <= 60
    # One successor per token (500): a branch of one node at the root and at every spine node (1 + 8 + 1 + 8 =
    # 18 nodes), then the BFS grows them level by level with the 42 nodes left. From the root, the branches off
    # spine nodes 5..8 stay leaves; with branch_depth_from=fork the branch off spine node 8 (depth 9) grows too.
    one = [(500, 0.09)]
    for fork, grows in ((False, False), (True, True)):
        t = DraftTree(root_token=7)
        build_spine_tree(t, lambda tok, p: one, chain, 60, 0.5, rules(depth_from_fork=fork), None)
        last = [i for i in range(len(t)) if t.sources[i] == "spine"][-1]
        (branch,) = [c for c in children(t, last)]
        assert bool(children(t, branch)) == grows


def test_root_branches_skip_the_first_spine_token_and_spine_branches_the_next():
    succ = [(22, 0.4), (30, 0.3), (21, 0.2), (31, 0.1)]
    tree = DraftTree(root_token=7)
    build_spine_tree(tree, lambda t, p: succ, [21, 22], 12, 0.5, rules(), None)
    # m = 2, branch budget 12 - 1 - 2 = 9: spine share int(4.5) = 4, root 5. Root: 22 30 31 (21 is the spine's
    # first token). harmonic_split(4, 2): int(4 / 1.5) = 2, int(2 / 1.5) = 1. Spine node 21 skips 22 (its next
    # spine token): 30 21. Spine node 22 (the last): 22. BFS, remaining 12 - 9 = 3: root branch 22 (0.4) gets
    # ceil(3 * 0.4) = 2, root branch 30 (0.3) ceil(0.3) = 1; the spine branches get none.
    assert [tree.tokens[c] for c in children(tree, 0) if tree.sources[c] == "branch"] == [22, 30, 31]
    s1, s2 = [i for i in range(len(tree)) if tree.sources[i] == "spine"]
    assert [tree.tokens[c] for c in children(tree, s1) if tree.sources[c] == "branch"] == [30, 21]
    assert [tree.tokens[c] for c in children(tree, s2)] == [22]
    r22, r30, r31 = [c for c in children(tree, 0) if tree.sources[c] == "branch"]
    assert [len(children(tree, n)) for n in (r22, r30, r31)] == [2, 1, 0] and tree.n_verified == 12


def test_no_spine_branches_still_gives_the_spine_one_node():
    # spine_branch_ratio = 0 (Table 2's "w/o spine branches"): max(1, int(branch budget * 0)) = 1.
    tree = DraftTree(root_token=7)
    shape = build_spine_tree(tree, lambda t, p: [(40, 0.5)], [21, 22, 23], 60, 0.5, rules(spine_branch_ratio=0.0), None)
    assert (shape.spine_share, shape.allowances) == (1, [1, 0, 0])


def test_spine_ratio_tiers():
    assert [spine_ratio_tier(p) for p in (0.0, 0.19, 0.2, 0.39, 0.4, 0.9)] == [0.15, 0.15, 0.30, 0.30, 0.50, 0.50]


def test_isotropic_tree_is_k_ary_from_the_table_alone():
    d = goose(IsotropicDrafter, budget=40)
    assert isinstance(d.params, IsotropicParams) and d.params.topology == "isotropic"
    for t in range(V):
        set_row(d.table, t, [(200 + j, 0.3) for j in range(5)])
    pool = [1, 2, 3, 7, 8, 1, 2, 3]
    past_prefill(d, pool[:-1])
    tree = d.draft(ctx(pool))
    # The match 7 8 1 2 3 (5 tokens, one occurrence): confidence 0.6 * 5 / 8 = 0.375, budget
    # 40 + int(0.375 * (100 - 40)) = 62, root included. No spine; 3 + 9 + 27 = 39 nodes to depth 3, the 22 left
    # at depth 4: every internal node has 3 children but the last, which gets 1.
    assert tree.state["node_budget"] == 62 and tree.n_verified == 62 and "spine" not in tree.sources
    internal = [i for i in range(len(tree)) if children(tree, i)]
    assert {len(children(tree, i)) for i in internal[:-1]} == {3}


# -- the table ---------------------------------------------------------------------------------------------------

def test_scores_are_renormalised_over_the_top_k():
    # Row: token 7 at logit 3, tokens 0..6, 8, 9 at -0.001 j (j = their rank among the rest), 2038 more at -1.
    # Over the top 10 the nine small ones score e^-0.001j / (e^3 + sum) ~ 0.034 >= 0.01, so all ten are drafted;
    # a full-vocabulary softmax would give them ~ 0.0006 and cut all but token 7.
    logits = torch.full((V,), -1.0)
    others = [0, 1, 2, 3, 4, 5, 6, 8, 9]
    for j, t in enumerate(others):
        logits[t] = -0.001 * j
    logits[7] = 3.0
    table = GooseTable(V, 10)
    table.harvest([5], *top_of(logits[None], 10))
    succ = table.successors(5)
    z = math.exp(3.0) + sum(math.exp(-0.001 * j) for j in range(9))
    assert [t for t, _ in succ] == [7] + others
    assert [s for _, s in succ] == pytest.approx([math.exp(3.0) / z] + [math.exp(-0.001 * j) / z for j in range(9)], rel=1e-3)
    tree = DraftTree(root_token=5)
    build_spine_tree(tree, lambda t, p: table.successors(t, p), [], 12, 0.5, rules(), None)
    assert len(children(tree, 0)) == 10


def test_a_token_repeated_in_one_harvest_keeps_its_last_row_and_bigrams_are_stored():
    table = GooseTable(32, 2)
    rows = torch.full((3, 32), -5.0)
    rows[0, 10], rows[0, 11] = 2.0, 1.0  # token 4 after 1
    rows[1, 12], rows[1, 13] = 2.0, 1.0  # token 6 after 4
    rows[2, 14], rows[2, 15] = 2.0, 1.0  # token 4 again after 6: the unigram row of 4 is this one
    table.harvest([4, 6, 4], *top_of(rows, 2), [1, 4, 6])
    assert [t for t, _ in table.successors(4)] == [14, 15]
    assert [t for t, _ in table.successors(4, 1)] == [10, 11]  # the bigram (1, 4)
    assert [t for t, _ in table.successors(4, 6)] == [14, 15]
    assert [t for t, _ in table.successors(4, 9)] == [14, 15]  # unknown bigram: the unigram row
    assert table.successors(5) == [] and not table.has_successors(5) and table.has_successors(5, None) is False
    table.harvest([5], *top_of(rows[:1], 2), [None])  # no predecessor: unigram only
    assert table.has_successors(5) and (None, 5) not in table.bigram


def test_tree_cycles_store_no_bigram_for_the_root_and_chain_cycles_do():
    d = goose()
    d.route = "branch_tree"
    logits = torch.randn(3, V)
    d.harvest(rows_of([7, 100, 101], logits, [6, 7, 7]))
    assert (6, 7) not in d.table.bigram and (7, 100) in d.table.bigram and d.table.has_successors(7)
    d.route = "chain"
    d.harvest(rows_of([8, 9], logits[:2], [7, 8]))
    assert (7, 8) in d.table.bigram and (8, 9) in d.table.bigram


def test_prefill_harvest_switch_and_bigram_switch():
    d = goose(use_prefill_harvest=False)
    d.harvest(rows_of([1, 2], torch.randn(2, V), [-1, 1]))  # the prefill
    assert not d.table.observed.any()
    past_prefill(d, [1, 2, 3])
    d.harvest(rows_of([3], torch.randn(1, V), [2]))  # cycle 0: still the prefill's row
    assert not d.table.observed.any()
    d2 = goose(use_bigram=False)
    d2.harvest(rows_of([1, 2], torch.randn(2, V), [-1, 1]))
    assert d2.table.observed[1] and d2.table.observed[2] and not d2.table.bigram


# -- EMA and accounting -----------------------------------------------------------------------------------------

def spine_tree(n_spine: int, n_branch: int) -> DraftTree:
    tree = DraftTree(root_token=7)
    tree.add_chain(list(range(20, 20 + n_spine)), "spine")
    for j in range(n_branch):
        tree.add(0, 300 + j, "branch", 0.5)
    return tree


def test_ema_starts_at_half_and_moves_only_on_spine_tree_cycles():
    d = goose()
    assert d.ema == 0.5
    d.route = "spine_tree"
    t = spine_tree(4, 2)
    out = d.accepted(t, [1], [20, 21])  # 1 of 4 spine nodes: 0.3 * 0.25 + 0.7 * 0.5 = 0.425
    assert out["ema_p_s_after"] == pytest.approx(0.425) and out["spine_broke_at"] == 2
    d.route = "branch_tree"
    assert d.accepted(spine_tree(0, 3), [1], [300, 5])["ema_p_s_after"] == pytest.approx(0.425)
    d.route = "chain"
    assert d.accepted(spine_tree(5, 0), [1, 2], [20, 21, 9])["ema_p_s_after"] == pytest.approx(0.425)
    d.route = "spine_tree"
    assert d.accepted(spine_tree(4, 0), [], [9])["ema_p_s_after"] == pytest.approx(0.7 * 0.425)  # 0.2975
    assert spine_ratio_tier(d.ema) == 0.30  # the next tree's tier
    assert goose(ema_init=0.3).ema == 0.3


def test_spine_continuation_is_counted_with_the_tokens_it_won():
    d = goose()
    d.route = "spine_tree"
    t = spine_tree(3, 0)
    b = t.add(1, 50, "branch", 0.4)
    b2 = t.add(b, 51, "branch", 0.4)
    out = d.accepted(t, [1, b, b2], [20, 50, 51, 52])
    assert out["path"] == "spine_continuation" and out["continuation_tokens"] == 2 and out["spine_broke_at"] == 2
    st = d.stats()
    assert (st["spine_continuations"], st["spine_continuation_tokens"]) == (1, 2)
    assert st["accepted_by_path"]["spine_continuation"] == 3 and st["continuation_token_share"] == pytest.approx(2 / 3)
    assert st["p_s"] == pytest.approx(1 / 3) and st["p_t"] == pytest.approx(1.0)


def test_params_are_checked():
    for bad in ({"ngram_lengths": "5,x"}, {"spine_ratio_tiers": "0.1,0.2"}, {"max_chain": 50, "max_extended_chain": 20},
                {"use_context_match": False, "use_adjacency": False}, {"topology": "round"}):
        with pytest.raises(SpecVizError):
            parse_params("goose", GooseParams, bad)


def test_yield_bound_special_cases():
    assert yield_bound(1.0, 0.0, 5, [0] * 5, [0] * 5) == pytest.approx(6.0)  # a sure spine of 5 + bonus
    assert yield_bound(0.0, 0.0, 3, [4, 2, 1], [6, 6, 6]) == pytest.approx(1.0)
    # p_t = 1, a spine of 1 that fails (p_s = 0), 3 branches at the root with chains of 6: 1 * 1 * 6 + 1.
    assert yield_bound(0.0, 1.0, 1, [3], [6]) == pytest.approx(7.0)
    assert yield_bound(0.0, 1.0, 0, [3], [4]) == pytest.approx(5.0)  # no spine (our extension): phi (1 + 3) + 1


def test_yield_bound_by_hand():
    """p_s = 0.5, p_t = 0.2, a spine of 2 with 2 branches (chains of 2) at the root and 1 (a chain of 1) at node 1:
    spine 0.5 + 0.25; synergy 1 * 0.5 * (1 - 0.8^2) * (1 + 0.2) + 0.5 * 0.5 * 0.2 * 1 = 0.216 + 0.05; bonus 1."""
    assert yield_bound(0.5, 0.2, 2, [2, 1], [2, 1]) == pytest.approx(0.75 + 0.216 + 0.05 + 1.0)


@pytest.mark.parametrize("shape", [(0.5, 0.2, 2, [2, 1], [2, 1]), (0.9, 0.05, 6, [5, 3, 2, 1, 1, 0], [4, 3, 3, 2, 1, 0]),
                                   (0.0, 0.3, 0, [4], [3]), (0.3, 0.6, 3, [0, 2, 0], [0, 5, 0])])
def test_the_yield_distribution_is_the_model_whose_mean_is_the_bound(shape):
    """Proposition 1's model, counted outcome by outcome, sums to 1 and has the bound as its mean; and a Monte Carlo
    run of the same model (spine i.i.d., then the break's branches) agrees with it."""
    import random

    from specviz_core.drafters.goose.stats import yield_distribution

    p_s, p_t, m, widths, depths = shape
    dist = yield_distribution(*shape)
    assert sum(dist) == pytest.approx(1.0)
    assert sum(t * q for t, q in enumerate(dist)) == pytest.approx(yield_bound(*shape))
    rng = random.Random(0)
    counts = [0] * len(dist)
    n = 40000
    for _ in range(n):
        i = 0
        while i < m and rng.random() < p_s:
            i += 1
        t = i + 1
        node = i if m else 0
        if (i < m or m == 0) and any(rng.random() < p_t for _ in range(widths[node] if node < len(widths) else 0)):
            t += 1
            for _ in range((depths[node] if node < len(depths) else 0) - 1):
                if rng.random() >= p_t:
                    break
                t += 1
        counts[t] += 1
    for t, q in enumerate(dist):
        assert counts[t] / n == pytest.approx(q, abs=0.01)


def test_the_chance_of_a_low_yield_by_hand():
    """One spine-tree cycle whose spine failed (p_s = 0) with two root branches at p_t = 0.1: the cycle yields only
    its bonus with probability 0.9^2 = 0.81; two such cycles both do with 0.81^2, and at most 3 tokens in two
    cycles with 0.81^2 + 2 * 0.81 * 0.19."""
    from specviz_core.drafters.goose.stats import chance_at_most, yield_distribution

    d = yield_distribution(0.0, 0.1, 1, [2], [1])
    assert d[1] == pytest.approx(0.81) and d[2] == pytest.approx(0.19)
    assert chance_at_most([d], 1) == pytest.approx(0.81)
    assert chance_at_most([d, d], 2) == pytest.approx(0.81 ** 2)
    assert chance_at_most([d, d], 3) == pytest.approx(0.81 ** 2 + 2 * 0.81 * 0.19)


def test_tree_shape_for_proposition_1_read_from_every_path():
    """Proposition 1's m, w_i and L_i as the paper defines them, computed here from each verified node's whole path
    (no traversal shared with the code): the spine is the first spine child from the root on; w_i counts the verified
    branch children of spine node i (the last spine node's only where the spine is the root alone); L_i is the
    longest verified path below spine node i that starts with one of its branches."""
    import random

    from specviz_core.drafters.goose.stats import shape_sample

    rng = random.Random(5)
    for _ in range(200):
        tree = DraftTree(root_token=1)
        for i in range(rng.randrange(0, 30)):
            parent = rng.randrange(len(tree))
            gated = tree.gated[parent] or rng.random() < 0.2
            tree.add(parent, rng.randrange(50), rng.choice(["spine", "branch"]), gated=gated)
        verified = [i for i in range(len(tree)) if not tree.gated[i]]

        def path(i: int) -> list[int]:  # root .. i
            return [i] if i == 0 else path(tree.parents[i]) + [i]

        spine = [0]
        while True:
            kids = [c for c in verified if c and tree.parents[c] == spine[-1] and tree.sources[c] == "spine"]
            if not kids:
                break
            spine.append(min(kids))
        forks = spine[:-1] if len(spine) > 1 else spine
        widths = [sum(1 for c in verified if c and tree.parents[c] == s and tree.sources[c] == "branch")
                  for s in forks]
        depths = []
        for s in forks:
            below = [path(i) for i in verified]
            chains = [len(p) - p.index(s) - 1 for p in below
                      if s in p and p.index(s) + 1 < len(p) and tree.sources[p[p.index(s) + 1]] == "branch"]
            depths.append(max(chains, default=0))
        got = shape_sample(tree, 3)
        assert (got.m, list(got.widths), list(got.depths), got.tau) == (len(spine) - 1, widths, depths, 3)

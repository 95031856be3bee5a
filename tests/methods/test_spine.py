"""Spine analysis on hand-built cycles whose answer is known by construction (no model, no Qt)."""

from __future__ import annotations

import numpy as np

from specviz_core.analysis.cycle_summary import summarize
from specviz_core.analysis.spine import SpineMatch, analyze_spine, topk_after
from specviz_core.records import CycleRecord, Node

#: (id, parent, token, source, accepted, target_token, target_prob); gated nodes are listed in GATED.
Row = tuple[int, int, int, str, bool, int, "float | None"]


def record(rows: list[Row], *, gated: tuple[int, ...] = (), topk: dict[int, tuple] | None = None,
           state: dict | None = None, mode: str = "tree") -> CycleRecord:
    """A cycle from node rows; verify order is node-id order (gated nodes left out)."""
    depth: dict[int, int] = {}
    nodes = []
    for nid, parent, token, source, accepted, target, prob in rows:
        depth[nid] = 0 if parent < 0 else depth[parent] + 1
        g = nid in gated
        nodes.append(Node(nid, parent, token, source, depth[nid], 1.0, verified=not g, gated=g, accepted=accepted,
                          target_token=-1 if g else target, target_prob=prob))
    order = tuple(n.id for n in nodes if not n.gated)
    path = tuple(n.id for n in sorted(nodes, key=lambda n: n.depth) if n.accepted and n.parent >= 0)
    last = path[-1] if path else 0
    bonus = next(n.target_token for n in nodes if n.id == last)
    rows_topk = tuple((topk or {}).get(nid, ((nodes[nid].target_token, 0.5),)) for nid in order)
    return CycleRecord(index=0, mode=mode, cache_len=10, nodes=tuple(nodes), verify_order=order,
                       mask=np.eye(len(order), dtype=bool), positions=tuple(10 + depth[i] for i in order),
                       accepted_path=path, bonus_token=bonus, committed_ids=tuple(nodes[i].token for i in path) + (bonus,),
                       kv_keep=tuple(range(len(path) + 1)), target_topk=rows_topk, state=state or {})


WANTED_ROW = ((50, 0.6), (12, 0.2), (70, 0.1), (71, 0.05), (72, 0.01))


def test_a_branch_carries_the_path_on_after_the_spine_broke():
    # root -> s1 (accepted) -> s2 (rejected) -> s3; s1 -> b4 (accepted, the wanted 50) -> b5 (accepted); root -> b6.
    rec = record([
        (0, -1, 10, "root", True, 11, None),
        (1, 0, 11, "spine", True, 50, 0.7),
        (2, 1, 12, "spine", False, 13, 0.2),
        (3, 2, 13, "spine", False, 14, 0.3),
        (4, 1, 50, "branch", True, 51, 0.6),
        (5, 4, 51, "branch", True, 52, 0.9),
        (6, 0, 60, "branch", False, 61, 0.01),
    ], topk={1: WANTED_ROW})
    a = analyze_spine(rec)
    assert a.chain == (1, 2, 3) and a.n_accepted == 1
    assert a.broken == 2 and a.broke_at == 2 and a.broke
    assert a.wanted == 50 and a.topk == WANTED_ROW and a.wanted_prob == 0.6 and a.proposed_prob == 0.2
    assert a.continued and a.after == (4, 5)
    assert a.siblings == (4,) and not a.wanted_gated
    s = summarize(rec)
    assert (s.spine_broke_at, s.spine_continued) == (2, True)


def test_first_spine_token_rejected_and_a_root_branch_accepted():
    # The path goes on, but not from a spine node: the summary's "continued" is about the spine only.
    rec = record([
        (0, -1, 10, "root", True, 40, None),
        (1, 0, 11, "spine", False, 12, 0.1),
        (2, 1, 12, "spine", False, 13, 0.5),
        (3, 0, 40, "branch", True, 41, 0.8),
    ])
    a = analyze_spine(rec)
    assert a.chain == (1, 2) and a.n_accepted == 0 and a.broken == 1 and a.broke_at == 1
    assert a.wanted == 40 and a.siblings == (3,)
    assert not a.continued and a.after == (3,)
    assert (summarize(rec).spine_broke_at, summarize(rec).spine_continued) == (1, False)


def test_spine_that_held():
    rec = record([
        (0, -1, 10, "root", True, 11, None),
        (1, 0, 11, "spine", True, 12, 0.9),
        (2, 1, 12, "spine", True, 77, 0.8),
        (3, 0, 30, "branch", False, 31, 0.05),
    ])
    a = analyze_spine(rec)
    assert a.chain == (1, 2) and a.n_accepted == 2
    assert a.broken is None and a.broke_at is None and not a.broke and a.wanted == -1 and a.topk == ()
    assert not a.continued and a.after == () and a.siblings == ()
    assert summarize(rec).spine_broke_at is None


def test_a_tree_without_a_spine():
    rec = record([
        (0, -1, 10, "root", True, 20, None),
        (1, 0, 20, "branch", True, 21, 0.5),
        (2, 0, 22, "table", False, 23, 0.1),
    ])
    a = analyze_spine(rec)
    assert a.chain == () and a.broken is None and a.after == (1,) and a.match is None


def test_a_gated_sibling_had_the_wanted_token():
    rec = record([
        (0, -1, 10, "root", True, 33, None),
        (1, 0, 11, "spine", False, 12, 0.05),
        (2, 0, 34, "branch", False, 35, 0.1),
        (3, 0, 33, "branch", False, -1, None),
    ], gated=(3,))
    a = analyze_spine(rec)
    assert a.broken == 1 and a.wanted == 33 and a.siblings == (2, 3) and a.wanted_gated and a.after == ()


def test_gated_spine_nodes_are_not_part_of_the_chain():
    rec = record([
        (0, -1, 10, "root", True, 11, None),
        (1, 0, 11, "spine", True, 15, 0.9),
        (2, 1, 12, "spine", False, -1, None),
    ], gated=(2,))
    a = analyze_spine(rec)
    assert a.chain == (1,) and a.broken is None


def test_pld_ngram_chain_with_its_match_and_a_probability_from_the_top5():
    # The rejected copy token has no recorded probability: it is read from the parent's top-5 row.
    row = ((90, 0.7), (22, 0.2), (91, 0.05), (92, 0.03), (93, 0.01))
    match = {"ngram": 2, "match_span": [3, 5], "copy_span": [5, 9]}
    rec = record([
        (0, -1, 10, "root", True, 21, None),
        (1, 0, 21, "ngram", True, 90, 0.9),
        (2, 1, 22, "ngram", False, 23, None),
        (3, 2, 23, "ngram", False, 24, 0.3),
    ], topk={1: row}, state={"match": match}, mode="chain")
    a = analyze_spine(rec)
    assert a.chain == (1, 2, 3) and a.broken == 2 and a.wanted == 90
    assert a.proposed_prob == 0.2 and a.wanted_prob == 0.7
    assert a.match == SpineMatch(ngram=2, matched=(3, 5), copied=(5, 9))
    assert analyze_spine(rec.replace(state={"match": None})).match is None


def test_an_unverified_parent_row_falls_back_to_the_top5():
    rec = record([
        (0, -1, 10, "root", True, -1, None),
        (1, 0, 11, "spine", False, 12, 0.1),
    ], topk={0: ((44, 0.9), (11, 0.1))})
    rec = rec.replace(bonus_token=44, committed_ids=(44,))
    a = analyze_spine(rec)
    assert a.wanted == 44 and a.wanted_prob == 0.9 and a.proposed_prob == 0.1


def test_topk_after():
    rec = record([(0, -1, 10, "root", True, 11, None), (1, 0, 11, "spine", True, 12, 0.9)],
                 topk={1: WANTED_ROW})
    assert topk_after(rec, 1) == WANTED_ROW
    assert topk_after(rec, 7) == ()


def test_summary_route_path_and_accepted_tokens_by_path():
    from specviz_core.analysis.cycle_summary import accepted_by_path

    cont = record([
        (0, -1, 10, "root", True, 11, None),
        (1, 0, 11, "spine", True, 50, 0.7),
        (2, 1, 12, "spine", False, 13, 0.2),
        (3, 1, 50, "branch", True, 51, 0.6),
    ], state={"route": "spine_tree", "path": "spine_continuation"})
    branch = record([(0, -1, 10, "root", True, 20, None), (1, 0, 20, "branch", True, 21, 0.5)],
                    state={"route": "branch_tree", "path": "pure_branch"})
    plain = record([(0, -1, 10, "root", True, 11, None), (1, 0, 11, "ngram", True, 12, 0.9)], mode="chain")
    s = [summarize(r) for r in (cont, branch, plain)]
    assert [x.route for x in s] == ["spine_tree", "branch_tree", "chain"]  # no route recorded: the mode
    assert [x.path for x in s] == ["spine_continuation", "pure_branch", None]
    assert accepted_by_path(s) == {"spine_continuation": 2, "pure_branch": 1}

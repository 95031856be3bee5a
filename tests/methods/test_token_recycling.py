"""Token Recycling as its authors publish it: the default tree is their template 2.2.2, ours is an option, and
hot start keeps the adjacency table from one session to the next."""

from __future__ import annotations

import pytest

from helpers import hf_greedy, make_engine, run
from specviz_core.drafters.token_recycling import load_template
from specviz_core.errors import SpecVizError

PROMPT = [5, 9, 13, 5, 9, 13, 5, 9, 21, 33, 5, 9, 13, 40, 41, 42, 5, 9]

#: The published template's last three levels, as its README lists them (levels 4-6 of version 2.2.2).
PUBLISHED_DEEP = {
    4: {(0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 0, 2), (0, 0, 0, 3), (0, 0, 0, 4), (0, 0, 1, 0), (0, 0, 1, 1), (0, 0, 2, 0),
        (0, 0, 3, 0), (0, 0, 4, 0), (0, 1, 0, 0), (0, 2, 0, 0), (1, 0, 0, 0), (2, 0, 0, 0), (3, 0, 0, 0)},
    5: {(0, 0, 0, 0, 0), (0, 0, 0, 0, 1), (0, 0, 0, 0, 2), (0, 0, 0, 1, 0), (0, 0, 0, 2, 0), (0, 0, 1, 0, 0),
        (0, 1, 0, 0, 0), (1, 0, 0, 0, 0)},
    6: {(0, 0, 0, 0, 0, 0), (0, 0, 0, 0, 0, 1), (0, 0, 0, 1, 0, 0)},
}


def level_widths(paths) -> list[int]:
    return [sum(1 for p in paths if len(p) == d) for d in range(1, max(map(len, paths)) + 1)]


def test_the_default_tree_is_the_published_template():
    paths = load_template("official", 80, 6, 8)
    assert level_widths(paths) == [8, 21, 25, 15, 8, 3]
    for depth, want in PUBLISHED_DEEP.items():
        assert {p for p in paths if len(p) == depth} == want
    assert level_widths(load_template("heuristic", 80, 6, 8)) == [8, 18, 17, 19, 11, 7]  # ours, kept as an option


def test_a_smaller_budget_keeps_a_tree_of_the_templates_best_nodes():
    for size in (1, 5, 20, 60):
        paths = load_template("official", size, 6, 8)
        assert len(paths) == size and set(paths) <= set(load_template("official", 80, 6, 8))
        assert all(p[:-1] in set(paths) for p in paths if len(p) > 1)
    assert max(map(len, load_template("official", 80, 3, 8))) == 3


def test_a_filled_table_drafts_the_template(tiny):
    e = make_engine(tiny, "tr", PROMPT, 24)
    records = list(e.cycles())
    full = [r for r in records if r.n_verified == 81]
    assert full, "no cycle drafted the whole template"
    depths = [n.depth for n in full[-1].nodes if n.verified and n.depth > 0]
    assert [depths.count(d) for d in range(1, 7)] == [8, 21, 25, 15, 8, 3]


@pytest.mark.parametrize("tree", ["official", "heuristic"])
def test_both_trees_are_lossless(tiny, tree):
    out, _ = run(tiny, "tr", PROMPT, 32, tree=tree)
    assert out == hf_greedy(tiny, PROMPT, 32)


def test_hot_start_keeps_the_table_across_sessions(tiny):
    first = make_engine(tiny, "tr", PROMPT, 16, hot_start=True)
    list(first.cycles())
    other = [7, 8, 11, 12, 7, 8]
    warm = make_engine(tiny, "tr", other, 4, hot_start=True)
    cold = make_engine(tiny, "tr", other, 4)
    assert warm.drafter.table is first.drafter.table
    seen_before = [t for t in set(PROMPT[:-1]) if t not in other]  # rows the prefill harvested
    assert seen_before and all(bool(warm.drafter.table.filled[t]) for t in seen_before)
    assert not any(bool(cold.drafter.table.filled[t]) for t in seen_before)
    assert run(tiny, "tr", other, 16, hot_start=True)[0] == hf_greedy(tiny, other, 16)  # still lossless


def test_a_bad_tree_is_one_clear_error(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text("{}")
    with pytest.raises(SpecVizError, match="is not a tree file"):
        load_template(str(bad), 80, 6, 8)
    with pytest.raises(SpecVizError, match="cannot read the tree file"):
        load_template(str(tmp_path / "missing.json"), 80, 6, 8)

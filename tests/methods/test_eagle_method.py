"""Issue 44: ``eagle``, EAGLE-2's dynamic draft tree, drafted as the official code does (``topK_genrate``).

The tree it verifies is checked against the algorithm written here from the paper and the official code's steps
(top-k at the root; ``depth`` times: every frontier node drafts its top-k, the k most probable paths of those k x k
become the next frontier; finally the ``budget`` most probable of every candidate by summed log-probability), on a
source whose next-token lists are a fixed function of the path; the method is lossless greedy with every drafter
(and with EAGLE heads in both published layouts, read from folders); "why did this cycle stop" names the reranking
and the expansion limit; the sampling chi-square is in ``tests/engine/test_sampling_lossless.py``.
"""

from __future__ import annotations

import math
import random

import pytest
import torch
from test_eagle_layouts import write_checkpoint

from helpers import compare_greedy, concentrated_llama, hf_greedy, run
from specviz_core.analysis.stop_cause import stop_cause
from specviz_core.drafters.base import DraftContext
from specviz_core.drafters.talon.eagle.dynamic import EagleDrafter
from specviz_core.drafters.talon.next_token import NextTokenSource
from specviz_core.methods.eagle import EagleParams

pytestmark = pytest.mark.usefixtures("one_thread")


def lists_after(path: tuple[int, ...], k: int, vocab: int = 50) -> tuple[list[int], list[float]]:
    """A fixed next-token list after a path: k distinct tokens, probabilities from a seeded Dirichlet-like draw."""
    rng = random.Random(hash(path) & 0xFFFFFFFF)
    toks = rng.sample(range(vocab), k)
    w = [rng.random() ** 3 for _ in range(vocab)]
    total = sum(w)
    probs = sorted((w[i] / total for i in range(k)), reverse=True)
    return toks, probs


class PathSource(NextTokenSource):
    kind = "fake"
    node_source = "head"

    def root(self, ctx, m):
        self.steps += 1
        return lists_after((), m)

    def expand(self, tree, nodes, m):
        self.steps += 1
        return [lists_after(tree.path_tokens(n) if hasattr(tree, "path_tokens") else path_of(tree, n), m)
                for n in nodes]


def path_of(tree, n):
    out = []
    while n != 0:
        out.append(tree.tokens[n])
        n = tree.parents[n]
    return tuple(reversed(out))


def official_selection(k: int, depth: int, budget: int) -> set[tuple[int, ...]]:
    """The token paths EAGLE-2's topK_genrate verifies, written from its steps: scores are summed log-probs."""
    toks, probs = lists_after((), k)
    cands = [((t,), math.log(p)) for t, p in zip(toks, probs)]  # level 1
    frontier = list(cands)
    for _ in range(depth):
        level = []
        for path, s in frontier:
            toks, probs = lists_after(path, k)
            level += [(path + (t,), s + math.log(p)) for t, p in zip(toks, probs)]
        cands += level
        frontier = sorted(level, key=lambda c: -c[1])[:k]
    return {p for p, _ in sorted(cands, key=lambda c: -c[1])[:budget]}


@pytest.mark.parametrize("k,depth,budget", [(10, 7, 59), (4, 3, 10), (3, 5, 40), (5, 0, 3)])
def test_the_tree_is_the_official_selection(k, depth, budget):
    d = EagleDrafter.__new__(EagleDrafter)
    d.params = EagleParams(top_k=k, depth=depth, budget=budget, drafter="table")
    d.source, d.steps_total, d.cycles = PathSource(), 0, 0
    ctx = DraftContext(ids=[1, 2, 3], cache_len=2, max_depth=64, generator=torch.Generator(), temperature=0.0)
    tree = d.draft(ctx)
    got = {path_of(tree, n) for n in range(1, len(tree)) if not tree.gated[n]}
    assert got == official_selection(k, depth, budget)
    # One draft step for the root, one per expansion: every level, or up to the one drafting stopped at (nothing
    # below it could have been verified: the selection above is the official one all the same).
    levels = tree.state.get("stopped_early", depth + 1) - 1
    assert levels <= depth and tree.state["candidates"] == k + levels * k * k
    assert d.source.steps == 1 + levels
    for n in range(1, len(tree)):  # each node's score is its path probability
        want = math.prod(lists_after(path_of(tree, n)[:i], k)[1][lists_after(path_of(tree, n)[:i], k)[0].index(t)]
                         for i, t in enumerate(path_of(tree, n)))
        assert tree.scores[n] == pytest.approx(want, rel=1e-9)


@pytest.fixture(scope="module")
def tiny():
    return concentrated_llama(0)


@pytest.fixture(scope="module")
def head_folders(tmp_path_factory, tiny):
    base = tmp_path_factory.mktemp("eagle-heads")
    write_checkpoint(base / "eagle", "eagle", tiny.model.config, seed=5)
    write_checkpoint(base / "eagle3", "eagle3", tiny.model.config, draft_vocab=20, seed=6, fmt="bin")
    return base


PROMPTS = [[3, 17, 9, 25, 4, 11, 6, 25, 5], [7, 7, 2, 30, 12, 3, 17, 9]]


@pytest.mark.parametrize("kw", [{"drafter": "table"}, {"drafter": "model"}, {"head": "eagle"}, {"head": "eagle3"},
                                {"drafter": "table", "top_k": 3, "depth": 2, "budget": 5}],
                         ids=["table", "model", "eagle-head", "eagle3-head", "small"])
def test_eagle_is_lossless_greedy(tiny, head_folders, kw):
    kw = dict(kw)
    draft = concentrated_llama(1, noise=0.3) if kw.get("drafter") == "model" else None
    if "head" in kw:
        kw["head"] = str(head_folders / kw["head"])
    for prompt in PROMPTS:
        ours, records = run(tiny, "eagle", prompt, 40, draft=draft, **kw)
        ref = hf_greedy(tiny, prompt, 40)
        assert ours[:40] == ref, compare_greedy(tiny, prompt, ours, ref)
        assert all(r.state.get("nodes", 0) <= kw.get("budget", 59) for r in records)


@pytest.mark.parametrize("method", ["talon", "eagle_static"])
def test_talon_and_the_static_tree_draft_with_a_published_head_losslessly(tiny, head_folders, method):
    for layout in ("eagle", "eagle3"):
        ours, records = run(tiny, method, PROMPTS[0], 40, head=str(head_folders / layout))
        assert ours[:40] == hf_greedy(tiny, PROMPTS[0], 40)
        assert records[0].state["drafter"] == "head"


def test_why_a_cycle_stopped_names_the_reranking_and_the_expansion_limit(tiny):
    sentences = []
    for kw in ({"budget": 4}, {"top_k": 3, "depth": 1}):
        _, records = run(tiny, "eagle", PROMPTS[0], 60, drafter="table", **kw)
        sentences += [stop_cause(r).sentence() for r in records]
    assert any("the reranking kept only the budget's most probable candidates" in s for s in sentences)
    assert any("the depth limit: depth=1" in s for s in sentences)


def test_a_fork_to_another_head_method_keeps_the_parents_head(tiny, head_folders):
    """Forking a TALON session on an EAGLE head into eagle (or back) drafts with the same head, as a fork keeps
    the parent's draft model; a method without a head does not get one."""
    from gui_records import session_info
    from specviz_core.session.fork import fork_request

    folder = str((head_folders / "eagle").resolve())
    parent = session_info("talon", PROMPTS[0], head=folder, drafter="auto")
    assert fork_request(parent, method="eagle").choice.params.head == folder
    assert "head" not in vars(fork_request(parent, method="goose").choice.params)
    other = str((head_folders / "eagle3").resolve())
    assert fork_request(parent, method="eagle", params={"head": other}).choice.params.head == other


def test_drafting_stops_where_no_deeper_node_could_be_verified():
    """A small budget under a deep tree: the official selection is kept with fewer draft steps, and the frontier it
    stopped at was no more probable than the last node kept (so no child, never more probable, could be kept)."""
    k, depth, budget = 4, 6, 5
    d = EagleDrafter.__new__(EagleDrafter)
    d.params = EagleParams(top_k=k, depth=depth, budget=budget, drafter="table")
    d.source, d.steps_total, d.cycles = PathSource(), 0, 0
    ctx = DraftContext(ids=[1, 2, 3], cache_len=2, max_depth=64, generator=torch.Generator(), temperature=0.0)
    tree = d.draft(ctx)
    assert {path_of(tree, n) for n in range(1, len(tree)) if not tree.gated[n]} == official_selection(k, depth, budget)
    stopped = tree.state["stopped_early"]
    assert d.source.steps == stopped < 1 + depth
    kept = [tree.scores[n] for n in range(1, len(tree)) if not tree.gated[n]]
    frontier_best = max(tree.scores[n] for n in range(1, len(tree)) if tree.depths[n] == stopped)
    assert frontier_best <= min(kept) * (1 + 1e-12)
    assert any("drafting stopped" in o.get("note", "") for offers in tree.offers.values() for o in offers)

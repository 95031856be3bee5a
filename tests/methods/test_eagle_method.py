"""Issue 44: ``eagle``, EAGLE-2's dynamic draft tree, drafted as the official code does (``topK_genrate``).

The tree it verifies is checked against the algorithm written here from the paper and the official code's steps
(top-k at the root; ``depth`` times: every frontier node drafts its top-k, the k most probable paths of those k x k
become the next frontier; finally the ``budget`` most probable of every candidate by summed log-probability), on a
source whose next-token lists are a fixed function of the path; the method is lossless greedy with every drafter
(and with EAGLE heads in both published layouts, read from folders); "why did this cycle stop" names the reranking
and the expansion limit; the sampling chi-square is in ``tests/engine/test_sampling_lossless.py``.

With a head or a draft model, ``eagle`` and ``eagle_static`` draft every level on the device without reading a value
back, then read the levels back once and write the tree down with the same builder (issue 53): the tree drafted
there is checked against the official selection too, and every record against the same session drafted on the host
a level at a time, with a read costing nothing (the CPU: drafting stops early where it can) and with every read
waiting (a GPU: it drafts on and writes the same tree down). The copies counted per cycle are in
``tests/engine/test_host_copies.py``.
"""

from __future__ import annotations

import math
import random

import pytest
import torch
from test_eagle_layouts import write_checkpoint

from helpers import compare_greedy, concentrated_llama, hf_greedy, make_engine, run
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


def test_the_feature_tap_keeps_features_only_while_a_head_session_lives(tiny, head_folders):
    """An EAGLE-3 head session installs the tap on the target (three layers' inputs, concatenated a forward); once
    the session is gone, a plain session's forwards keep nothing (no concatenation, no features in its rows), as on a
    target no head ever drafted for; a new head session keeps them again, and drafts as a fresh one would."""
    import gc

    from specviz_core.runtime.feature_tap import kept_features

    def last_features(e):
        e.step()
        return kept_features(tiny.model, 1)

    head = make_engine(tiny, "eagle", PROMPTS[0], 12, head=str(head_folders / "eagle3"))
    f = last_features(head)
    assert f is not None and f.shape[-1] == 3 * tiny.model.config.hidden_size
    first = [r.nodes for r in head.cycles()]
    del head
    gc.collect()
    ar = make_engine(tiny, "ar", PROMPTS[0], 4)
    assert last_features(ar) is None and all(r.n_verified == 1 for r in ar.cycles())
    again = make_engine(tiny, "eagle", PROMPTS[0], 12, head=str(head_folders / "eagle3"))
    assert last_features(again) is not None
    assert [r.nodes for r in again.cycles()] == first


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


# -- drafted on the device -------------------------------------------------------------------------------------------

class DevicePathSource(PathSource):
    """:class:`PathSource` as a head gives it: each level's lists as tensors, the rows' paths kept from their parents'
    rows and tokens (as a head keeps its rows' features)."""

    on_device = True

    def top_root(self, ctx, m):
        self.rows: list[tuple[int, ...]] = []
        self.steps += 1
        return self._tensors([lists_after((), m)])

    def top_level(self, parent_rows, tokens, depth, mask, m):
        paths = [(self.rows[p] if p >= 0 else ()) + (t,) for p, t in zip(parent_rows.tolist(), tokens.tolist())]
        assert mask.shape == (len(paths), len(self.rows) + len(paths))
        for i, path in enumerate(paths):  # a row sees the rows of its path's prefixes (its ancestors) and itself
            want = {j for j, q in enumerate(self.rows) if path[:len(q)] == q}
            assert set(torch.nonzero(mask[i, :len(self.rows)]).flatten().tolist()) == want
            assert mask[i, len(self.rows):].tolist() == [j == i for j in range(len(paths))]
        self.rows += paths
        self.steps += 1
        return self._tensors([lists_after(p, m) for p in paths])

    @staticmethod
    def _tensors(lists):
        return (torch.tensor([ids for ids, _ in lists]), torch.tensor([q for _, q in lists], dtype=torch.float32))


@pytest.mark.parametrize("reads_wait", [False, True], ids=["cpu", "gpu"])
@pytest.mark.parametrize("k,depth,budget", [(10, 7, 59), (4, 3, 10), (3, 5, 40), (4, 6, 5)])
def test_the_tree_drafted_on_the_device_is_the_official_selection(k, depth, budget, reads_wait):
    d = EagleDrafter.__new__(EagleDrafter)
    d.params = EagleParams(top_k=k, depth=depth, budget=budget, drafter="head")
    d.source, d.steps_total, d.cycles, d.reads_wait = DevicePathSource(), 0, 0, reads_wait
    ctx = DraftContext(ids=[1, 2, 3], cache_len=2, max_depth=64, generator=torch.Generator(), temperature=0.0)
    tree = d.draft(ctx)
    # float32 probabilities (as a head gives them) choose the same paths as the float64 lists of the reference
    assert {path_of(tree, n) for n in range(1, len(tree)) if not tree.gated[n]} == official_selection(k, depth, budget)
    levels = tree.state.get("stopped_early", depth + 1) - 1
    assert tree.state["candidates"] == k + levels * k * k
    # on the CPU it drafts no level past the early stop; where reads wait it drafts every one
    assert d.source.steps == (1 + depth if reads_wait else 1 + levels)
    for n in range(1, len(tree)):
        path = path_of(tree, n)
        want = math.prod(float(torch.tensor(lists_after(path[:i], k)[1][lists_after(path[:i], k)[0].index(t)],
                                            dtype=torch.float32)) for i, t in enumerate(path))
        assert tree.scores[n] == pytest.approx(want, rel=1e-9)


def same(a, b, where="record") -> None:
    """``a == b``, floats to 1e-9 (a path's log-probability summed by torch or by ``math``)."""
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-300), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    elif hasattr(a, "__dataclass_fields__"):
        for f in a.__dataclass_fields__:
            same(getattr(a, f), getattr(b, f), f"{where}.{f}")
    else:
        assert a == b, where


#: What differs between the ways the levels were drafted: how many draft steps, and their time.
STEPS = {"draft_steps", "delta", "draft_step_ms", "draft_forwards"}
PROMPT = [3, 17, 9, 25, 4, 11, 6, 25, 5]


@pytest.mark.parametrize("method", ["eagle", "eagle_static"])
@pytest.mark.parametrize("kw", [{"head": "eagle"}, {"head": "eagle3"}, {"drafter": "model"},
                                {"head": "eagle", "temperature": 0.8, "seed": 3},
                                {"head": "eagle", "top_k": 4, "depth": 6, "budget": 6}],
                         ids=["eagle-head", "eagle3-head", "model", "sampled", "small"])
def test_a_session_drafted_on_the_device_records_what_the_host_drafts(tiny, head_folders, monkeypatch, method,
                                                                     kw):
    kw = dict(kw)
    if "head" in kw:
        kw["head"] = str(head_folders / kw["head"])
    draft = concentrated_llama(1, noise=0.3) if kw.get("drafter") == "model" else None
    runs = {}
    for way in ("host", "cpu", "gpu"):
        engine = make_engine(tiny, method, PROMPT, 40, draft=draft, **kw)
        drafter = engine.drafter
        drafter.reads_wait = way == "gpu"
        if way == "host":  # the candidates read back at every step, as TALON drafts
            monkeypatch.setattr(drafter.source, "on_device", False)
        runs[way] = (list(engine.cycles()), engine.output_ids, drafter.source.steps)
    host, host_ids, host_steps = runs["host"]
    if "temperature" not in kw:
        assert host_ids[:40] == hf_greedy(tiny, PROMPT, 40)
    for way in ("cpu", "gpu"):
        records, ids, steps = runs[way]
        assert ids == host_ids, way
        assert len(records) == len(host)
        for r, h in zip(records, host):
            same(r.nodes, h.nodes, f"{way} cycle {r.index} nodes")
            same({k: v for k, v in r.state.items() if k not in STEPS},
                 {k: v for k, v in h.state.items() if k not in STEPS}, f"{way} cycle {r.index} state")
        if way == "cpu" or method == "eagle_static":  # the same steps; where reads wait eagle drafts past its stop
            assert steps == host_steps, way
        else:
            assert steps >= host_steps
    if method == "eagle" and kw.get("budget") == 6:
        assert any("stopped_early" in r.state for r in host)  # the early stop was exercised
        assert runs["gpu"][2] > host_steps


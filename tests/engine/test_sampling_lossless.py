"""Speculative sampling is lossless: every method's first tokens follow the target's own distribution.

On a tiny model whose next-token distribution is concentrated, each method
decodes the first three tokens of one prompt under many seeds. The counts of
the three-token sequences are compared, by a chi-square goodness-of-fit test,
with the exact probabilities of plain sampling, computed independently of the
engine: products of softmax(logits / T) from plain, uncached forwards.

Significance level ALPHA = 0.001: a method fails when p < 0.001. The runs are
seeded, so the statistics are reproducible; ``CHI2_RESULTS`` collects them and
the run ends with their table (tests/conftest.py). The same test, run with a deliberately wrong
verifier (seed 003's: accept every node independently with min(1, p/q), keep the
longest accepted path), must fail, which shows the test has power.
"""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare

import specviz_core.engine.cycle as engine_mod
from helpers import concentrated_llama, make_engine, torch_threads
from specviz_core.engine.verify import WalkResult

ALPHA = 0.001
TEMPERATURE = 1.0
N_TOKENS = 2
N_SEEDS = 160
WRONG_SEEDS = 400
MIN_EXPECTED = 5.0
PATTERN = [3, 17, 9, 25, 4, 11]
PROMPT = PATTERN + [6, 25, 5, 10, 21, 6, 10, 19, 31, 30] + PATTERN  # the middle: the target's greedy continuation

CHI2_RESULTS: dict[str, tuple[float, float, int]] = {}
PUBLISHED: dict[str, str] = {}
"""Placeholders in the configs' params -> the folders the models fixture wrote."""

# name -> (method, params, uses a draft model). TALON, the EAGLE-style static tree and EAGLE-2's dynamic tree run with their three drafters
# (n-gram tables of the target's outputs, a draft model unlike the target, a draft head trained for it); ``stand:samples`` keeps
# one STAND drafter across every seed, so its tables persist from sample to sample as with --samples.
CONFIGS = {
    "ar": ("ar", {}, False),
    "pld": ("pld", {}, False),
    "tr": ("tr", {}, False),
    "draft_tree": ("draft_tree", {}, True),
    "goose": ("goose", {}, False),
    "isotropic": ("isotropic", {}, False),
    "talon:table": ("talon", {"drafter": "table"}, False),
    "eagle_static:table": ("eagle_static", {"drafter": "table"}, False),
    "talon:model": ("talon", {"drafter": "model"}, True),
    "eagle_static:model": ("eagle_static", {"drafter": "model"}, True),
    "talon:head": ("talon", {"drafter": "head"}, False),
    "eagle_static:head": ("eagle_static", {"drafter": "head"}, False),
    "eagle:table": ("eagle", {"drafter": "table"}, False),
    "eagle:model": ("eagle", {"drafter": "model"}, True),
    "eagle:head": ("eagle", {"drafter": "head"}, False),
    "eagle:eagle3-layout": ("eagle", {"head": "EAGLE3_HEAD"}, False),
    "talon:eagle3-layout": ("talon", {"head": "EAGLE3_HEAD"}, False),
    "stand": ("stand", {}, False),
    "stand:samples": ("stand", {}, False),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The target, and a draft model unlike it; a draft head trained for the target (``drafter=head``), and one in
    EAGLE-3's published layout, written to a folder (``head=EAGLE3_HEAD`` in the configs)."""
    import os
    import random

    from specviz_core.drafters.talon.head import save_head
    from specviz_core.training.train import train_head

    target = concentrated_llama(0)
    rng = random.Random(3)
    with torch_threads(1):  # set up before the tests' one_thread fixture: trained on one thread too
        head, info = train_head(target, steps=200, text="own", text_tokens=4000, lr=3e-3,
                                prompts=[[rng.randrange(3, 32) for _ in range(8)] for _ in range(8)])
    old = os.environ.get("SPECVIZ_HEADS")
    os.environ["SPECVIZ_HEADS"] = str(tmp_path_factory.mktemp("heads"))
    save_head(target, head, info)
    from specviz_core.drafters.talon.eagle.heads import save_eagle_head

    with torch_threads(1):
        head3, info3 = train_head(target, steps=200, text="own", text_tokens=4000, lr=3e-3, layout="eagle3",
                                  prompts=[[rng.randrange(3, 32) for _ in range(8)] for _ in range(8)])
    PUBLISHED["EAGLE3_HEAD"] = str(save_eagle_head(head3, target.model.config, tmp_path_factory.mktemp("eagle3"), info3))
    yield target, concentrated_llama(1, noise=0.3)
    if old is None:
        os.environ.pop("SPECVIZ_HEADS")
    else:
        os.environ["SPECVIZ_HEADS"] = old


@pytest.fixture(autouse=True)
def one_thread():
    # A 64-wide model gains nothing from intra-op threads, and the CI runner's cores are shared.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@torch.no_grad()
def exact_sequence_probs(m, prompt: list[int], n: int, t: float, floor: float = 1e-7) -> dict[tuple[int, ...], float]:
    """P(first n sampled tokens = s) under plain sampling at temperature t, by plain uncached forwards."""
    seqs: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(n):
        keys = list(seqs)
        logits = m.model(input_ids=torch.tensor([prompt + list(k) for k in keys])).logits[:, -1].double()
        probs = torch.softmax(logits / t, dim=-1)  # [len(keys), V]
        nxt = {}
        for k, row in zip(keys, probs.tolist()):
            for tok, p in enumerate(row):
                if seqs[k] * p > floor:
                    nxt[k + (tok,)] = seqs[k] * p
        seqs = nxt
    return seqs


def chi_square(counts: dict[tuple[int, ...], int], exact: dict[tuple[int, ...], float], n: int) -> tuple[float, float, int]:
    """Sequences expected at least MIN_EXPECTED times are their own category; the rest are pooled."""
    cats = [s for s, p in exact.items() if n * p >= MIN_EXPECTED]
    obs = [counts.get(s, 0) for s in cats]
    exp = [n * exact[s] for s in cats]
    obs.append(n - sum(obs))
    exp.append(n - sum(exp))
    res = chisquare(obs, exp)
    return float(res.statistic), float(res.pvalue), len(cats)


def sample_counts(target, draft, method: str, params: dict, uses_draft: bool, n_seeds: int = N_SEEDS,
                  shared_drafter: bool = False) -> tuple[dict, int]:
    counts: dict[tuple[int, ...], int] = {}
    accepted = 0
    drafter = None
    for seed in range(n_seeds):
        e = make_engine(target, method, PROMPT, N_TOKENS, draft=draft if uses_draft else None,
                        temperature=TEMPERATURE, seed=seed, reuse=drafter, **params)
        if shared_drafter:
            drafter = e.drafter
        for rec in e.cycles():
            accepted += rec.n_accepted
        key = tuple(e.output_ids)
        counts[key] = counts.get(key, 0) + 1
    return counts, accepted


@pytest.fixture(scope="module")
def exact(models):
    return exact_sequence_probs(models[0], PROMPT, N_TOKENS, TEMPERATURE)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_sampling_matches_plain_sampling(models, exact, name):
    method, params, uses_draft = CONFIGS[name]
    params = {k: PUBLISHED.get(v, v) if isinstance(v, str) else v for k, v in params.items()}
    counts, accepted = sample_counts(*models, method, params, uses_draft, shared_drafter=name.endswith(":samples"))
    stat, p, k = chi_square(counts, exact, N_SEEDS)
    CHI2_RESULTS[name] = (stat, p, k)
    print(f"{name}: chi2={stat:.2f} df={k} p={p:.4f} accepted draft tokens={accepted}")
    assert p >= ALPHA, f"{name}: the first {N_TOKENS} tokens do not follow plain sampling (chi2={stat:.1f}, p={p:.2e})"
    if method != "ar":
        assert accepted > N_SEEDS // 4, f"{name} accepted too few draft tokens ({accepted}) to test anything"


def independent_longest_walk(block, probs, kids, tree, generator) -> WalkResult:
    """Seed 003's walk, which is NOT lossless: accept each node independently, keep the longest accepted path."""
    n = len(block.order)
    ok = [True] + [False] * (n - 1)
    resampled: dict[int, int] = {}
    for row in range(1, n):
        par, x = int(block.parent_rows[row]), int(block.tokens[row])
        q = tree.draft_q.get(int(block.order[row]))
        q = torch.nn.functional.one_hot(torch.tensor(x), probs.shape[-1]).float() if q is None else q
        ok[row] = float(torch.rand((), generator=generator)) < min(1.0, float(probs[par, x] / q[x]))
        if not ok[row]:
            adjusted = torch.clamp(probs[par] - q, min=0.0)
            resampled[row] = int(torch.multinomial(adjusted / adjusted.sum(), 1, generator=generator))
    best: list[int] = []

    def dfs(row: int, path: list[int]) -> None:
        nonlocal best
        for c in kids[row]:
            if ok[c] and all(ok[a] for a in path):
                if len(path) + 1 > len(best):
                    best = path + [c]
                dfs(c, path + [c])

    dfs(0, [])
    if best:
        return WalkResult(best, int(torch.multinomial(probs[best[-1]], 1, generator=generator)))
    if kids[0]:
        return WalkResult([], resampled[kids[0][0]])
    return WalkResult([], int(torch.multinomial(probs[0], 1, generator=generator)))


@pytest.mark.parametrize("name", ["tr", "stand"])
def test_chi_square_catches_a_wrong_verifier(models, exact, monkeypatch, name):
    method, params, uses_draft = CONFIGS[name]
    monkeypatch.setattr(engine_mod, "sampling_walk", independent_longest_walk)
    # More seeds than the lossless tests: at 160 the wrong verifier's bias with TR sat near alpha (p = 3e-3).
    counts, _ = sample_counts(*models, method, params, uses_draft, n_seeds=WRONG_SEEDS)
    stat, p, k = chi_square(counts, exact, WRONG_SEEDS)
    CHI2_RESULTS[f"WRONG verifier, {name}"] = (stat, p, k)
    print(f"wrong verifier with {name}: chi2={stat:.2f} df={k} p={p:.2e}")
    assert p < ALPHA, f"the chi-square test did not catch the wrong verifier with {name} (p={p:.3f})"


@pytest.mark.parametrize("method", ["hf_assisted", "hf_prompt_lookup"])
def test_recorded_generate_matches_plain_sampling(models, exact, tmp_path, method):
    """``specviz.record`` around transformers' own sampled generate: the outputs still follow plain sampling, and
    every recorded session holds exactly the tokens its call returned."""
    import specviz
    from specviz_core.recording.store import Recording

    target, draft = models
    x = torch.tensor([PROMPT])
    kw = dict(attention_mask=torch.ones_like(x), do_sample=True, temperature=TEMPERATURE, top_k=0, top_p=1.0,
              max_new_tokens=N_TOKENS, pad_token_id=0)
    kw.update(assistant_model=draft.model) if method == "hf_assisted" else kw.update(prompt_lookup_num_tokens=4)
    counts: dict[tuple[int, ...], int] = {}
    outputs = []
    with specviz.record(tmp_path / "sampled.db") as rec:
        for seed in range(N_SEEDS):
            torch.manual_seed(seed)
            out = tuple(target.model.generate(x, **kw)[0, len(PROMPT):].tolist())
            counts[out] = counts.get(out, 0) + 1
            outputs.append(out)
    with Recording(tmp_path / "sampled.db", read_only=True) as r:
        infos = [r.session(sid) for sid in rec.sessions]
        accepted = sum(c.n_accepted for sid in rec.sessions for c in r.cycles(sid))
    assert [tuple(i.output_ids) for i in infos] == outputs
    assert {(i.method, i.temperature, i.status) for i in infos} == {(method, TEMPERATURE, "complete")}
    stat, p, k = chi_square(counts, exact, N_SEEDS)
    CHI2_RESULTS[f"specviz.record({method})"] = (stat, p, k)
    assert p >= ALPHA, f"recorded {method}: not plain sampling (chi2={stat:.1f}, p={p:.2e})"
    assert accepted > N_SEEDS // 4, f"recorded {method} accepted too few draft tokens ({accepted}) to test anything"

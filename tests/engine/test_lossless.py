"""Greedy output of every method equals transformers' own generate(do_sample=False)."""

from __future__ import annotations

import random

import pytest

from helpers import compare_greedy, hf_greedy, hf_greedy_once, run
from specviz_core.drafters import METHODS

#: Three regimes of the default model: code it copies from the prompt (trees, long accepted paths), text it repeats
#: (the deepest paths), and a raw prompt that ends mid-word (no chat template; mostly plain cycles). Free chat and
#: prose were two more prompts of mostly plain cycles with a short accepted token now and then, the regimes these
#: three cover, at 40% of the test's time.
PROMPTS = {
    "code": "Add type hints to this function:\n\ndef mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(xs)\n",
    "repeats": "Repeat after me three times: red fish, blue fish, red fish, blue fish.",
    "mid_word": "The capital of France is Par",
}


#: Every method but hf_universal, which needs two tokenizers (tests/methods/test_hf_generate.py checks it against generate).
ONE_TOKENIZER = [m for m in METHODS if METHODS[m].draft_shares_tokenizer]
#: transformers' own methods (hf_*) are checked on the default model in tests/methods/test_hf_generate.py, cycle by cycle.
SPECVIZ_METHODS = [m for m in METHODS if not m.startswith("hf_")]

# Tiny-model tests on one thread (the fixture leaves the default model's to conftest's choice for the machine now).
pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_prompts() -> list[list[int]]:
    rng = random.Random(0)
    pat = [rng.randrange(96) for _ in range(5)]
    return [
        [rng.randrange(96) for _ in range(12)],
        pat * 5,
        pat * 3 + [rng.randrange(96) for _ in range(4)] + pat[:2],
        [7],
    ]


@pytest.mark.parametrize("method", ONE_TOKENIZER)
def test_greedy_equals_generate_tiny(tiny, method):
    for prompt in tiny_prompts():
        ref = hf_greedy(tiny, prompt, 48)
        ours, records = run(tiny, method, prompt, 48)
        verdict = compare_greedy(tiny, prompt, ours, ref)
        assert not verdict.startswith("diverged"), f"{method} on {prompt[:8]}...: {verdict}"
        assert sum(len(r.committed_ids) for r in records) == len(ours)


@pytest.fixture(scope="module")
def smol_refs(smol):
    from specviz_core.runtime.models import encode_prompt

    refs = {}
    for name, text in PROMPTS.items():
        chat = name != "mid_word"  # a raw prompt that ends mid-word
        ids, _ = encode_prompt(smol, text, chat_template=chat)
        refs[name] = (ids, hf_greedy_once(smol, ids, 40))  # shared: test_talon.py decodes "code" too
    return refs


@pytest.mark.default_model
@pytest.mark.parametrize("method", SPECVIZ_METHODS)
def test_greedy_equals_generate_default_model(smol, smol_refs, method):
    speculated, modes, sources = 0, set(), set()
    for name, (ids, ref) in smol_refs.items():
        ours, records = run(smol, method, ids, 40)
        verdict = compare_greedy(smol, ids, ours, ref)
        assert not verdict.startswith("diverged"), f"{method} on {name!r}: {verdict}"
        if verdict != "identical":
            print(f"{method} on {name!r}: {verdict} (a near-tie, allowed)")
        accepted = sum(r.n_accepted for r in records)
        if name == "code" and method != "ar":  # the prompt it copies from: every method accepts drafts there
            assert accepted > 0, f"{method} accepted no draft token on {name!r}"
        speculated += accepted
        modes.update(r.mode for r in records)
        sources.update(n.source for r in records for n in r.nodes if n.verified)
        if method in ("goose", "isotropic"):  # the paper's 60 nodes, or up to 100 on confident cycles
            assert all(r.n_verified - 1 <= 100 for r in records)
    if method != "ar":
        assert speculated > 0, f"{method} never accepted a draft token: the comparison exercised nothing"
    if method in ("goose", "isotropic"):  # both of Goose's modes ran, and its trees carried branches off the spine
        assert {"tree", "ar"} <= modes and "branch" in sources, (modes, sources)

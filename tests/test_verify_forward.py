"""The tree mask and position ids against plain forwards, and KV trimming against a fresh prefill."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import DynamicCache

from helpers import make_engine, plain_logits, tiny_llama
from specviz_core.engine.forward import verify_forward
from specviz_core.runtime import kv
from specviz_core.tree import DraftTree, flatten


def random_tree(root: int, vocab: int, n: int, rng: random.Random) -> DraftTree:
    t = DraftTree(root_token=root)
    for _ in range(n):
        parent = rng.randrange(len(t))
        t.add(parent, rng.randrange(vocab), "draft")
    return t


def path_to(tree: DraftTree, node: int) -> list[int]:
    toks = []
    while node != 0:
        toks.append(tree.tokens[node])
        node = tree.parents[node]
    return toks[::-1]


def prefill(m, ids):
    cache = DynamicCache()
    if len(ids) > 1:
        m.model(input_ids=torch.tensor([ids[:-1]]), use_cache=True, **kv.cache_arg(m.model, cache))
    return cache


def check_tree_logits(m, ctx: list[int], tree: DraftTree, atol: float) -> None:
    block = flatten(tree)
    cache = prefill(m, ctx)
    with torch.no_grad():
        logits = verify_forward(m, cache, block, len(ctx) - 1)
    for row, node in enumerate(block.order):
        ref = plain_logits(m, ctx + path_to(tree, int(node)))
        torch.testing.assert_close(logits[row], ref, atol=atol, rtol=1e-4,
                                   msg=lambda s: f"node {int(node)} (depth {tree.depths[int(node)]}): {s}")


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_every_node_matches_plain_forward_tiny(attn):
    m = tiny_llama()
    m.model.set_attn_implementation(attn)
    rng = random.Random(1)
    for trial in range(4):
        ctx = [rng.randrange(96) for _ in range(rng.randrange(1, 30))]
        check_tree_logits(m, ctx, random_tree(ctx[-1], 96, 40, rng), atol=1e-4)


@pytest.mark.default_model
def test_every_node_matches_plain_forward_default(smol):
    rng = random.Random(2)
    ctx = smol.tokenizer("The quick brown fox jumps over the lazy dog. " * 3)["input_ids"]
    check_tree_logits(smol, ctx, random_tree(ctx[-1], 49152, 24, rng), atol=1e-3)


@pytest.mark.parametrize("method", ["tr", "pld", "draft_tree"])
def test_trimmed_cache_equals_fresh_prefill(tiny, method):
    """After each cycle the cache is what a plain prefill of the committed tokens gives."""
    rng = random.Random(3)
    pattern = [rng.randrange(96) for _ in range(6)]
    prompt = pattern * 4 + pattern[:3]
    e = make_engine(tiny, method, prompt, 40)
    trimmed_any = False
    for rec in e.cycles():
        if e.done:
            break
        trimmed_any |= len(rec.kv_keep) < rec.n_verified
        fresh = prefill(tiny, e.ids)
        assert kv.cache_length(e.cache) == kv.cache_length(fresh) == len(e.ids) - 1
        for ours, ref in zip(e.cache.layers, fresh.layers):
            torch.testing.assert_close(ours.keys, ref.keys, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(ours.values, ref.values, atol=1e-4, rtol=1e-4)
        # And the next token's logits through the trimmed cache match a plain forward.
        with torch.no_grad():
            out = tiny.model(input_ids=torch.tensor([[e.ids[-1]]]), position_ids=torch.tensor([[len(e.ids) - 1]]),
                             use_cache=True, **kv.cache_arg(tiny.model, e.cache))
        kv.crop(e.cache, len(e.ids) - 1)
        torch.testing.assert_close(out.logits[0, -1], plain_logits(tiny, e.ids), atol=1e-4, rtol=1e-4)
    assert trimmed_any, "no cycle dropped any KV: the test did not exercise trimming"

"""The tree mask and position ids against plain forwards, and KV trimming against a fresh prefill."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import DynamicCache

from helpers import make_engine, plain_logits, reorder_tol, tiny_llama
from specviz_core.analysis.timing import CostCurve, padded_rows
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


def check_tree_logits(m, ctx: list[int], tree: DraftTree, atol: float, pad: int = 0) -> None:
    block = flatten(tree)
    cache = prefill(m, ctx)
    with torch.no_grad():
        logits = verify_forward(m, cache, block, len(ctx) - 1, len(block.order) + pad).logits
    assert logits.shape[0] == len(block.order)
    for row, node in enumerate(block.order):
        ref = plain_logits(m, ctx + path_to(tree, int(node)))
        torch.testing.assert_close(logits[row], ref, atol=atol, rtol=1e-4,
                                   msg=lambda s: f"node {int(node)} (depth {tree.depths[int(node)]}): {s}")


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("pad", [0, 5])
def test_every_node_matches_plain_forward_tiny(attn, pad):
    """Each node's logits are a plain forward's of its path; with ``pad`` padding rows too (they change nothing)."""
    m = tiny_llama()
    m.model.set_attn_implementation(attn)
    rng = random.Random(1)
    for trial in range(4):
        ctx = [rng.randrange(96) for _ in range(rng.randrange(1, 30))]
        check_tree_logits(m, ctx, random_tree(ctx[-1], 96, 40, rng), atol=1e-4, pad=pad)


@pytest.mark.default_model
def test_every_node_matches_plain_forward_default(smol):
    rng = random.Random(2)
    ctx = smol.tokenizer("The quick brown fox jumps over the lazy dog. " * 3)["input_ids"]
    check_tree_logits(smol, ctx, random_tree(ctx[-1], 49152, 24, rng), atol=1e-3)


#: A CPU-like curve with the kernels' bumps: 2, 3, 5-7 rows cost more than 8, so every block of 2-7 rows is padded
#: to 8, 10-15 to 16, and (a bump exaggerated, for Token Recycling's 81-row blocks) 45-95 to 96.
BUMPY = CostCurve((1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32, 64, 96),
                  (10.0, 20.0, 30.0, 18.0, 19.0, 24.0, 34.0, 17.0, 30.0, 22.0, 40.0, 100.0, 60.0))


@pytest.mark.parametrize("method, pad", [("tr", False), ("pld", False), ("draft_tree", False), ("tr", True),
                                         ("pld", True)])
def test_trimmed_cache_equals_fresh_prefill(tiny, method, pad):
    """After each cycle the cache is what a plain prefill of the committed tokens gives: also when the blocks ran
    padded (``pad``), whose padding rows the trim must drop."""
    rng = random.Random(3)
    pattern = [rng.randrange(96) for _ in range(6)]
    prompt = pattern * 4 + pattern[:3]
    e = make_engine(tiny, method, prompt, 40)
    e.pad_curve = BUMPY if pad else None
    trimmed_any, padded = False, []
    for rec in e.cycles():
        if "padded_to" in rec.state:
            padded.append((rec.n_verified, rec.state["padded_to"]))
        if e.done:
            break
        trimmed_any |= len(rec.kv_keep) < rec.n_verified
        fresh = prefill(tiny, e.ids)
        assert kv.cache_length(e.cache) == kv.cache_length(fresh) == len(e.ids) - 1
        for ours, ref in zip(e.cache.layers, fresh.layers):
            torch.testing.assert_close(ours.keys, ref.keys, atol=reorder_tol(ref.keys), rtol=0)
            torch.testing.assert_close(ours.values, ref.values, atol=reorder_tol(ref.values), rtol=0)
        # And the next token's logits through the trimmed cache match a plain forward.
        with torch.no_grad():
            out = tiny.model(input_ids=torch.tensor([[e.ids[-1]]]), position_ids=torch.tensor([[len(e.ids) - 1]]),
                             use_cache=True, **kv.cache_arg(tiny.model, e.cache))
        kv.crop(e.cache, len(e.ids) - 1)
        ref = plain_logits(tiny, e.ids)
        torch.testing.assert_close(out.logits[0, -1], ref, atol=reorder_tol(ref), rtol=0)
    assert trimmed_any, "no cycle dropped any KV: the test did not exercise trimming"
    if pad:  # the blocks did run padded, to the sizes BUMPY prices lowest
        assert padded and all(run == padded_rows(BUMPY, n) > n for n, run in padded), padded


def test_a_block_is_padded_to_the_cheapest_measured_size_at_or_above_it():
    """By hand from BUMPY: 1 row is the cheapest of all; 2 and 3 rows (20, 30 ms) run as 8 (17 ms), as do 4 (18:
    17 saves 5.6%) and 5-7; nothing above 8 is cheaper; 9 (interpolated, 20.25 ms) has no cheaper size above it;
    10-15 (23.5-30 ms) run as 16 (22 ms, at least 5% less); 17 (23.1 ms) has only 32 (40 ms) above it."""
    assert [padded_rows(BUMPY, n) for n in range(1, 18)] == [1, 8, 8, 8, 8, 8, 8, 8, 9, 16, 16, 16, 16, 16, 16, 16,
                                                             17]
    flat = CostCurve((1, 2, 4, 8), (10.0, 10.0, 9.8, 10.1))  # a GPU's: a 2% dip is noise, not worth the rows
    assert [padded_rows(flat, n) for n in range(1, 9)] == list(range(1, 9))


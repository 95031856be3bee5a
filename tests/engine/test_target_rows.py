"""The one reduction of a forward's rows: what the walk, the record and the harvests read, against torch's own."""

from __future__ import annotations

import numpy as np
import torch

from specviz_core.target_rows import target_rows, top_k


def rows_and_logits():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 300, generator=g) * 3
    logits[1, 7] = logits[1].max() + 1
    logits[1, 3] = logits[1, 7]  # two maxima: argmax gives the lower index
    logits[2] = 0.0  # every logit equal: beyond any top-k
    logits[3, 250] = logits[3, 9] = logits[3, 120] = logits[3].max() + 2  # three tied
    tokens, parents = np.array([1, 7, 3, 9, 4]), np.array([-1, 0, 0, 1, 3])
    return logits, tokens, parents


def test_greedy_rows_are_argmax_softmax_and_top_k():
    logits, tokens, parents = rows_and_logits()
    r = target_rows(logits, tokens, parents, np.full(5, -1), k=8)
    assert r.argmax.tolist() == logits.argmax(-1).tolist()
    p = torch.softmax(logits, -1)
    want = [float(p[max(pr, 0), t]) for pr, t in zip(parents, tokens)]
    assert np.allclose(r.token_prob[1:], want[1:], rtol=1e-6)
    assert r.top_ids.shape == (5, 8)
    assert np.allclose(r.top_probs, np.sort(p.numpy(), axis=1)[:, ::-1][:, :8], rtol=1e-6)  # the 8 largest, in order
    assert np.allclose(r.shown_probs, r.top_probs[:, :5]) and (r.shown_ids == r.top_ids[:, :5]).all()
    ids, probs = r.top(20)  # wider than reduced: another top-k, the same probabilities
    assert np.allclose(probs, np.sort(p.numpy(), axis=1)[:, ::-1][:, :20], rtol=1e-6) and ids.shape == (5, 20)


def test_sampled_rows_show_the_tempered_distribution_and_harvest_the_targets_own():
    logits, tokens, parents = rows_and_logits()
    r = target_rows(logits, tokens, parents, np.full(5, -1), k=8, temperature=0.7)
    pt, p = torch.softmax(logits / 0.7, -1), torch.softmax(logits, -1)
    assert np.allclose(r.token_prob[1:], [float(pt[max(pr, 0), t]) for pr, t in zip(parents[1:], tokens[1:])],
                       rtol=1e-6)
    assert np.allclose(r.shown_probs, pt.topk(5).values.numpy(), rtol=1e-6)
    assert np.allclose(r.top_probs, np.sort(p.numpy(), axis=1)[:, ::-1][:, :8], rtol=1e-6)


def test_the_blocked_top_k_is_torchs_over_large_vocabularies():
    """The CPU's two-pass top-k against ``torch.topk``: vocabularies with and without a tail past the last whole
    block, the best logits crowded into one block or spread, and ties (equal logits: the same values, and every id
    one of a logit that high)."""
    g = torch.Generator().manual_seed(1)
    for vocab in (49152, 50257, 151936):
        logits = torch.randn(6, vocab, generator=g) * 4
        logits[1, 1000:1008] = 50.0 + torch.arange(8.0)  # the top 8 in one block
        logits[2, [3, 20000, vocab - 1]] = 60.0  # tied, one of them in the tail
        logits[3, -5:] = 70.0 + torch.arange(5.0)  # the best in the tail
        logits[4] = 1.0  # every logit equal
        for k in (1, 5, 8):
            values, ids = top_k(logits, k)
            want_values, _ = logits.topk(k, dim=-1)
            assert torch.equal(values, want_values), (vocab, k)
            assert torch.equal(logits.gather(1, ids), values), (vocab, k)  # each id is a logit that high
            assert all(len(set(row)) == k for row in ids.tolist())  # no id twice

"""Issue 33: the EAGLE-3 variant of the draft head (``train-head --features eagle3``).

Its features are the inputs of three decoder layers, checked against transformers' own ``output_hidden_states``;
the training's unrolled steps (training-time test) compute exactly what a draft step computes at run time, checked
against :class:`HeadRunner` drafting a chain through the tree; a trained eagle3 head beats an untrained one on
text it never saw, is saved and loaded with its layers, and TALON and the static tree stay lossless with it.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from helpers import compare_greedy, concentrated_llama, hf_greedy, reorder_tol, run, tiny_llama, torch_threads
from specviz_core.drafters.talon.head import (
    DraftHead,
    HeadRunner,
    eagle3_layers,
    load_head,
    save_head,
)
from specviz_core.runtime.feature_tap import install_feature_tap, tapped_features
from specviz_core.runtime.head_files import head_info
from specviz_core.training.train import train_head, unroll

pytestmark = pytest.mark.usefixtures("one_thread")


def prompts(n: int, seed: int, length: int = 8) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, 32) for _ in range(length)] for _ in range(n)]


@pytest.fixture(scope="module")
def tiny():
    return concentrated_llama(0)


@pytest.fixture(scope="module")
def trained(tiny):
    with torch_threads(1):  # set up before the tests' one_thread fixture: trained on one thread too
        return train_head(tiny, steps=300, text="own", text_tokens=8000, lr=1e-2, prompts=prompts(40, 1),
                          features="eagle3")


@pytest.fixture
def heads(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIZ_HEADS", str(tmp_path / "heads"))


def test_the_layers_are_eagle3s_and_stay_inside_a_shallow_model():
    assert eagle3_layers(30) == (2, 15, 27)  # SmolLM2-135M: EAGLE-3's code taps layers 2, n // 2, n - 3
    assert eagle3_layers(32) == (2, 16, 29)
    assert all(0 <= i < 2 for i in eagle3_layers(2))


@torch.no_grad()
def test_the_tap_keeps_the_three_layers_inputs_as_transformers_reports_them():
    m = tiny_llama(vocab=64, seed=3, layers=4)
    layers = eagle3_layers(4)
    install_feature_tap(m.model, layers, owner=m.model)
    ids = torch.tensor([[5, 9, 11, 2, 7, 30]])
    out = m.model(input_ids=ids, output_hidden_states=True)
    want = torch.cat([out.hidden_states[i][0] for i in layers], dim=-1)  # hidden_states[i]: layer i's input
    assert torch.equal(tapped_features(m.model, 6), want)
    install_feature_tap(m.model, None, owner=m.model)  # back to the LM head's input: the last hidden state, normed
    m.model(input_ids=ids)
    assert torch.equal(tapped_features(m.model, 6), m.model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0])


@pytest.mark.parametrize("layers", [None, (0, 1, 1)], ids=["last", "eagle3"])
@torch.no_grad()
def test_unrolled_training_steps_are_the_draft_steps_of_a_chain(layers):
    """Step k of :func:`unroll` at row t is the head's prediction for the node at depth k - 1 of a chain drafted
    after the committed tokens ``ids[:t - k + 2]``, through tokens ``ids[t - k + 2 .. t]``: computed here by
    the runtime's :class:`HeadRunner`, one tree layer at a time."""
    m = tiny_llama(vocab=64, seed=4, layers=2)
    torch.manual_seed(0)
    head = DraftHead(m.model.config, feature_layers=layers).eval()
    install_feature_tap(m.model, layers, owner=head)
    ids = [3, 17, 40, 8, 8, 21, 5, 60, 12, 33]
    m.model(input_ids=torch.tensor([ids]))
    feats = tapped_features(m.model, len(ids)).float()
    prev = torch.cat([torch.zeros_like(feats[:1]), feats[:-1]])[None]
    emb = m.model.get_input_embeddings()(torch.tensor([ids])).float()
    preds = unroll(head, prev, emb, 3)
    for t in range(2, len(ids)):
        for k in (1, 2, 3):
            committed = ids[: t - k + 2]
            runner = HeadRunner(head, m)
            runner.add_features(0, feats[: len(committed) - 1])
            h = runner.catch_up(committed)
            chain = ids[t - k + 2: t + 1]
            for depth, tok in enumerate(chain, start=1):
                mask = np.ones((1, depth), dtype=bool)  # a chain: each node sees its ancestors and itself
                h = runner.forward_level(h[None], [tok], [depth], mask)[0]
            ref = preds[k - 1][0, t]
            torch.testing.assert_close(h, ref, rtol=0, atol=reorder_tol(h, ref), msg=f"row {t}, step {k}")


def test_a_trained_eagle3_head_agrees_on_text_it_did_not_see_and_is_saved_with_its_layers(tiny, trained, heads):
    head, info = trained
    assert head.feature_layers == eagle3_layers(int(tiny.model.config.num_hidden_layers))
    assert info["ttt_steps"] >= 2
    save_head(tiny, head, info)
    assert head_info(tiny)["features"] == "eagle3"
    loaded = load_head(tiny)
    assert loaded.feature_layers == head.feature_layers
    assert all(torch.equal(v, loaded.trained_state()[k]) for k, v in head.trained_state().items())
    # Agreement measured here, by plain forwards of the target and the runtime's runner, not the trainer's report.
    untrained = DraftHead(tiny.model.config, feature_layers=head.feature_layers).eval()
    hits = {"trained": 0, "untrained": 0}
    n = 0
    install_feature_tap(tiny.model, head.feature_layers, owner=untrained)
    with torch.no_grad():
        for p in prompts(6, 99):
            ids = list(p)
            for _ in range(16):
                ids.append(int(tiny.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
            for cut in range(len(p), len(ids)):
                want = int(tiny.model(input_ids=torch.tensor([ids[:cut]])).logits[0, -1].argmax())
                tiny.model(input_ids=torch.tensor([ids[: cut - 1]]))
                feats = tapped_features(tiny.model, cut - 1)
                for name, h in (("trained", loaded), ("untrained", untrained)):
                    runner = HeadRunner(h, tiny)
                    runner.add_features(0, feats)
                    top, _ = runner.logits.top(runner.catch_up(ids[:cut])[None], 5)
                    hits[name] += want in top[0].tolist()
                n += 1
    assert hits["trained"] / n > 1.5 * 5 / 32 and hits["trained"] > hits["untrained"], (hits, n)


@pytest.mark.parametrize("method", ["talon", "eagle_static"])
def test_drafting_with_an_eagle3_head_is_lossless_greedy(tiny, trained, heads, method):
    save_head(tiny, *trained)
    accepted = 0
    for p in prompts(3, 7) + [[5, 9, 5, 9, 5, 9, 5, 9]]:
        ref = hf_greedy(tiny, p, 40)
        ours, records = run(tiny, method, p, 40)
        assert all(r.state["drafter"] == "head" for r in records)
        assert not compare_greedy(tiny, p, ours, ref).startswith("diverged")
        accepted += sum(r.n_accepted for r in records)
    assert accepted > 0

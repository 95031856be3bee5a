"""Issue 44: heads travel both ways. ``train-head --format eagle|eagle3`` trains a head in EAGLE's published layout
and writes it as the serving engines load it (config.json, model.safetensors); loaded back through the loader, it is
the same head: the same weights, and the same drafts on the target's own features, bit for bit."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from test_stand import word_model_dir  # noqa: F401 - a model folder with a 96-word tokenizer

from helpers import concentrated_llama, hf_greedy, run
from specviz_core.cli.commands import main
from specviz_core.drafters.talon.eagle.heads import Eagle1Head, Eagle3Head, load_eagle_head, save_eagle_head
from specviz_core.drafters.talon.head import HeadRunner
from specviz_core.runtime.feature_tap import install_feature_tap, tapped_features
from specviz_core.training.train import train_head

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny():
    return concentrated_llama(0)


def prompts(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, 32) for _ in range(8)] for _ in range(n)]


@torch.no_grad()
def drafts(head, target, ids: list[int]) -> list[torch.Tensor]:
    """The head's logits at the root and two tree levels after ``ids``, on the target's own features."""
    install_feature_tap(target.model, head.feature_layers, owner=head)
    target.model(input_ids=torch.tensor([ids]))
    r = HeadRunner(head, target)
    r.add_features(0, tapped_features(target.model, len(ids))[:-1])
    h = r.catch_up(ids)[None]
    out = [r.logits(h)]
    top = r.logits.top(h, 3)[0][0].tolist()
    h1 = r.forward_level(h.repeat(3, 1), top, [1, 1, 1], np.eye(3, dtype=bool))
    out.append(r.logits(h1))
    return out


@pytest.mark.parametrize("layout,cls", [("eagle", Eagle1Head), ("eagle3", Eagle3Head)])
def test_a_trained_head_written_in_the_published_layout_loads_back_to_the_same_drafts(tiny, tmp_path, layout, cls):
    head, info = train_head(tiny, steps=60, text="own", text_tokens=3000, lr=1e-2, prompts=prompts(20, 1),
                            layout=layout)
    assert isinstance(head, cls) and info["layout"] == layout
    save_eagle_head(head, tiny.model.config, tmp_path / "head", info)
    cfg = json.loads((tmp_path / "head" / "config.json").read_text())
    # written for vLLM (the default): its EAGLE-1 class from LlamaForCausalLM; EAGLE-3's name serves SGLang too
    assert cfg["architectures"] == [{"eagle": "LlamaForCausalLM", "eagle3": "LlamaForCausalLMEagle3"}[layout]]
    assert cfg["num_hidden_layers"] == 1
    assert ("draft_vocab_size" in cfg) == (layout == "eagle3")
    back = load_eagle_head(tmp_path / "head", tiny)
    a, b = head.published_state(), back.published_state()
    assert set(a) == set(b) and all(torch.equal(a[k].float(), b[k].float()) for k in a)
    for ids in prompts(3, 7):
        for x, y in zip(drafts(head, tiny, ids), drafts(back, tiny, ids)):
            assert torch.equal(x, y)
    # and it drafts: lossless, and faster than one token a cycle on this predictable model
    ours, records = run(tiny, "eagle", prompts(1, 9)[0], 40, head=str(tmp_path / "head"))
    assert ours[:40] == hf_greedy(tiny, prompts(1, 9)[0], 40)
    assert len(records) < 30


def test_train_head_format_eagle3_writes_a_folder_that_drafts(word_model_dir, tmp_path, capsys, monkeypatch):  # noqa: F811
    # A model folder with a 96-word vocabulary: the command reads the shipped answers' held-out part (160 answers)
    # whatever --text-tokens says, which over the default tokenizer's 49,152 rows took 45 s of softmax for a check of
    # the folder it writes (test_gui_head_offer.py trains from the shipped text with that tokenizer).
    tiny_dir = word_model_dir
    monkeypatch.setenv("SPECVIZ_HEADS", str(tmp_path / "heads"))
    assert main(["train-head", "--model", str(tiny_dir), "--format", "eagle3", "--steps", "3", "--text-tokens", "800",
                 "--out", str(tmp_path / "mine"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"--draft-head {tmp_path / 'mine'}" in out and "--format eagle3" in out
    names = sorted(p.name for p in (tmp_path / "mine").iterdir())
    assert names == ["config.json", "model.safetensors", "specviz_head.json"]
    from safetensors import safe_open

    with safe_open(str(tmp_path / "mine" / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert {"fc.weight", "midlayer.self_attn.q_proj.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"} <= keys
    assert main(["train-head", "--model", str(tiny_dir), "--format", "eagle", "--features", "eagle3",
                 "--steps", "1"]) == 2
    assert "leave --features out" in capsys.readouterr().err


def test_writing_over_a_folder_with_an_old_bin_leaves_only_the_new_head(tiny, tmp_path):
    """The official loader (and SpecViz) read pytorch_model.bin before model.safetensors: a stale one must go."""
    head, info = train_head(tiny, steps=5, text="own", text_tokens=600, lr=1e-2, prompts=prompts(4, 2),
                            layout="eagle3")
    (tmp_path / "h").mkdir()
    torch.save({"fc.weight": torch.zeros(1)}, tmp_path / "h" / "pytorch_model.bin")
    save_eagle_head(head, tiny.model.config, tmp_path / "h", info)
    assert not (tmp_path / "h" / "pytorch_model.bin").exists()
    assert load_eagle_head(tmp_path / "h", tiny).layout == "eagle3"

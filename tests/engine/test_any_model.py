"""Any model, exactly: tiny random models of common architectures decode exactly transformers' greedy
``generate`` with PLD, Goose and a draft-model tree (the model drafting for itself, so deep paths are
accepted and a wrong mask or position would show), or are refused at load with one line."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from arch_models import ARCHS, WINDOW, save_tiny

from helpers import compare_greedy, hf_greedy, run
from specviz_core.engine import forward
from specviz_core.engine.selfcheck import check_tree_support
from specviz_core.errors import SpecVizError
from specviz_core.runtime import attention
from specviz_core.runtime.attention import attention_pattern
from specviz_core.runtime.models import encode_prompt, load_model

PROMPT = "The quick brown fox jumps over the lazy dog. " * 6 + "Repeat after me: alpha beta gamma delta alpha beta"
N = 48


@pytest.fixture(scope="module")
def arch_dirs(tmp_path_factory):
    from specviz_core.runtime.models import default_model_dir

    tok = default_model_dir()
    root = tmp_path_factory.mktemp("archs")
    dirs = {}
    for arch in ARCHS:
        save_tiny(arch, root / arch, tok)
        dirs[arch] = root / arch
    return dirs


@pytest.mark.parametrize("arch", list(ARCHS))
def test_every_method_decodes_generates_text(arch, arch_dirs, one_thread):
    m = load_model(str(arch_dirs[arch]), device="cpu")
    check_tree_support(m)  # the load-time self-check passes
    ids, _ = encode_prompt(m, PROMPT, chat_template=False)
    window = m.attention.max_window
    assert len(ids) > 60 and (window is None or window > 1000 or len(ids) > window + N // 2)
    ref = hf_greedy(m, ids, N)
    for method in ("pld", "goose", "draft_tree"):
        out, records = run(m, method, ids, N)
        verdict = compare_greedy(m, ids, out, ref)
        assert verdict == "identical" or verdict.startswith("tie"), f"{arch} {method}: {verdict}"
        if method == "draft_tree":  # the model drafts for itself: whole paths of depth 4 are accepted
            assert max(len(r.accepted_path) for r in records) == 4


def test_attention_choice_follows_the_model(arch_dirs):
    """SDPA where transformers supports it, eager where it does not (Gemma 2, BLOOM)."""
    kernels = {a: load_model(str(arch_dirs[a]), device="cpu").attn_implementation
               for a in ("llama", "gemma2-window", "bloom")}
    assert kernels == {"llama": "sdpa", "gemma2-window": "eager", "bloom": "eager"}
    with pytest.raises(SpecVizError, match="flash-attention cannot take a tree mask"):
        load_model(str(arch_dirs["llama"]), device="cpu", attn_implementation="flash_attention_2")


def test_layer_patterns_are_read_from_the_config(arch_dirs):
    import transformers
    from arch_models import make_config

    assert attention_pattern(make_config("llama")).describe() == "full"
    assert attention_pattern(make_config("mistral-window")).describe() == f"sliding window {WINDOW}"
    g = attention_pattern(make_config("gemma3-window"))
    assert g.keyed and dict(g.windows) == {"sliding_attention": WINDOW, "full_attention": None}
    assert attention_pattern(make_config("bloom")).alibi_heads == 4
    with pytest.raises(SpecVizError, match="chunked_attention"):
        attention_pattern(SimpleNamespace(layer_types=["full_attention", "chunked_attention"], sliding_window=8))
    with pytest.raises(SpecVizError, match="ALiBi"):
        attention_pattern(SimpleNamespace(model_type="mpt", attn_config={"alibi": True}))
    assert transformers  # the configs come from the installed transformers


def test_windowed_mask_follows_transformers_rule():
    """q sees k iff q_pos - k_pos < window (transformers' sliding_window_overlay), cached and tree keys alike."""
    tree = np.array([[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype=bool)
    pos = np.array([10, 11, 12])
    m = attention.additive_mask(tree, 10, torch.float32, torch.device("cpu"), 4, pos, pos)[0, 0] == 0
    want = np.zeros((3, 13), dtype=bool)
    for i, q in enumerate(pos):
        for k in range(13):
            kp = k if k < 10 else pos[k - 10]
            want[i, k] = (k < 10 or tree[i, k - 10]) and q - kp < 4
    assert (m.numpy() == want).all()


@pytest.mark.parametrize("arch,plant", [("mistral-window", "no_window"), ("llama", "siblings_see_each_other"),
                                        ("gemma3-window", "one_mask_for_every_layer")])
def test_self_check_refuses_a_wrong_mask(arch, plant, arch_dirs, monkeypatch):
    m = load_model(str(arch_dirs[arch]), device="cpu")
    right = forward.tree_masks

    def wrong(pattern, tree_mask, cache_len, dtype, device, rows, cols):
        if plant == "no_window":
            return attention.additive_mask(tree_mask, cache_len, dtype, device)
        if plant == "siblings_see_each_other":
            return attention.additive_mask(np.tril(np.ones_like(tree_mask)), cache_len, dtype, device)
        return right(pattern, tree_mask, cache_len, dtype, device, rows, cols)["full_attention"]

    monkeypatch.setattr(forward, "tree_masks", wrong)
    with pytest.raises(SpecVizError, match="does not honour the tree mask and positions"):
        check_tree_support(m)


def test_memory_plan_from_the_safetensors_headers(arch_dirs):
    """The estimate is the parameter count times the dtype's size, read without loading the weights."""
    from specviz_core.runtime.models import plan_memory, weights_bytes

    m = load_model(str(arch_dirs["llama"]), device="cpu")
    n = sum(p.numel() for p in m.model.parameters())  # a tied embedding is one parameter, stored once
    assert weights_bytes(arch_dirs["llama"], torch.float32) == 4 * n
    assert weights_bytes(arch_dirs["llama"], torch.bfloat16) == 2 * n
    plan = plan_memory(arch_dirs["llama"], torch.device("cpu"), torch.float32)
    assert plan.device_map is None and plan.weights_gb == pytest.approx(4 * n / 1e9)


def test_a_model_larger_than_memory_is_refused_in_one_line(arch_dirs, monkeypatch):
    import psutil

    from specviz_core.runtime import models

    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=1000))
    with pytest.raises(SpecVizError, match=r"needs ~.* GB at float32; this machine has .* GB of RAM free"):
        models.load_model(str(arch_dirs["llama"]), device="cpu")


@pytest.mark.parametrize("device,message", [("meta", "unsupported device"), ("cuda:7", "no GPU"),
                                            ("gpu!", "unknown device")])
def test_bad_devices_are_refused_in_one_line(device, message):
    from specviz_core.runtime.models import pick_device

    if torch.cuda.is_available() and device == "cuda:7" and torch.cuda.device_count() > 7:
        pytest.skip("this machine has 8 GPUs")
    with pytest.raises(SpecVizError, match=message):
        pick_device(device)

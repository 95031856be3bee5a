"""Issue 53: heads that load as written in vLLM and in SGLang.

The two engines' loaders are re-implemented below from their source, as far as a checkpoint's files reach them: the
class name each builds from ``config.json``'s ``architectures``, the parameters that class has (their shapes from the
config, the attention's biases from ``attention_bias`` / ``bias``), and how each maps a file's weight names onto them
(q/k/v and gate/up stacked, ``midlayer.`` renamed, what is skipped, what stops the load, what the target lends). A
folder "loads as written" when nothing stops the load and every parameter gets a tensor of its shape from the file or
from the target; a parameter left as initialised (random, or uninitialised memory) is a failure. Each folder
``save_eagle_head`` writes, for each engine, is checked against them; so is the reverse (the other engine's folder
fails), which shows the re-implementations see the faults the issue names. Read back here, a written head drafts
the same logits as before it was written.
"""

from __future__ import annotations

import json

import pytest
import torch
from test_eagle_round_trip import drafts, prompts

from helpers import concentrated_llama
from specviz_core.drafters.talon.eagle.heads import (
    SERVING_ENGINES,
    Eagle1Head,
    architecture_for,
    config_of,
    load_eagle_head,
    published_head_for,
    save_eagle_head,
)
from specviz_core.errors import SpecVizError

pytestmark = pytest.mark.usefixtures("one_thread")

LAYOUT_METHOD = {"eagle": "eagle", "eagle3": "eagle3"}
"""The method each layout is served with (vLLM's ``method``; SGLang's ``--speculative-algorithm`` EAGLE / EAGLE3)."""


class Refused(Exception):
    """The engine's loader stops: a class it has not, or a weight its model has not."""


def _read_folder(folder):
    from safetensors import safe_open

    cfg = json.loads((folder / "config.json").read_text())
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118 (safe_open is not iterable)
    return cfg, shapes


def _stacked(name):
    """The fused parameter a q/k/v or gate/up weight loads into, with its shard (both engines stack them alike)."""
    for shard, fused, sid in ((".q_proj", ".qkv_proj", "q"), (".k_proj", ".qkv_proj", "k"),
                              (".v_proj", ".qkv_proj", "v"), (".gate_proj", ".gate_up_proj", "0"),
                              (".up_proj", ".gate_up_proj", "1")):
        if shard in name:
            return name.replace(shard, fused) + f"[{sid}]"
    return None


def _layer(cfg, prefix, attn_in, *, qkv_bias, o_bias, input_norm, hidden_norm):
    """A Llama decoder layer's parameters and shapes, stacked shards as ``name[shard]``."""
    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv, inter = cfg.get("num_key_value_heads", nh), cfg["intermediate_size"]
    hd = cfg.get("head_dim") or h // nh  # both engines: head_dim when the config sets it, else hidden / heads
    p = {f"{prefix}self_attn.qkv_proj.weight[q]": (nh * hd, attn_in),
         f"{prefix}self_attn.qkv_proj.weight[k]": (nkv * hd, attn_in),
         f"{prefix}self_attn.qkv_proj.weight[v]": (nkv * hd, attn_in),
         f"{prefix}self_attn.o_proj.weight": (h, nh * hd),
         f"{prefix}mlp.gate_up_proj.weight[0]": (inter, h), f"{prefix}mlp.gate_up_proj.weight[1]": (inter, h),
         f"{prefix}mlp.down_proj.weight": (h, inter), f"{prefix}post_attention_layernorm.weight": (h,)}
    if qkv_bias:
        p.update({f"{prefix}self_attn.qkv_proj.bias[q]": (nh * hd,), f"{prefix}self_attn.qkv_proj.bias[k]": (nkv * hd,),
                  f"{prefix}self_attn.qkv_proj.bias[v]": (nkv * hd,)})
    if o_bias:
        p[f"{prefix}self_attn.o_proj.bias"] = (h,)
    if input_norm:
        p[f"{prefix}input_layernorm.weight"] = (h,)
    if hidden_norm:
        p[f"{prefix}hidden_norm.weight"] = (h,)
    return p


def _attention_bias(cfg):
    """Both engines' Llama layers: ``attention_bias or bias`` gives q/k/v and o_proj biases."""
    return bool(cfg.get("attention_bias") or cfg.get("bias"))


# -- vLLM ----------------------------------------------------------------------------------------------------------
# The class: vllm-project/vllm, vllm/transformers_utils/configs/eagle.py (EAGLEConfig renames the draft's classes by
# method) and vllm/model_executor/models/registry.py (_SPECULATIVE_DECODING_MODELS). The models and their
# load_weights: vllm/model_executor/models/llama_eagle.py (EAGLE-1/2) and llama_eagle3.py (EAGLE-3); the layers'
# biases as vllm/model_executor/models/llama.py reads them.

VLLM_CLASSES = {"EagleLlamaForCausalLM": "eagle", "Eagle3LlamaForCausalLM": "eagle3",
                "LlamaForCausalLMEagle3": "eagle3"}


def vllm_class(cfg, method):
    arch = cfg["architectures"][0]
    if method == "eagle":
        arch = arch if arch.startswith("Eagle") else "Eagle" + arch
    else:
        arch = arch if arch.startswith("Eagle3") or arch.endswith("Eagle3") else "Eagle3" + arch
    if VLLM_CLASSES.get(arch) != method:
        raise Refused(f"vLLM: model architectures ['{arch}'] are not supported")
    return arch


def vllm_load(cfg, shapes, method):
    """(class, loaded {param: shape}, params left as initialised) as vLLM loads the folder."""
    cls = vllm_class(cfg, method)
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    attn_bias = _attention_bias(cfg)
    if method == "eagle":
        params = {"fc.weight": (h, 2 * h), "embed_tokens.weight": (v, h)}  # fc: bias=False
        params.update(_layer(cfg, "layers.0.", h, qkv_bias=cfg.get("qkv_bias", attn_bias), o_bias=attn_bias,
                             input_norm=False, hidden_norm=False))  # layer 0's input norm is an Identity
        lent = {"embed_tokens.weight"}  # without pipeline parallelism the draft shares the target's embedding
    else:
        vd = cfg.get("draft_vocab_size") or v
        params = {"fc.weight": (h, 3 * cfg.get("target_hidden_size", h)), "norm.weight": (h,),
                  "lm_head.weight": (vd, h), "draft_id_to_target_id": (vd,), "embed_tokens.weight": (v, h)}
        # q/k/v read [embedding, feature] (2 x hidden) with a bias only from attention_bias; o_proj's from bias too
        params.update(_layer(cfg, "layers.0.", 2 * h, qkv_bias=bool(cfg.get("attention_bias")), o_bias=attn_bias,
                             input_norm=True, hidden_norm=True))
        lent = {"embed_tokens.weight"} | ({"draft_id_to_target_id"} if vd == v else set())  # zeros: the identity
    loaded = {}
    for name, shape in shapes.items():
        if method == "eagle3":
            if "t2d" in name:
                continue
            name = name.replace("d2t", "draft_id_to_target_id").replace("midlayer.", "layers.0.")
        elif "embed_tokens." in name:
            continue  # skipped: the target's embedding is used
        key = _stacked(name) or name
        if key not in params:
            raise Refused(f"vLLM: KeyError {key!r} (params_dict[name])")
        loaded[key] = shape
    return cls, loaded, sorted(set(params) - set(loaded) - lent), params


# -- SGLang --------------------------------------------------------------------------------------------------------
# sgl-project/sglang: python/sglang/srt/models/llama_eagle.py (LlamaForCausalLMEagle: fc always with a bias, layer
# 0 without input norm, load_weights prefixing model. and dropping lm_head), llama_eagle3.py (LlamaForCausalLMEagle3:
# fc's bias from the config's bias, midlayer, d2t as hot tokens, t2d skipped), llama.py (the layers' biases from
# attention_bias or bias; load_weights skipping names the model lacks); the class is the config's architectures[0]
# (python/sglang/srt/configs/model_config.py renames no Llama draft); the EAGLE worker lends the target's embedding
# (and, for EAGLE-1/2, its LM head) after loading.

SGLANG_CLASSES = {"LlamaForCausalLMEagle": "eagle", "LlamaForCausalLMEagle3": "eagle3"}


def sglang_load(cfg, shapes, method):
    cls = cfg["architectures"][0]
    if SGLANG_CLASSES.get(cls) != method:
        raise Refused(f"SGLang: {cls} is not its {method} draft class (it would build {cls} itself)")
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    attn_bias = _attention_bias(cfg)
    if method == "eagle":
        params = {"model.embed_tokens.weight": (v, h), "model.fc.weight": (h, 2 * h), "model.fc.bias": (h,),
                  "lm_head.weight": (v, h)}
        params.update(_layer(cfg, "model.layers.0.", h, qkv_bias=attn_bias, o_bias=attn_bias, input_norm=False,
                             hidden_norm=False))
        lent = {"model.embed_tokens.weight", "lm_head.weight"}
    else:
        if "draft_vocab_size" not in cfg:
            raise Refused("SGLang: AttributeError draft_vocab_size")
        params = {"model.embed_tokens.weight": (v, h), "model.fc.weight": (h, 3 * cfg.get("target_hidden_size", h)),
                  "model.norm.weight": (h,), "lm_head.weight": (cfg["draft_vocab_size"] or v, h)}
        if cfg.get("bias"):
            params["model.fc.bias"] = (h,)
        params.update(_layer(cfg, "model.midlayer.", 2 * h, qkv_bias=False, o_bias=attn_bias, input_norm=True,
                             hidden_norm=True))
        lent = {"model.embed_tokens.weight"} if cfg.get("target_hidden_size", h) == h else set()
    loaded = {}
    for name, shape in shapes.items():
        if method == "eagle":
            if "lm_head" in name:
                continue
            name = "model." + name
        elif "d2t" in name or "t2d" in name:
            continue  # d2t becomes the hot token ids (a buffer, not a parameter); t2d is skipped
        elif not name.startswith("lm_head"):
            name = "model." + name
        key = _stacked(name) or name
        if key in params:  # a name the model lacks is skipped (with a warning, or silently for a .bias)
            loaded[key] = shape
    return cls, loaded, sorted(set(params) - set(loaded) - lent), params


LOADERS = {"vllm": vllm_load, "sglang": sglang_load}


def loads_as_written(engine, folder, layout):
    """The class ``engine`` builds for the folder; fails naming what its loader would leave or refuse."""
    cfg, shapes = _read_folder(folder)
    cls, loaded, unset, params = LOADERS[engine](cfg, shapes, LAYOUT_METHOD[layout])
    wrong = {k: (s, params[k]) for k, s in loaded.items() if s != params[k]}
    assert not wrong, f"{engine}: shapes differ (file, model): {wrong}"
    assert not unset, f"{engine}: left as initialised: {unset}"
    return cls


# -- heads -----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def target():
    return concentrated_llama(0)


def random_head(target, layout, seed=0, fc_bias=False):
    """A head shaped for ``target`` with random weights (EAGLE-3: a 16-token draft vocabulary); ``fc_bias``: an
    EAGLE-1/2 head whose fc has a (non-zero) bias."""
    torch.manual_seed(seed)
    head = published_head_for(target, layout, vocab=torch.arange(0, 32, 2) if layout == "eagle3" else None)
    if fc_bias:
        head = Eagle1Head(dict(head.raw_config, bias=True))
    with torch.no_grad():
        for p in head.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return head.eval()


@pytest.mark.parametrize("engine", SERVING_ENGINES)
@pytest.mark.parametrize("layout", ["eagle", "eagle3"])
def test_each_engine_loads_every_weight_of_the_folder_written_for_it(target, tmp_path, layout, engine):
    save_eagle_head(random_head(target, layout), target.model.config, tmp_path / "h", engine=engine)
    cls = loads_as_written(engine, tmp_path / "h", layout)
    assert cls == {("eagle", "vllm"): "EagleLlamaForCausalLM", ("eagle", "sglang"): "LlamaForCausalLMEagle",
                   ("eagle3", "vllm"): "LlamaForCausalLMEagle3", ("eagle3", "sglang"): "LlamaForCausalLMEagle3"}[
        (layout, engine)]
    cfg = json.loads((tmp_path / "h" / "config.json").read_text())
    assert cfg["architectures"] == [architecture_for(layout, engine)]
    assert cfg.get("bias") is not True and "attention_bias" not in cfg and "head_dim" not in cfg
    assert json.loads((tmp_path / "h" / "config.json").read_text()) == config_of(
        random_head(target, layout), target.model.config, engine)


def test_an_eagle3_folder_is_one_folder_both_engines_load(target, tmp_path):
    head = random_head(target, "eagle3")
    for engine in SERVING_ENGINES:
        save_eagle_head(head, target.model.config, tmp_path / engine, engine=engine)
        for reader in SERVING_ENGINES:
            loads_as_written(reader, tmp_path / engine, "eagle3")
    assert (tmp_path / "vllm" / "config.json").read_text() == (tmp_path / "sglang" / "config.json").read_text()
    weights = [(tmp_path / engine / "model.safetensors").read_bytes() for engine in SERVING_ENGINES]
    assert weights[0] == weights[1]


def test_an_eagle1_folder_for_one_engine_fails_in_the_other_as_the_issue_says(target, tmp_path):
    """The re-implemented loaders see the faults: SGLang builds no EAGLE model from vLLM's class name, and with the
    class renamed its fc.bias stays random (the folder has none); vLLM has no class for SGLang's name, and with it
    renamed the fc.bias stops its loader."""
    head = random_head(target, "eagle")
    for engine in SERVING_ENGINES:
        save_eagle_head(head, target.model.config, tmp_path / engine, engine=engine)
    with pytest.raises(Refused, match="not its eagle draft class"):
        loads_as_written("sglang", tmp_path / "vllm", "eagle")
    with pytest.raises(Refused, match="EagleLlamaForCausalLMEagle"):
        loads_as_written("vllm", tmp_path / "sglang", "eagle")
    cfg, shapes = _read_folder(tmp_path / "vllm")
    _, _, unset, _ = sglang_load(dict(cfg, architectures=["LlamaForCausalLMEagle"]), shapes, "eagle")
    assert unset == ["model.fc.bias"]
    cfg, shapes = _read_folder(tmp_path / "sglang")
    with pytest.raises(Refused, match="fc.bias"):
        vllm_load(dict(cfg, architectures=["LlamaForCausalLM"]), shapes, "eagle")
    # and a "bias": true key (what the writer gave a head with an fc bias) gives both engines attention biases the
    # file has not
    for engine, name in (("vllm", "EagleLlamaForCausalLM"), ("sglang", "LlamaForCausalLMEagle")):
        cfg, shapes = _read_folder(tmp_path / engine)
        _, _, unset, _ = LOADERS[engine](dict(cfg, bias=True), shapes, "eagle")
        assert any("o_proj.bias" in k for k in unset) and any("qkv_proj.bias" in k for k in unset), (engine, unset)


def test_a_biasless_eagle1_head_is_written_with_a_zero_fc_bias_for_sglang_and_none_for_vllm(target, tmp_path):
    head = random_head(target, "eagle")
    assert head.fc.bias is None
    for engine in SERVING_ENGINES:
        save_eagle_head(head, target.model.config, tmp_path / engine, engine=engine)
        cfg = json.loads((tmp_path / engine / "config.json").read_text())
        assert cfg["bias"] is False  # the official loader's fc then has no bias; the engines' attention none either
    from safetensors.torch import load_file

    sg, vl = (load_file(str(tmp_path / engine / "model.safetensors")) for engine in ("sglang", "vllm"))
    assert sg["fc.bias"].shape == (head.hidden_size,) and not sg["fc.bias"].any()
    assert "fc.bias" not in vl and set(sg) - set(vl) == {"fc.bias"}
    assert all(torch.equal(sg[k], vl[k]) for k in vl)


@pytest.mark.parametrize("engine", SERVING_ENGINES)
@pytest.mark.parametrize("layout", ["eagle", "eagle3"])
def test_a_written_head_reads_back_to_the_same_draft_logits(target, tmp_path, layout, engine):
    head = random_head(target, layout, seed=3)
    save_eagle_head(head, target.model.config, tmp_path / "h", engine=engine)
    back = load_eagle_head(tmp_path / "h", target)
    for ids in prompts(3, 5):
        for x, y in zip(drafts(head, target, ids), drafts(back, target, ids)):
            assert torch.equal(x, y)


def test_a_zero_fc_bias_without_a_bias_key_reads_back_to_the_same_logits(target, tmp_path):
    """Another trainer's SGLang folder: fc.bias zeros and no "bias" key (the official default, a bias). SpecViz then
    builds fc with the bias, all zeros, and drafts bit for bit what the bias-less head drafts."""
    head = random_head(target, "eagle", seed=4)
    save_eagle_head(head, target.model.config, tmp_path / "h", engine="sglang")
    cfg = json.loads((tmp_path / "h" / "config.json").read_text())
    del cfg["bias"]
    (tmp_path / "h" / "config.json").write_text(json.dumps(cfg))
    back = load_eagle_head(tmp_path / "h", target)
    assert back.fc.bias is not None and not back.fc.bias.any()
    for ids in prompts(3, 6):
        for x, y in zip(drafts(head, target, ids), drafts(back, target, ids)):
            assert torch.equal(x, y)


def test_an_eagle1_head_with_an_fc_bias_is_written_for_sglang_and_refused_for_vllm(target, tmp_path):
    head = random_head(target, "eagle", seed=5, fc_bias=True)
    assert head.fc.bias is not None and head.fc.bias.abs().min() > 0
    save_eagle_head(head, target.model.config, tmp_path / "sg", engine="sglang")
    cfg = json.loads((tmp_path / "sg" / "config.json").read_text())
    assert "bias" not in cfg  # the official default (a bias) reads it; true would give the engines attention biases
    loads_as_written("sglang", tmp_path / "sg", "eagle")
    back = load_eagle_head(tmp_path / "sg", target)
    assert torch.equal(back.fc.bias, head.fc.bias)
    for ids in prompts(2, 7):
        for x, y in zip(drafts(head, target, ids), drafts(back, target, ids)):
            assert torch.equal(x, y)
    with pytest.raises(SpecVizError, match="vLLM's EAGLE-1 model has not"):
        save_eagle_head(head, target.model.config, tmp_path / "vl", engine="vllm")
    assert not (tmp_path / "vl").exists()
    for layout in ("eagle", "eagle3"):
        with pytest.raises(SpecVizError, match="vllm, sglang"):
            save_eagle_head(random_head(target, layout), target.model.config, tmp_path / "x", engine="tgi")
    assert not (tmp_path / "x").exists()


def test_train_head_for_sglang_writes_sglangs_eagle1_folder(tiny_dir, tmp_path, capsys, monkeypatch):
    """``--for`` reaches the writer (the training itself is the round-trip tests' business: a random head here)."""
    from specviz_core.cli.commands import main

    def train_head(target, *, layout, **_):
        torch.manual_seed(0)
        a = {"positions": 1, "top1": 0.0, "top5": 0.0, "top1_step2": 0.0, "top5_step2": 0.0}
        return published_head_for(target, layout), {
            "agreement": a, "held_out_answers": 1, "calibration": {"temperature": 1.0, "applied": False},
            "steps": 2, "text_tokens": 300, "answer_tokens": 300, "minutes": 0.0, "layout": layout}

    monkeypatch.setattr("specviz_core.training.train.train_head", train_head)

    with pytest.raises(SystemExit):
        main(["train-head", "--help"])
    assert "--for {vllm,sglang}" in capsys.readouterr().out
    assert main(["train-head", "--model", str(tiny_dir), "--for", "sglang", "--steps", "1"]) == 2
    assert "--for is for --format eagle or eagle3" in capsys.readouterr().err
    assert main(["train-head", "--model", str(tiny_dir), "--format", "eagle", "--for", "sglang", "--steps", "2",
                 "--text-tokens", "300", "--out", str(tmp_path / "sg"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "SGLang loads that folder" in out and "--format eagle --for sglang" in out
    assert loads_as_written("sglang", tmp_path / "sg", "eagle") == "LlamaForCausalLMEagle"
    assert json.loads((tmp_path / "sg" / "specviz_head.json").read_text())["written_for"] == "sglang"

"""Issue 44: EAGLE heads in their published layouts (EAGLE-1/2: ``cnets1.py``; EAGLE-3: ``cnets.py``).

A checkpoint written here in each layout (random weights; ``config.json`` with the published keys;
``pytorch_model.bin`` or ``model.safetensors``; the tiny model's shapes and the default model's) is loaded through
SpecViz's loader and drafted through its runner; the draft logits are compared with a plain reference
implementation of the published architecture written below from the papers' equations (RMSNorm, rotary positions,
grouped-query attention, SwiGLU), reading the state dict by its published names: the official pairing (row t takes
the target's feature at t and the token at t + 1, at position t), a tree level's nodes at one position and
seeing only their ancestors. A head that does not fit the target is refused in one line naming the mismatch.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from helpers import tiny_llama
from specviz_core.drafters.talon.eagle.heads import load_eagle_head
from specviz_core.drafters.talon.head import HeadRunner
from specviz_core.errors import SpecVizError
from specviz_core.runtime.head_files import check_head_folder, describe_head_folder

pytestmark = pytest.mark.usefixtures("one_thread")

# -- the reference: the published equations, on the raw state dict ------------------------------------------------


def rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate(x, pos, theta):
    """Rotary positions (Su et al.), the half-split form Llama's checkpoints use: x [heads, n, d], pos [n]."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = pos[:, None].double() * inv[None]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1).float(), torch.cat([ang.sin(), ang.sin()], -1).float()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class RefHead:
    """A head as the published code computes it, with its own KV lists (keys rotated) and an explicit mask."""

    def __init__(self, sd, cfg, layout, embed, lm_head):
        self.sd, self.cfg, self.layout = {k: v.float() for k, v in sd.items()}, cfg, layout
        self.embed, self.target_lm = embed, lm_head
        self.nh, self.nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
        self.hd = cfg["hidden_size"] // self.nh
        self.eps, self.theta = cfg.get("rms_norm_eps", 1e-6), cfg.get("rope_theta", 10000.0)
        self.keys, self.values, self.pos = [], [], []
        self.p = "midlayer." if layout == "eagle3" else "layers.0."

    def lin(self, name, x):
        y = x @ self.sd[name + ".weight"].T
        return y + self.sd[name + ".bias"] if name + ".bias" in self.sd else y

    def step(self, feats, tokens, pos, see):
        """Rows for (feature, token) pairs at positions ``pos``; ``see[i]``: which earlier rows (the KV lists) and
        which of these rows row i attends to. Returns the rows' outputs (the features fed forward)."""
        p, e = self.p, self.embed[tokens]
        if self.layout == "eagle3":
            h = self.lin("fc", feats) if feats.shape[-1] != self.cfg["hidden_size"] else feats
            x_in = torch.cat([rms(e, self.sd[p + "input_layernorm.weight"], self.eps),
                              rms(h, self.sd[p + "hidden_norm.weight"], self.eps)], -1)
            resid = h
        else:
            x_in = resid = self.lin("fc", torch.cat([e, feats], -1))  # layer 0: no input norm
        n = len(tokens)
        q = self.lin(p + "self_attn.q_proj", x_in).view(n, self.nh, self.hd).transpose(0, 1)
        k = self.lin(p + "self_attn.k_proj", x_in).view(n, self.nkv, self.hd).transpose(0, 1)
        v = self.lin(p + "self_attn.v_proj", x_in).view(n, self.nkv, self.hd).transpose(0, 1)
        posv = torch.tensor(pos)
        q, k = rotate(q, posv, self.theta), rotate(k, posv, self.theta)
        self.keys.append(k)
        self.values.append(v)
        K, V = torch.cat(self.keys, 1), torch.cat(self.values, 1)
        K, V = K.repeat_interleave(self.nh // self.nkv, 0), V.repeat_interleave(self.nh // self.nkv, 0)
        att = (q @ K.transpose(1, 2)) / math.sqrt(self.hd)
        att = att.masked_fill(~torch.as_tensor(see)[None], float("-inf")).softmax(-1)
        o = (att @ V).transpose(0, 1).reshape(n, -1)
        h = resid + self.lin(p + "self_attn.o_proj", o)
        m = rms(h, self.sd[p + "post_attention_layernorm.weight"], self.eps)
        g = self.lin(p + "mlp.gate_proj", m)
        return h + self.lin(p + "mlp.down_proj", torch.nn.functional.silu(g) * self.lin(p + "mlp.up_proj", m))

    def logits(self, h):
        """[n, target vocab]: EAGLE-1's target LM head; EAGLE-3's own over its draft vocabulary, mapped by d2t."""
        if self.layout == "eagle":
            return h @ self.target_lm.T
        small = rms(h, self.sd["norm.weight"], self.eps) @ self.sd["lm_head.weight"].T
        full = torch.full((len(h), self.embed.shape[0]), float("-inf"))
        d2t = self.sd.get("d2t", torch.zeros(small.shape[1])).long()
        full[:, torch.arange(small.shape[1]) + d2t] = small
        return full


# -- checkpoints the tests write ----------------------------------------------------------------------------------


def write_checkpoint(folder, layout, tcfg, *, hidden=None, fmt="safetensors", draft_vocab=None, seed=0, extra=None,
                     drop=None, with_embed=False, qkv_bias=False):
    """A published-layout head for a target with config ``tcfg``: random weights, the published names and config."""
    g = torch.Generator().manual_seed(seed)
    H = hidden or tcfg.hidden_size
    nh, nkv, inter = tcfg.num_attention_heads, tcfg.num_key_value_heads, tcfg.intermediate_size
    hd = H // nh
    V = tcfg.vocab_size

    def w(*shape, scale=None):
        return torch.randn(*shape, generator=g) * (scale or 1 / math.sqrt(shape[-1]))

    p = "midlayer." if layout == "eagle3" else "layers.0."
    qin = 2 * H if layout == "eagle3" else H
    sd = {p + "self_attn.q_proj.weight": w(nh * hd, qin), p + "self_attn.k_proj.weight": w(nkv * hd, qin),
          p + "self_attn.v_proj.weight": w(nkv * hd, qin), p + "self_attn.o_proj.weight": w(H, nh * hd),
          p + "mlp.gate_proj.weight": w(inter, H), p + "mlp.up_proj.weight": w(inter, H),
          p + "mlp.down_proj.weight": w(H, inter), p + "post_attention_layernorm.weight": 1 + 0.1 * w(H, scale=1)}
    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": H, "intermediate_size": inter,
           "num_attention_heads": nh, "num_key_value_heads": nkv, "num_hidden_layers": 1, "rms_norm_eps": 1e-5,
           "rope_theta": 500000.0, "max_position_embeddings": 2048, "vocab_size": V, "hidden_act": "silu",
           "torch_dtype": "float16"}
    if layout == "eagle3":
        vd = draft_vocab or V
        used = torch.sort(torch.randperm(V, generator=g)[:vd]).values
        sd.update({"fc.weight": w(H, 3 * tcfg.hidden_size), p + "input_layernorm.weight": 1 + 0.1 * w(H, scale=1),
                   p + "hidden_norm.weight": 1 + 0.1 * w(H, scale=1), "norm.weight": 1 + 0.1 * w(H, scale=1),
                   "lm_head.weight": w(vd, H, scale=1.0), "d2t": used - torch.arange(vd),
                   "t2d": torch.zeros(V, dtype=torch.bool).index_fill_(0, used, True)})
        cfg["draft_vocab_size"] = vd
    else:
        sd.update({"fc.weight": w(H, 2 * H), "fc.bias": 0.1 * w(H, scale=1)})
    if with_embed:
        sd["embed_tokens.weight"] = w(V, H, scale=1.0)
    if qkv_bias:  # Qwen2's heads: biases on q, k and v (and the config may not say so)
        for name, n in (("q_proj", nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd)):
            sd[f"{p}self_attn.{name}.bias"] = 0.5 * w(n, scale=1)
    cfg.update(extra or {})
    for k in drop or ():
        sd.pop(k)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    if fmt == "bin":
        torch.save(sd, folder / "pytorch_model.bin")
    else:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in sd.items()}, str(folder / "model.safetensors"))
    return sd, cfg


def draft_through_runner(head, target, ids, feats, layers):
    """The runner's logits for the root and two tree levels (a fixed tree: 2 children of the root, then 2 children
    of the first), and what each tree row saw; ``feats`` [len(ids) - 1, width] are the target's features."""
    r = HeadRunner(head, target)
    r.add_features(0, feats)
    h_root = r.catch_up(ids)[None]
    lvl1_tokens, lvl2_tokens = layers
    m1 = np.array([[True, False], [False, True]])
    h1 = r.forward_level(h_root.repeat(2, 1), lvl1_tokens, [1, 1], m1)
    m2 = np.array([[True, False, True, False], [True, False, False, True]])  # both below level-1 node 0
    h2 = r.forward_level(h1[[0, 0]], lvl2_tokens, [2, 2], m2)
    return [r.logits(h) for h in (h_root, h1, h2)]


def draft_through_reference(ref, ids, feats, layers):
    n = len(ids) - 1  # rows: (feature t, token t + 1) at position t
    causal = np.tril(np.ones((n, n), dtype=bool))
    h = ref.step(feats, torch.tensor(ids[1:]), list(range(n)), causal)
    h_root = h[-1:]
    lvl1, lvl2 = layers
    see1 = np.concatenate([np.ones((2, n), bool), np.eye(2, dtype=bool)], 1)
    h1 = ref.step(h_root.repeat(2, 1), torch.tensor(lvl1), [n, n], see1)  # level d at position n + d - 1
    see2 = np.concatenate([np.ones((2, n), bool), np.array([[True, False], [True, False]]), np.eye(2, dtype=bool)], 1)
    h2 = ref.step(h1[[0, 0]], torch.tensor(lvl2), [n + 1, n + 1], see2)
    return [ref.logits(x) for x in (h_root, h1, h2)]


def max_diff(ours, ref, vocab_ids):
    return max(float((a[:, vocab_ids] - b[:, vocab_ids]).abs().max()) for a, b in zip(ours, ref))


CASES = [("eagle", "safetensors", None, False), ("eagle", "bin", None, False), ("eagle", "bin", None, True),
         ("eagle3", "safetensors", 40, False), ("eagle3", "bin", None, False)]


@pytest.mark.parametrize("layout,fmt,draft_vocab,qkv_bias", CASES, ids=["eagle-st", "eagle-bin", "eagle-qkv-bias",
                                                                        "eagle3-st-dv40", "eagle3-bin"])
@torch.no_grad()
def test_a_published_checkpoint_drafts_the_reference_logits(tmp_path, layout, fmt, draft_vocab, qkv_bias):
    target = tiny_llama(vocab=96, seed=1, layers=6)
    sd, cfg = write_checkpoint(tmp_path / "head", layout, target.model.config, fmt=fmt, draft_vocab=draft_vocab,
                               qkv_bias=qkv_bias)
    head = load_eagle_head(tmp_path / "head", target)
    assert head.layout == layout
    ids = [3, 17, 42, 8, 61, 5, 29]
    width = 3 * 64 if layout == "eagle3" else 64
    feats = torch.randn(len(ids) - 1, width, generator=torch.Generator().manual_seed(2))
    tree = ([11, 54], [7, 90])
    ours = draft_through_runner(head, target, ids, feats, tree)
    ref = RefHead(sd, cfg, layout, target.model.get_input_embeddings().weight, target.model.lm_head.weight)
    want = draft_through_reference(ref, ids, feats, tree)
    vocab_ids = (torch.arange(len(sd["d2t"])) + sd["d2t"]) if layout == "eagle3" else torch.arange(96)
    ours_full = [torch.full((len(o), 96), float("-inf")).index_copy_(1, vocab_ids, o) if layout == "eagle3" else o
                 for o in ours]
    diff = max_diff(ours_full, want, vocab_ids)
    print(f"\n{layout} ({fmt}, tiny shapes): max |draft logit difference| vs the reference = {diff:.2e}")
    assert diff < 1e-4
    scale = max(float(w[:, vocab_ids].abs().max()) for w in want)
    assert scale > 1.0  # the logits are not all near zero: the comparison has something to compare


@pytest.mark.parametrize("layout", ["eagle", "eagle3"])
@torch.no_grad()
def test_the_default_models_shapes_load_and_draft_the_reference_logits(tmp_path, layout):
    """The default model's shapes (SmolLM2-135M: 576 wide, 9 heads of 64, 3 KV heads, a 1536 MLP, 49,152 tokens):
    a target of those shapes with random weights and 3 layers is enough, as the head reads its features directly."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from specviz_core.runtime.models import LoadedModel

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=3,
                      num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True,
                      attn_implementation="sdpa")
    target = LoadedModel(model=LlamaForCausalLM(cfg).eval(), tokenizer=None, name="smol-shaped", path="smol-shaped",
                         device=torch.device("cpu"), dtype=torch.float32)
    sd, hcfg = write_checkpoint(tmp_path / "head", layout, cfg, draft_vocab=32000 if layout == "eagle3" else None)
    head = load_eagle_head(tmp_path / "head", target)
    ids = [1, 500, 12000, 49000, 77, 3]
    width = 3 * 576 if layout == "eagle3" else 576
    feats = torch.randn(len(ids) - 1, width, generator=torch.Generator().manual_seed(3))
    tree = ([10, 20], [30, 40])
    ours = draft_through_runner(head, target, ids, feats, tree)
    ref = RefHead(sd, hcfg, layout, target.model.get_input_embeddings().weight, target.model.lm_head.weight)
    want = draft_through_reference(ref, ids, feats, tree)
    if layout == "eagle3":
        vocab_ids = torch.arange(32000) + sd["d2t"]
        ours = [torch.full((len(o), 49152), float("-inf")).index_copy_(1, vocab_ids, o) for o in ours]
    else:
        vocab_ids = torch.arange(49152)
    diff = max_diff(ours, want, vocab_ids)
    print(f"\n{layout} (SmolLM2-135M's shapes): max |draft logit difference| vs the reference = {diff:.2e}")
    assert diff < 5e-4


def test_a_head_with_its_own_embedding_reads_tokens_through_it(tmp_path):
    target = tiny_llama(vocab=96, seed=1, layers=4)
    sd, cfg = write_checkpoint(tmp_path / "head", "eagle", target.model.config, with_embed=True)
    head = load_eagle_head(tmp_path / "head", target)
    ids, tree = [3, 17, 42, 8], ([11, 54], [7, 90])
    feats = torch.randn(3, 64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ours = draft_through_runner(head, target, ids, feats, tree)
        ref = RefHead(sd, cfg, "eagle", sd["embed_tokens.weight"], target.model.lm_head.weight)
        want = draft_through_reference(ref, ids, feats, tree)
    assert max_diff(ours, want, torch.arange(96)) < 1e-4


REFUSALS = [
    (dict(hidden=32), "reads features 32 wide (hidden_size), the target's are 64"),
    (dict(extra={"vocab_size": 100}), "vocabulary of 100 tokens, the target 96"),
    (dict(drop=["layers.0.mlp.up_proj.weight"]), "lacks layers.0.mlp.up_proj.weight"),
    (dict(extra={"intermediate_size": 100}), "layers.0.mlp.gate_proj.weight is 128x64, its config makes it 100x64"),
]


@pytest.mark.parametrize("kw,words", REFUSALS, ids=["width", "vocab", "missing", "shape"])
def test_a_head_that_does_not_fit_is_refused_in_one_line(tmp_path, kw, words):
    target = tiny_llama(vocab=96, seed=1, layers=4)
    write_checkpoint(tmp_path / "head", "eagle", target.model.config, **kw)
    with pytest.raises(SpecVizError) as e:
        load_eagle_head(tmp_path / "head", target)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_an_eagle3_head_for_another_width_or_a_d2t_outside_the_vocabulary_is_refused(tmp_path):
    target = tiny_llama(vocab=96, seed=1, layers=4)
    write_checkpoint(tmp_path / "a", "eagle3", target.model.config, extra={"target_hidden_size": 128})
    with pytest.raises(SpecVizError, match="reads features 128 wide \\(target_hidden_size\\)"):
        load_eagle_head(tmp_path / "a", target)
    sd, cfg = write_checkpoint(tmp_path / "b", "eagle3", target.model.config, draft_vocab=10)
    from safetensors.torch import save_file

    sd["d2t"] = sd["d2t"] + 200
    save_file({k: v.contiguous() for k, v in sd.items()}, str(tmp_path / "b" / "model.safetensors"))
    with pytest.raises(SpecVizError, match="outside the target's vocabulary of 96"):
        load_eagle_head(tmp_path / "b", target)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "config.json").write_text("{}")
    with pytest.raises(SpecVizError, match="holds no EAGLE head weights"):
        load_eagle_head(tmp_path / "c", target)


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_a_head_folder_is_described_without_loading_it(tmp_path, fmt):
    target = tiny_llama(vocab=96, seed=1, layers=4)
    write_checkpoint(tmp_path / "e3", "eagle3", target.model.config, fmt=fmt, draft_vocab=40)
    write_checkpoint(tmp_path / "e1", "eagle", target.model.config, fmt=fmt)
    d3, d1 = describe_head_folder(tmp_path / "e3"), describe_head_folder(tmp_path / "e1")
    assert (d3["layout"], d3["reads_width"], d3["vocab_size"], d3["draft_vocab_size"]) == ("eagle3", 64, 96, 40)
    assert (d1["layout"], d1["reads_width"], d1["vocab_size"]) == ("eagle", 64, 96)
    (tmp_path / "model").mkdir()
    target.model.save_pretrained(tmp_path / "model")
    assert describe_head_folder(tmp_path / "model") is None  # a model is not a head
    # A head whose config.json is broken is refused with what is wrong with it, not as "not an EAGLE head".
    (tmp_path / "e1" / "config.json").write_text('{"hidden_size": 64,', encoding="utf-8")
    with pytest.raises(SpecVizError, match=r"its config\.json is not valid JSON \(Expecting property name enclosed "
                                           r"in double quotes at line 1, column 20\)"):
        check_head_folder(str(tmp_path / "e1"))


@torch.no_grad()
def test_an_eagle3_head_narrower_than_its_target_reads_its_own_embedding(tmp_path):
    """EAGLE-3's ``target_hidden_size``: a 32-wide head over a 64-wide target's three layers, with its own 32-wide
    embedding (the official code reads none from the target then); without the embedding it is refused."""
    target = tiny_llama(vocab=96, seed=1, layers=6)
    sd, cfg = write_checkpoint(tmp_path / "head", "eagle3", target.model.config, hidden=32, draft_vocab=50,
                               extra={"target_hidden_size": 64}, with_embed=True)
    head = load_eagle_head(tmp_path / "head", target)
    ids, tree = [3, 17, 42, 8, 61], ([11, 54], [7, 90])
    feats = torch.randn(len(ids) - 1, 3 * 64, generator=torch.Generator().manual_seed(4))
    ours = draft_through_runner(head, target, ids, feats, tree)
    ref = RefHead(sd, cfg, "eagle3", sd["embed_tokens.weight"], target.model.lm_head.weight)
    want = draft_through_reference(ref, ids, feats, tree)
    vocab_ids = torch.arange(50) + sd["d2t"]
    ours = [torch.full((len(o), 96), float("-inf")).index_copy_(1, vocab_ids, o) for o in ours]
    assert max_diff(ours, want, vocab_ids) < 1e-4
    write_checkpoint(tmp_path / "bare", "eagle3", target.model.config, hidden=32, extra={"target_hidden_size": 64})
    with pytest.raises(SpecVizError, match="is 32 wide where the target is 64: it needs its own embed_tokens.weight"):
        load_eagle_head(tmp_path / "bare", target)


@pytest.mark.parametrize("kw", [{"pickle_protocol": 4}, {"_use_new_zipfile_serialization": False}],
                         ids=["protocol-4", "legacy"])
def test_a_bin_saved_any_way_torch_saves_is_described_and_loaded_or_refused_in_one_line(tmp_path, kw):
    """Any .bin is described (its names read from the pickle's opcodes, nothing run); torch's safe loader reads the
    legacy format, and a pickle protocol it cannot read is refused in one line, never unpickled unsafely."""
    target = tiny_llama(vocab=96, seed=1, layers=4)
    sd, _ = write_checkpoint(tmp_path / "h", "eagle3", target.model.config, fmt="bin", draft_vocab=40)
    torch.save(sd, tmp_path / "h" / "pytorch_model.bin", **kw)
    assert describe_head_folder(tmp_path / "h")["layout"] == "eagle3"
    if "pickle_protocol" in kw:
        with pytest.raises(SpecVizError, match="save them as model.safetensors"):
            load_eagle_head(tmp_path / "h", target)
    else:
        assert load_eagle_head(tmp_path / "h", target).layout == "eagle3"


def test_an_eagle3_head_with_its_layer_named_layers_0_is_read_as_eagle3(tmp_path):
    """Some converters name EAGLE-3's midlayer ``layers.0``; its d2t and lm_head say what it is."""
    target = tiny_llama(vocab=96, seed=1, layers=6)
    sd, cfg = write_checkpoint(tmp_path / "h", "eagle3", target.model.config, draft_vocab=40)
    renamed = {k.replace("midlayer.", "layers.0."): v for k, v in sd.items()}
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in renamed.items()}, str(tmp_path / "h" / "model.safetensors"))
    assert describe_head_folder(tmp_path / "h")["layout"] == "eagle3"
    head = load_eagle_head(tmp_path / "h", target)
    ids, tree = [3, 17, 42, 8, 61], ([11, 54], [7, 90])
    feats = torch.randn(len(ids) - 1, 3 * 64, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ours = draft_through_runner(head, target, ids, feats, tree)
        want = draft_through_reference(RefHead(sd, cfg, "eagle3", target.model.get_input_embeddings().weight,
                                               target.model.lm_head.weight), ids, feats, tree)
    vocab_ids = torch.arange(40) + sd["d2t"]
    ours = [torch.full((len(o), 96), float("-inf")).index_copy_(1, vocab_ids, o) for o in ours]
    assert max_diff(ours, want, vocab_ids) < 1e-4

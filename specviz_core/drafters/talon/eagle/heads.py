"""EAGLE draft heads in their published layouts: EAGLE-1/2 and EAGLE-3 checkpoints, loaded and written.

The layouts are those of the official code (SafeAILab/EAGLE, ``eagle/model/cnets1.py`` and ``cnets.py``), which the
serving engines load (``docs/eagle-heads.md``). A checkpoint is a folder with ``config.json`` (a Llama config with
one layer) and ``pytorch_model.bin`` or ``model.safetensors``:

- **EAGLE-1/2** (``eagle``): ``x = fc([e, f])`` (bias unless the config says ``"bias": false``) over the token's
  embedding ``e`` and the target's last hidden state ``f`` (after its final norm: what its LM head reads), then one
  Llama decoder layer *without* an input norm (``layers.0.*``) and no final norm. The target's LM head turns the
  output into logits; the output is also the next draft step's ``f``.
- **EAGLE-3** (``eagle3``): ``fc`` (no bias) fuses three of the target's layers (the inputs of layers 2, n/2 and
  n-3, ``3 x target_hidden_size`` wide) to one width ``h``; ``midlayer`` attends over
  ``[input_layernorm(e), hidden_norm(h)]`` (its q/k/v read ``2 x hidden_size``) with ``h`` as the residual, then
  an MLP; its output (before ``norm``) is the next draft step's feature, and ``lm_head(norm(.))`` gives logits over
  a draft vocabulary of ``draft_vocab_size`` tokens, draft index ``i`` being target token ``i + d2t[i]``.

Row ``t`` of the head pairs the target's feature at position ``t`` with the token at ``t + 1``, at position ``t``
(the official pairing): the first token of the text has no row (:attr:`PublishedHead.first_row`). A checkpoint that
does not fit the target is refused at load in one line naming the mismatch.

A head is written for a serving engine (:data:`SERVING_ENGINES`), as its loader reads it (``docs/eagle-heads.md``):
an EAGLE-3 folder is the same for vLLM and SGLang (``"architectures": ["LlamaForCausalLMEagle3"]``); an EAGLE-1/2
folder differs, vLLM's naming ``LlamaForCausalLM`` (it prefixes ``Eagle`` itself) with no ``fc.bias`` (its EAGLE-1
``fc`` has none, and an unknown weight stops its loader), SGLang's naming ``LlamaForCausalLMEagle`` with an
``fc.bias`` always (its ``fc`` always has one: zeros where the head has none, else it stays random). Neither gets a
``"bias": true`` key, which both engines read as the attention's biases.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import LlamaConfig, LlamaModel
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaMLP, LlamaRMSNorm

from specviz_core.drafters.talon.head import DraftLogits, eagle3_layers
from specviz_core.errors import SpecVizError
from specviz_core.runtime.feature_tap import lm_head_of
from specviz_core.runtime.head_files import EAGLE_LAYOUTS, WEIGHT_FILES, head_folder_layout
from specviz_core.target_rows import top_probs


def _body_config(raw: dict[str, Any]) -> LlamaConfig:
    """The head's decoder layer as a one-layer Llama (no vocabulary: its inputs come as vectors)."""
    keep = {k: v for k, v in raw.items() if k not in ("architectures", "auto_map", "torch_dtype", "dtype")}
    cfg = LlamaConfig(**keep)
    cfg.num_hidden_layers = 1
    cfg.vocab_size = 1
    cfg.pad_token_id = None
    cfg.attention_bias = bool(raw.get("qkv_bias", False))
    cfg.mlp_bias = False
    cfg.use_cache = True
    return cfg


class _NoNorm(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class PublishedHead(nn.Module):
    """What the runner and the training need of a head, common to both layouts."""

    layout: str
    first_row = 1
    """The first token of the text has no row of its own (row t pairs feature t with token t + 1)."""

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__()
        self.raw_config = dict(raw)
        self.body = LlamaModel(_body_config(raw))
        self.body.norm = _NoNorm()
        attn = self.body.layers[0].self_attn
        if attn.o_proj.bias is not None:  # q/k/v biases (Qwen2's heads) come without one on o_proj
            attn.o_proj = nn.Linear(attn.o_proj.in_features, attn.o_proj.out_features, bias=False)
        self.hidden_size = int(raw["hidden_size"])
        self.embed_tokens: nn.Embedding | None = None
        """The checkpoint's own embedding table, when it has one (else the target's is read)."""

    def embedding_for(self, model: Any) -> nn.Module:
        return self.embed_tokens if self.embed_tokens is not None else model.get_input_embeddings()

    @property
    def features(self) -> str:
        return "eagle3" if self.feature_layers else "last"


class Eagle1Head(PublishedHead):
    """EAGLE-1/2's head (``cnets1.py``): ``fc([e, f])``, one decoder layer without an input norm, no final norm."""

    layout = "eagle"

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        h = self.hidden_size
        self.fc = nn.Linear(2 * h, h, bias=bool(raw.get("bias", True)))
        self.body.layers[0].input_layernorm = _NoNorm()
        self.feature_layers = None
        self.feature_width = h
        self.register_buffer("vocab", torch.arange(int(raw["vocab_size"])), persistent=False)

    def forward(self, feats: torch.Tensor, embeds: torch.Tensor, **body_kwargs: Any) -> tuple[torch.Tensor, Any]:
        out = self.body(inputs_embeds=self.fc(torch.cat([embeds, feats], dim=-1)), **body_kwargs)
        return out.last_hidden_state, out

    def logits_for(self, model: Any) -> DraftLogits:
        return DraftLogits(self, model)

    def published_state(self) -> dict[str, torch.Tensor]:
        out = {f"fc.{k}": v for k, v in self.fc.state_dict().items()}
        out.update({f"layers.0.{k}": v for k, v in self.body.layers[0].state_dict().items()})
        if self.embed_tokens is not None:
            out["embed_tokens.weight"] = self.embed_tokens.weight
        return out


class Eagle3MidLayer(nn.Module):
    """EAGLE-3's decoder layer: attention over ``[input_layernorm(e), hidden_norm(h)]`` (2 x hidden wide) with
    ``h`` the residual, then the MLP. It takes ``[e, h]`` as one tensor (the Llama body passes one stream)."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        h = int(cfg.hidden_size)
        self.hidden_size = h
        self.self_attn = LlamaAttention(cfg, layer_idx=0)
        o = self.self_attn.o_proj
        self.self_attn.o_proj = nn.Linear(o.in_features, o.out_features, bias=False)
        for name in ("q_proj", "k_proj", "v_proj"):
            old = getattr(self.self_attn, name)
            setattr(self.self_attn, name, nn.Linear(2 * h, old.out_features, bias=old.bias is not None))
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = LlamaRMSNorm(h, eps=cfg.rms_norm_eps)
        self.hidden_norm = LlamaRMSNorm(h, eps=cfg.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(h, eps=cfg.rms_norm_eps)

    def forward(self, hidden_states: torch.Tensor, attention_mask: Any = None, position_embeddings: Any = None,
                position_ids: Any = None, use_cache: bool = False, **kwargs: Any) -> torch.Tensor:
        e, h = hidden_states[..., : self.hidden_size], hidden_states[..., self.hidden_size:]
        joined = torch.cat([self.input_layernorm(e), self.hidden_norm(h)], dim=-1)
        attn, _ = self.self_attn(joined, attention_mask=attention_mask, position_embeddings=position_embeddings,
                                 position_ids=position_ids, **kwargs)
        h = h + attn
        return h + self.mlp(self.post_attention_layernorm(h))


class Eagle3Head(PublishedHead):
    """EAGLE-3's head (``cnets.py``): ``fc`` fusing three target layers, the midlayer, ``norm`` and its own
    ``lm_head`` over the draft vocabulary (``d2t``)."""

    layout = "eagle3"

    def __init__(self, raw: dict[str, Any], n_target_layers: int) -> None:
        super().__init__(raw)
        h = self.hidden_size
        th = int(raw.get("target_hidden_size") or h)
        vd = int(raw.get("draft_vocab_size") or raw["vocab_size"])
        self.fc = nn.Linear(3 * th, h, bias=False)
        self.body.layers[0] = Eagle3MidLayer(self.body.config)
        self.norm = LlamaRMSNorm(h, eps=float(raw.get("rms_norm_eps", 1e-6)))
        self.lm_head = nn.Linear(h, vd, bias=False)
        self.register_buffer("d2t", torch.zeros(vd, dtype=torch.long))
        self.feature_layers = eagle3_layers(n_target_layers)
        self.feature_width = 3 * th

    @property
    def midlayer(self) -> Eagle3MidLayer:
        return self.body.layers[0]  # type: ignore[return-value]

    @property
    def vocab(self) -> torch.Tensor:
        """The target token id of each draft index."""
        return torch.arange(len(self.d2t), device=self.d2t.device) + self.d2t

    def forward(self, feats: torch.Tensor, embeds: torch.Tensor, **body_kwargs: Any) -> tuple[torch.Tensor, Any]:
        if feats.shape[-1] != self.hidden_size:  # the target's fused layers (its own predictions are one width)
            feats = self.fc(feats)
        out = self.body(inputs_embeds=torch.cat([embeds.to(feats.dtype), feats], dim=-1), **body_kwargs)
        return out.last_hidden_state, out

    def logits_for(self, model: Any) -> Eagle3Logits:
        return Eagle3Logits(self)

    def published_state(self) -> dict[str, torch.Tensor]:
        out = {f"fc.{k}": v for k, v in self.fc.state_dict().items()}
        out.update({f"midlayer.{k}": v for k, v in self.midlayer.state_dict().items()})
        out["norm.weight"] = self.norm.weight
        out["lm_head.weight"] = self.lm_head.weight
        out["d2t"] = self.d2t
        if self.embed_tokens is not None:
            out["embed_tokens.weight"] = self.embed_tokens.weight
        return out


class Eagle3Logits:
    """EAGLE-3's draft logits: its own ``lm_head(norm(h))`` over the draft vocabulary, mapped by ``d2t``."""

    def __init__(self, head: Eagle3Head) -> None:
        self.head = head
        self.vocab = head.vocab

    def __call__(self, feats: torch.Tensor) -> torch.Tensor:
        w = self.head.lm_head.weight
        return nn.functional.linear(self.head.norm(feats.to(w.dtype)), w).float()

    def top(self, feats: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor]:
        ids, probs = top_probs(self(feats), m)
        return self.vocab[ids], probs


# -- reading and writing the folders ---------------------------------------------------------------------------

def _read_state(folder: Path) -> dict[str, torch.Tensor]:
    for name in WEIGHT_FILES:
        f = folder / name
        if not f.is_file():
            continue
        try:
            if name.endswith(".bin"):
                import warnings

                with warnings.catch_warnings():  # a protocol other than torch's default is read all the same
                    warnings.simplefilter("ignore", UserWarning)
                    return torch.load(str(f), map_location="cpu", weights_only=True)
            from safetensors.torch import load_file

            return load_file(str(f))
        except Exception as e:  # a damaged or foreign file: say which, in one line
            if "Unsupported operand" in str(e) or "weights_only" in str(e):
                raise SpecVizError(f"the draft head's weights {f} hold more than tensors, or were pickled with a "
                                   "protocol torch's safe loader cannot read: SpecViz does not run the code a pickle "
                                   "may hold; save them as model.safetensors") from None
            raise SpecVizError(f"the draft head's weights {f} cannot be read ({type(e).__name__}: "
                               f"{str(e).splitlines()[0][:120] if str(e) else 'no detail'})") from None
    raise SpecVizError(f"{folder} holds no EAGLE head weights ({' or '.join(WEIGHT_FILES)})")


def _shape(t: torch.Tensor) -> str:
    return "x".join(str(d) for d in t.shape)


def _fit(state: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], where: str) -> None:
    """Refuse a checkpoint whose weights are missing or shaped otherwise than its config says, naming the first."""
    missing = [k for k in expected if k not in state]
    if missing:
        raise SpecVizError(f"the draft head {where} lacks {missing[0]}"
                           + (f" (and {len(missing) - 1} more weights)" if len(missing) > 1 else ""))
    for k, t in expected.items():
        if tuple(state[k].shape) != tuple(t.shape):
            raise SpecVizError(f"the draft head {where}: {k} is {_shape(state[k])}, its config makes it {_shape(t)}")


def load_eagle_head(path: str | Path, target: Any) -> PublishedHead:
    """The EAGLE head in folder ``path`` (or a hub id in the local cache), checked against ``target``, on its device
    and dtype. Raises SpecVizError with one line naming what does not fit."""
    from specviz_core.runtime.locations import resolve_model_path

    folder = resolve_model_path(str(path)) if not Path(str(path)).expanduser().is_dir() else Path(path).expanduser()
    try:
        raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SpecVizError(f"{folder} is not an EAGLE head folder: its config.json cannot be read ({e})") from None
    state = _read_state(folder)
    layout = head_folder_layout(raw, state.keys())
    if layout == "eagle3" and not any(k.startswith("midlayer.") for k in state):  # a converter's layers.0.* naming
        state = {("midlayer." + k[len("layers.0."):] if k.startswith("layers.0.") else k): v for k, v in state.items()}
    if layout is None:
        raise SpecVizError(f"{folder} is not an EAGLE head: its weights hold neither layers.0.* (EAGLE-1/2) nor "
                           "midlayer.* (EAGLE-3) beside fc.weight")
    cfg = target.model.config
    th, tv = int(cfg.hidden_size), int(cfg.vocab_size)
    where = str(folder)
    for key in ("hidden_size", "num_attention_heads", "intermediate_size", "vocab_size"):
        if key not in raw:
            raise SpecVizError(f"the draft head {where}: its config.json has no {key}")
    head_th = int(raw.get("target_hidden_size") or raw["hidden_size"])
    if head_th != th:
        name = "target_hidden_size" if raw.get("target_hidden_size") else "hidden_size"
        raise SpecVizError(f"the draft head {where} reads features {head_th} wide ({name}), the target's are {th} "
                           f"({target.name}): it was trained for another model")
    if int(raw["vocab_size"]) != tv:
        raise SpecVizError(f"the draft head {where} has a vocabulary of {int(raw['vocab_size']):,} tokens, the target "
                           f"{tv:,} ({target.name}): it was trained for another model's tokenizer")
    # Biases the config does not mention are read from the weights (the official code would leave them random).
    p = "midlayer." if layout == "eagle3" else "layers.0."
    raw = dict(raw, bias=raw.get("bias", "fc.bias" in state),
               qkv_bias=raw.get("qkv_bias", f"{p}self_attn.q_proj.bias" in state))
    head: PublishedHead = Eagle3Head(raw, int(cfg.num_hidden_layers)) if layout == "eagle3" else Eagle1Head(raw)
    expected = head.published_state()
    if layout == "eagle3":
        if "d2t" not in state:  # a full-vocabulary head (the official code drops d2t when the sizes agree)
            if int(raw.get("draft_vocab_size") or tv) != tv:
                raise SpecVizError(f"the draft head {where} has a draft vocabulary of "
                                   f"{int(raw['draft_vocab_size']):,} tokens but no d2t map to the target's")
            state = dict(state, d2t=torch.zeros(tv, dtype=torch.long))
    _fit(state, expected, where)
    if layout == "eagle3":
        ids = torch.arange(len(state["d2t"])) + state["d2t"].long()
        if int(ids.min()) < 0 or int(ids.max()) >= tv:
            raise SpecVizError(f"the draft head {where}: its d2t maps draft tokens to ids outside the target's "
                               f"vocabulary of {tv:,}")
    emb = state.get("embed_tokens.weight")
    h = head.hidden_size
    if emb is None and h != th:  # the official code, too, reads no embedding from a target of another width
        raise SpecVizError(f"the draft head {where} is {h} wide where the target is {th}: it needs its own "
                           "embed_tokens.weight, which its weights lack")
    if emb is not None:
        if tuple(emb.shape) != (tv, h):
            raise SpecVizError(f"the draft head {where}: embed_tokens.weight is {_shape(emb)}, its config makes it "
                               f"{tv}x{h}")
        head.embed_tokens = nn.Embedding(tv, h)
    with torch.no_grad():
        for k, t in head.published_state().items():
            t.copy_(state[k].to(t.dtype))
    dtype = getattr(target, "dtype", torch.float32)
    head = head.to(device=getattr(target, "device", "cpu"), dtype=dtype).eval()
    if layout == "eagle3":
        head.d2t.data = head.d2t.data.long()
    head.source = where
    return head


SERVING_ENGINES = ("vllm", "sglang")
"""The serving engines a head folder is written for (``train-head --for``); the first is the default."""


def _engine(engine: str) -> str:
    if engine not in SERVING_ENGINES:
        raise SpecVizError(f"a head is written for one of {', '.join(SERVING_ENGINES)}, not {engine!r}")
    return engine


def architecture_for(layout: str, engine: str = SERVING_ENGINES[0]) -> str:
    """The class name ``config.json`` gives a head in ``layout`` for ``engine``. SGLang builds the class its registry
    names (``LlamaForCausalLMEagle``, ``LlamaForCausalLMEagle3``); vLLM prefixes ``Eagle`` to an EAGLE-1/2 head's
    class (``LlamaForCausalLM`` becomes its ``EagleLlamaForCausalLM``, ``LlamaForCausalLMEagle`` a class it has not)
    and keeps an EAGLE-3 class that ends in ``Eagle3`` (its registry maps ``LlamaForCausalLMEagle3``)."""
    if layout == "eagle3":
        return "LlamaForCausalLMEagle3"
    return "LlamaForCausalLMEagle" if _engine(engine) == "sglang" else "LlamaForCausalLM"


def _fc_bias(head: PublishedHead) -> torch.Tensor | None:
    """EAGLE-1/2's ``fc`` bias when it has one that is not all zeros (a zero bias is no bias)."""
    b = head.fc.bias if isinstance(head, Eagle1Head) else None
    return b if b is not None and bool(torch.count_nonzero(b.detach())) else None


def written_state(head: PublishedHead, target_config: Any, engine: str = SERVING_ENGINES[0]) -> dict[str, torch.Tensor]:
    """The tensors a head's weights file holds for ``engine`` (float32; ``d2t`` as int64, ``t2d`` as bool)."""
    state = {k: (v.detach().long() if k == "d2t" else v.detach().float()).contiguous().cpu()
             for k, v in head.published_state().items()}
    if isinstance(head, Eagle3Head):  # t2d, as the official checkpoints carry it (only training reads it)
        state["t2d"] = torch.zeros(int(target_config.vocab_size), dtype=torch.bool)
        state["t2d"][head.vocab.cpu()] = True
        return state
    bias = _fc_bias(head)
    if _engine(engine) == "sglang":  # its fc always has a bias: one the file lacks stays as initialised (random)
        state["fc.bias"] = state["fc.bias"] if bias is not None else torch.zeros(head.hidden_size)
    else:  # vLLM's EAGLE-1 fc has no bias, and its loader stops at a weight its model lacks
        if bias is not None:
            raise SpecVizError("this EAGLE-1/2 head's fc has a bias, which vLLM's EAGLE-1 model has not: it cannot "
                               "serve it as trained; write it for SGLang (--for sglang)")
        state.pop("fc.bias", None)
    return state


def config_of(head: PublishedHead, target_config: Any, engine: str = SERVING_ENGINES[0]) -> dict[str, Any]:
    """The ``config.json`` of a head written in its published layout for ``engine`` (the keys the official code and
    the serving engines read)."""
    body = head.body.config
    raw = {
        "architectures": [architecture_for(head.layout, engine)], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": head.hidden_size, "intermediate_size": int(body.intermediate_size),
        "num_attention_heads": int(body.num_attention_heads), "num_key_value_heads": int(body.num_key_value_heads),
        "num_hidden_layers": 1, "rms_norm_eps": float(body.rms_norm_eps),
        "max_position_embeddings": int(body.max_position_embeddings),
        "rope_theta": float((getattr(body, "rope_parameters", None) or {}).get("rope_theta", 10000.0)),
        "vocab_size": int(target_config.vocab_size), "tie_word_embeddings": False, "torch_dtype": "float32",
    }
    if int(getattr(body, "head_dim", 0) or 0) and int(body.head_dim) != head.hidden_size // raw["num_attention_heads"]:
        raw["head_dim"] = int(body.head_dim)
    if isinstance(head, Eagle3Head):
        raw["draft_vocab_size"] = len(head.d2t)
    elif _fc_bias(head) is None:
        # The official loader gives fc a bias unless told "bias": false (a zero fc.bias written for SGLang is then
        # ignored). A head with a bias gets no key at all: vLLM and SGLang read "bias": true as the attention's biases.
        raw["bias"] = False
    return raw


def save_eagle_head(head: PublishedHead, target_config: Any, folder: str | Path, info: dict[str, Any] | None = None,
                    engine: str = SERVING_ENGINES[0]) -> Path:
    """Write ``head`` to ``folder`` in its published layout, as ``engine`` (vLLM unless told ``"sglang"``) loads it:
    ``config.json`` and ``model.safetensors`` (each through a temporary file), and what SpecViz knows of its training
    in ``specviz_head.json``. SpecViz and the official code read either engine's folder."""
    from safetensors.torch import save_file

    folder = Path(folder).expanduser()
    state = written_state(head, target_config, _engine(engine))  # refused before anything is written
    folder.mkdir(parents=True, exist_ok=True)
    files = {"model.safetensors": None, "config.json": json.dumps(config_of(head, target_config, engine), indent=2)}
    if info is not None:
        files["specviz_head.json"] = json.dumps(dict(info, layout=head.layout, written_for=engine), indent=1)
    stale = folder / "pytorch_model.bin"  # read before model.safetensors, by the official loader and by SpecViz
    if stale.exists():
        stale.unlink()
    for name, text in files.items():
        tmp = folder / f".{name}.tmp{os.getpid()}"
        if text is None:
            save_file(state, str(tmp))
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # as any file the user writes (the library makes it private)
        else:
            tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, folder / name)
    return folder


def published_head_for(target: Any, layout: str, vocab: torch.Tensor | None = None) -> PublishedHead:
    """A new head in a published layout shaped for ``target`` (for training): the target's own layer sizes, its
    final norm and LM head rows as the EAGLE-3 head's starting ``norm`` and ``lm_head``."""
    if layout not in EAGLE_LAYOUTS:
        raise SpecVizError(f"layout must be one of {', '.join(EAGLE_LAYOUTS)}, got {layout!r}")
    cfg = target.model.config
    h = int(cfg.hidden_size)
    raw = {"hidden_size": h, "intermediate_size": int(getattr(cfg, "intermediate_size", 4 * h) or 4 * h),
           "num_attention_heads": int(cfg.num_attention_heads),
           "num_key_value_heads": int(getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads),
           "rms_norm_eps": float(getattr(cfg, "rms_norm_eps", 1e-6) or 1e-6),
           "max_position_embeddings": int(getattr(cfg, "max_position_embeddings", 2048) or 2048),
           "rope_theta": float(_rope_theta(cfg)), "vocab_size": int(cfg.vocab_size), "bias": False}
    hd = getattr(cfg, "head_dim", None)
    if hd and int(hd) != h // raw["num_attention_heads"]:
        raw["head_dim"] = int(hd)
    if layout == "eagle":
        return Eagle1Head(raw)
    ids = torch.arange(int(cfg.vocab_size)) if vocab is None else torch.sort(vocab.long().cpu()).values
    raw["draft_vocab_size"] = len(ids)
    head = Eagle3Head(raw, int(cfg.num_hidden_layers))
    with torch.no_grad():
        head.d2t.copy_(ids - torch.arange(len(ids)))
        head.lm_head.weight.copy_(lm_head_of(target.model).weight[ids.to(target.device)].float().cpu())
        norm = getattr(getattr(target.model, "model", None), "norm", None)
        if isinstance(getattr(norm, "weight", None), torch.Tensor) and norm.weight.shape == head.norm.weight.shape:
            w = norm.weight.float().cpu()  # Gemma's norms scale by 1 + weight, Llama's (the head's) by weight
            head.norm.weight.copy_(w + 1 if "gemma" in str(getattr(cfg, "model_type", "")) else w)
    return head


def _rope_theta(cfg: Any) -> float:
    params = getattr(cfg, "rope_parameters", None)
    if isinstance(params, dict) and "rope_theta" in params:
        return float(params["rope_theta"])
    return float(getattr(cfg, "rope_theta", 10000.0) or 10000.0)

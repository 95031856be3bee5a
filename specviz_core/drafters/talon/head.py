"""A draft head for the target: EAGLE's drafter, small enough to train on the user's machine.

The head is one decoder layer of the target's own architecture (its config with one layer) over
``fc([f, e])``: ``f`` the target's last hidden state at the previous position (the feature its LM head
reads), ``e`` the embedding of the token at this position (the target's embedding table, frozen). It
outputs a predicted feature, which the target's LM head (frozen, reused) turns into next-token
logits, and which feeds the next draft step as its ``f``: a tree is drafted one layer per head step
(EAGLE-1, Li et al. 2024).

The ``eagle3`` variant (EAGLE-3, Li et al. 2025; TALON's seed drafts with it) reads, for the committed
tokens, a fusion of three of the target's layers instead of its last: the inputs of layers 2, n/2 and
n-3 (low, middle and high features), concatenated and projected to one width by ``fuse``. Inside the
tree it reads its own output, as the other variant does; trained on tokens alone, with several
unrolled steps on its own predictions (:mod:`specviz_core.training.train`).

Committed rows are always run on the target's real features (:class:`HeadRunner` keeps them as the
target produces them); tree rows run on the head's own predictions and are dropped after each cycle.
Trained heads are kept per model in the user cache (``SPECVIZ_HEADS`` overrides), see
:mod:`specviz_core.training.train`.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import AutoModel, DynamicCache

from specviz_core.drafters.draft_tree import CatchUpClock, rows_kept
from specviz_core.errors import SpecVizError
from specviz_core.runtime import kv
from specviz_core.runtime.attention import attention_pattern, tree_masks
from specviz_core.runtime.feature_tap import lm_head_of
from specviz_core.runtime.head_files import FEATURES, FORMAT_VERSION, head_info, head_paths
from specviz_core.target_rows import top_probs


def eagle3_layers(n_layers: int) -> tuple[int, int, int]:
    """The layers whose inputs EAGLE-3 fuses (its code taps layers 2, n // 2 and n - 3), within a shallow model."""
    return tuple(min(max(i, 0), n_layers - 1) for i in (2, n_layers // 2, n_layers - 3))  # type: ignore[return-value]


def feature_layers_of(features: str, target_config: Any) -> tuple[int, ...] | None:
    """The layers a head of this kind taps (None: the LM head's input)."""
    if features not in FEATURES:
        raise SpecVizError(f"features must be one of {', '.join(FEATURES)}, got {features!r}")
    return eagle3_layers(int(target_config.num_hidden_layers)) if features == "eagle3" else None


def head_config(target_config: Any) -> Any:
    """The target's config with one decoder layer (per-layer lists cut to the last layer's entry)."""
    cfg = copy.deepcopy(target_config)
    cfg.num_hidden_layers = 1
    for name in ("layer_types", "sliding_window_pattern_list"):
        v = getattr(cfg, name, None)
        if isinstance(v, (list, tuple)) and v:
            setattr(cfg, name, list(v[-1:]))
    cfg.use_cache = True
    return cfg


class DraftHead(nn.Module):
    """``fc`` then one decoder layer; the target's embedding and LM head are borrowed, not owned.

    ``vocab``: the token ids the head drafts (EAGLE-3's reduced draft vocabulary: the tokens of its training
    text, most frequent first); its logits are the target's LM head rows of those tokens only, which makes a
    draft step several times cheaper on a large vocabulary. Default: the whole vocabulary.

    ``feature_layers``: the target layers whose inputs the head reads, fused by ``fuse`` (EAGLE-3); None reads
    the target's last hidden state (EAGLE-1). Either way its own predictions are one hidden state wide."""

    def __init__(self, target_config: Any, vocab: torch.Tensor | None = None,
                 feature_layers: tuple[int, ...] | None = None) -> None:
        super().__init__()
        cfg = head_config(target_config)
        h = int(cfg.hidden_size)
        self.hidden_size = h
        self.feature_layers = tuple(feature_layers) if feature_layers else None
        self.feature_width = h * len(self.feature_layers) if self.feature_layers else h
        """How wide the target's features are that the head reads (its own predictions are ``hidden_size``)."""
        if self.feature_layers:  # EAGLE-3: fused to one width, then each input normalised before they are joined
            eps = float(getattr(cfg, "rms_norm_eps", 1e-6) or 1e-6)
            self.fuse = nn.Linear(self.feature_width, h, bias=False)
            self.feature_norm = nn.RMSNorm(h, eps=eps)
            self.embed_norm = nn.RMSNorm(h, eps=eps)
        self.fc = nn.Linear(2 * h, h, bias=False)
        self.body = AutoModel.from_config(cfg)
        self.body.set_input_embeddings(nn.Embedding(1, h))  # inputs come as embeddings: no table of its own
        if vocab is None:
            vocab = torch.arange(int(target_config.vocab_size))
        self.register_buffer("vocab", vocab.long().clone())
        self.register_buffer("temperature", torch.ones(()))
        """Its logits are divided by this (fitted on held-out text after training:
        :func:`specviz_core.training.train.fit_temperature`)."""

    def forward(self, feats: torch.Tensor, embeds: torch.Tensor, **body_kwargs: Any) -> tuple[torch.Tensor, Any]:
        """``feats`` ([b, m, H], or the target's fused features [b, m, feature_width]), ``embeds`` [b, m, H] ->
        predicted features [b, m, H] and the body's output (its cache)."""
        if self.feature_layers:  # the target's layers (raw residual streams, of any scale) or its own prediction
            feats = self.feature_norm(self.fuse(feats) if feats.shape[-1] != self.hidden_size else feats)
            embeds = self.embed_norm(embeds)
        x = self.fc(torch.cat([feats, embeds], dim=-1))
        out = self.body(inputs_embeds=x, **body_kwargs)
        return out.last_hidden_state, out

    layout = "specviz"
    first_row = 0
    """Row 0 of the head takes the first token with a zero feature (heads in EAGLE's layouts have no such row)."""

    @property
    def features(self) -> str:
        return "eagle3" if self.feature_layers else "last"

    def embedding_for(self, model: Any) -> nn.Module:
        """The embedding table the head reads its tokens through: the target's."""
        return model.get_input_embeddings()

    def logits_for(self, model: Any) -> DraftLogits:
        """The head's next-token logits: the target's LM head rows of its draft vocabulary."""
        return DraftLogits(self, model)

    def trained_state(self) -> dict[str, torch.Tensor]:
        """The weights a saved head holds (everything but the placeholder input embedding)."""
        placeholder = self.body.get_input_embeddings().weight
        return {k: v for k, v in self.state_dict(keep_vars=True).items() if v is not placeholder}


class DraftLogits:
    """The head's next-token logits over its draft vocabulary: the target's LM head rows of those tokens, taken
    once (called directly, so the feature tap does not fire). ``top`` maps back to the target's token ids."""

    def __init__(self, head: DraftHead, model: Any) -> None:
        lm = lm_head_of(model)
        self.vocab = head.vocab.to(lm.weight.device)
        whole = len(self.vocab) == lm.weight.shape[0] and bool((self.vocab == torch.arange(
            len(self.vocab), device=self.vocab.device)).all())
        self.weight = lm.weight if whole else lm.weight[self.vocab]  # [V', H]; the whole vocabulary is not copied
        bias = getattr(lm, "bias", None)
        self.bias = bias if bias is None or whole else bias[self.vocab]
        t = getattr(head, "temperature", None)
        self.temperature = float(t) if isinstance(t, torch.Tensor) else 1.0

    def __call__(self, feats: torch.Tensor) -> torch.Tensor:
        """Logits [m, V'] (float32) for features [m, H], at the head's temperature."""
        out = nn.functional.linear(feats.to(self.weight.dtype), self.weight, self.bias).float()
        return out / self.temperature if self.temperature != 1.0 else out

    def top(self, feats: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The m most likely tokens after each feature: (target token ids [r, m], probabilities [r, m])."""
        ids, probs = top_probs(self(feats), m)
        return self.vocab[ids], probs


def save_head(target: Any, head: DraftHead, info: dict[str, Any]) -> Path:
    """Write the head's weights and its description beside them (each through a temporary file)."""
    from safetensors.torch import save_file

    weights, meta = head_paths(target)
    weights.parent.mkdir(parents=True, exist_ok=True)
    tmp = weights.with_suffix(f".tmp{os.getpid()}")
    save_file({k: (v.detach() if k == "vocab" else v.detach().float()).contiguous().cpu()
               for k, v in head.trained_state().items()}, str(tmp))
    os.replace(tmp, weights)
    tmp = meta.with_suffix(f".tmp{os.getpid()}")
    layers = list(head.feature_layers) if head.feature_layers else None
    tmp.write_text(json.dumps(dict(info, features=head.features, feature_layers=layers, version=FORMAT_VERSION),
                              indent=1), encoding="utf-8")
    os.replace(tmp, meta)
    return weights


def load_head(target: Any) -> DraftHead | None:
    """The saved head of this model on the target's device and dtype, or None when none was trained."""
    from safetensors.torch import load_file

    info = head_info(target)
    if info is None:
        return None
    weights, _ = head_paths(target)
    try:
        state = load_file(str(weights))
    except (OSError, ValueError) as e:
        raise SpecVizError(f"the draft head {weights} cannot be read ({e}); train it again: specviz train-head") from None
    vocab = state.get("vocab")
    if vocab is None or vocab.ndim != 1 or not len(vocab) or int(vocab.max()) >= int(target.model.config.vocab_size):
        raise SpecVizError(f"the draft head {weights} does not fit this model; train it again: specviz train-head")
    layers = info.get("feature_layers")
    n_layers = int(target.model.config.num_hidden_layers)
    if layers is not None and (not isinstance(layers, list) or not all(isinstance(i, int) and 0 <= i < n_layers
                                                                       for i in layers)):
        raise SpecVizError(f"the draft head {weights} reads layers this model does not have; train it again: "
                           "specviz train-head")
    head = DraftHead(target.model.config, vocab, tuple(layers) if layers else None)
    state.setdefault("temperature", torch.ones(()))  # a head saved before calibration: as trained
    missing = set(head.trained_state()) - set(state)
    if missing or set(state) - set(head.state_dict()):
        raise SpecVizError(f"the draft head {weights} does not fit this model; train it again: specviz train-head")
    head.load_state_dict(state, strict=False)
    return head.to(device=target.device, dtype=target.dtype).eval()


# -- drafting with a head --------------------------------------------------------------------------------

class HeadRunner:
    """A draft head with a KV cache over the committed tokens, run on the target's real features.

    Row ``j`` of the head's cache takes ``(f[j-1], token j)`` (``f[-1]`` is zero) at position ``j`` and
    predicts the features after token ``j``; a head in EAGLE's layouts has no row for token 0 (``first_row``
    1: its rows and positions start one later, as the official code pairs them). ``add_features`` receives the target's features as its
    forwards produce them; ``catch_up`` runs the committed rows the cache lacks; ``forward_level`` runs
    one layer of a draft tree on the head's predicted features; ``drop_tree`` forgets the tree rows.
    """

    def __init__(self, head: DraftHead, target: Any) -> None:
        self.head = head
        self.target = target
        self.embed = head.embedding_for(target.model)
        self.logits = head.logits_for(target.model)
        self.off = int(head.first_row)
        self.pattern = attention_pattern(head.body.config)
        self.clock = CatchUpClock(target.device)
        self.reset()

    def reset(self) -> None:
        self.cache = DynamicCache()
        self.seen: list[int] = []
        self._buf = torch.zeros((0, self.head.feature_width), device=self.target.device, dtype=self.target.dtype)
        self._n = 0  # rows of the buffer in use
        self.base = 0  # the position of feats[0]: older features are dropped once no catch-up can read them
        self.row_depths: list[int] = []

    @property
    def feats(self) -> torch.Tensor:
        """The target's features kept, of positions ``base..`` ([n, H]): a view of a buffer that grows by doubling, so
        that a cycle's features are written in place. (Concatenated, every cycle copied all of them, the whole
        prompt's until the head next drafts: 5-10 ms a plain cycle for an EAGLE-3 head's three layers on a
        1,500-token prompt, against the plain cycle's 130-250 ms forward.)"""
        return self._buf[: self._n]

    def add_features(self, first_position: int, feats: torch.Tensor) -> None:
        """The target's features of positions ``first_position..`` ([k, H]), replacing any from there on."""
        if first_position < self.base:
            raise SpecVizError("the draft head was given features it has already let go of")
        at = min(first_position - self.base, self._n)
        end = at + len(feats)
        if end > len(self._buf):
            grown = self._buf.new_empty((max(end, 2 * len(self._buf), 64), self._buf.shape[1]))
            grown[:at] = self._buf[:at]
            self._buf = grown
        self._buf[at:end] = feats.to(self._buf.dtype)
        self._n = end

    def _run(self, feats: torch.Tensor, tokens: list[int] | torch.Tensor, positions: np.ndarray, mask: Any | None
             ) -> torch.Tensor:
        """One head step over rows (``tokens`` a list, or a tensor on the device); their predicted features [m, H]."""
        dev = self.target.device
        ids = tokens.to(dev)[None] if isinstance(tokens, torch.Tensor) else torch.tensor([tokens], device=dev)
        with torch.no_grad():
            h, out = self.head(feats[None].to(self.target.dtype), self.embed(ids),
                               position_ids=torch.from_numpy(positions).to(dev)[None],
                               **({"attention_mask": mask} if mask is not None else {}),
                               **kv.cache_arg(self.head.body, self.cache), use_cache=True)
        self.cache = kv.returned_cache(out)
        return h[0]

    def pending(self, ids: list[int]) -> int:
        """The rows :meth:`catch_up` would run to follow ``ids`` now."""
        return len(ids) - max(rows_kept(self.seen, ids), self.off)

    def catch_up(self, ids: list[int]) -> torch.Tensor:
        """Run the committed rows the cache lacks; returns the root's predicted feature [H]."""
        first = max(rows_kept(self.seen, ids), self.off)  # the first token without a row
        if first >= len(ids):
            raise SpecVizError("the draft head needs a token of context before the root")
        if self.base + len(self.feats) < len(ids) - 1 or (first > 0 and first - 1 < self.base):
            raise SpecVizError("the draft head lacks the target's features of the committed tokens")
        kv.crop(self.cache, first - self.off)
        # f[j-1] for each new row j (zero before the first token)
        prev = self.feats[max(first - 1, 0) - self.base: len(ids) - 1 - self.base]
        if first == 0:
            zero = torch.zeros((1, self.head.feature_width), device=self.feats.device, dtype=self.feats.dtype)
            prev = torch.cat([zero, prev], dim=0)
        self.clock.start(len(ids) - first)
        h = self._run(prev, ids[first:], np.arange(first, len(ids)) - self.off, None)[-1]  # only the root's row
        self.clock.stop()
        self.seen = list(ids)
        self.row_depths = []
        keep = max(len(ids) - 2, 0)  # the next catch-up reruns the root at most: older features are done with
        rest = self._buf[keep - self.base: self._n].clone()  # the last row or two: moved to the buffer's start
        self._buf[: len(rest)] = rest
        self._n, self.base = len(rest), keep
        return h

    def forward_level(self, parent_feats: torch.Tensor, tokens: list[int] | torch.Tensor, depths: list[int],
                      tree_mask: np.ndarray | torch.Tensor) -> torch.Tensor:
        """One head step over tree rows (``tree_mask`` [m, r + m] over the rows run so far plus these, as
        :meth:`DraftModelRunner.forward_level`: tokens and mask may be tensors on the device, nothing is read back).
        Returns their predicted features [m, H]."""
        base = len(self.seen) - self.off  # rows in the cache, and the position after the root's
        self.row_depths = self.row_depths + list(depths)
        rows = base - 1 + np.asarray(depths)
        cols = base - 1 + np.asarray(self.row_depths)
        mask = tree_masks(self.pattern, tree_mask, base, self.target.dtype, self.target.device, rows, cols)
        return self._run(parent_feats, tokens, rows, mask)

    def drop_tree(self) -> None:
        """Forget this cycle's tree rows: the next catch-up runs the accepted tokens on the target's features."""
        kv.crop(self.cache, max(len(self.seen) - self.off, 0))
        self.row_depths = []

"""How a model's layers attend, and the tree masks that honour it.

A tree forward passes its own 4-D mask, and transformers then uses that mask as given, for every
layer: a model whose layers attend through a sliding window (Mistral, Phi-3 with a window, Gemma 2/3,
Qwen2/3 with window layers) would silently see the whole cache. So the mask is built here per layer
type: a sliding layer's rows see only keys whose position is less than ``window`` behind their own
(transformers' rule: ``q_pos - k_pos < window``), cached and tree keys alike. Models whose layers
differ take a dict of masks keyed by layer type (the ``causal_mask_mapping`` their forward accepts);
models with one window for every layer take the windowed mask itself.

ALiBi models (BLOOM) add a per-head bias ``slope * key position`` that the model computes from a 2-D
mask; in a tree, siblings share a position, so the bias comes from the tree's positions instead: it is
folded into a per-head mask here, and the model's own bias is switched off for tree forwards
(:func:`prepare_model`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from specviz_core.errors import SpecVizError

FULL = "full_attention"
SLIDING = "sliding_attention"


@dataclass(frozen=True)
class AttentionPattern:
    """Per layer type, the window its rows attend through (None: the whole context)."""

    windows: tuple[tuple[str, int | None], ...]
    """(layer type, window in tokens or None), one per distinct layer type."""
    keyed: bool
    """The model's forward takes a dict of masks keyed by layer type (its layers differ)."""
    alibi_heads: int = 0
    """ALiBi models: the number of heads whose slopes bias the mask (0: not ALiBi)."""

    @property
    def max_window(self) -> int | None:
        ws = [w for _, w in self.windows if w is not None]
        return max(ws) if ws else None

    def describe(self) -> str:
        """For people: ``full``, ``sliding window 4096``, ``full + sliding window 16``."""
        parts = ["full" if w is None else f"sliding window {w}" for _, w in self.windows]
        return " + ".join(dict.fromkeys(parts)) + (", ALiBi" if self.alibi_heads else "")


def attention_pattern(config: Any) -> AttentionPattern:
    """Read the layer pattern from a transformers config; refuse layer types a tree mask cannot express."""
    if getattr(config, "model_type", "") == "bloom":
        return AttentionPattern(((FULL, None),), keyed=False, alibi_heads=int(config.n_head))
    attn_config = getattr(config, "attn_config", None)
    if getattr(config, "alibi", False) or (isinstance(attn_config, dict) and attn_config.get("alibi")):
        raise SpecVizError(f"{getattr(config, 'model_type', 'this model')}'s ALiBi position bias is computed inside "
                           "the model from a 2-D mask, so tree positions cannot reach it (only BLOOM's is supported)")
    window = getattr(config, "sliding_window", None)
    if getattr(config, "use_sliding_window", True) is False:
        window = None
    layer_types = getattr(config, "layer_types", None)
    if layer_types:
        kinds = list(dict.fromkeys(layer_types))
        unknown = [k for k in kinds if k not in (FULL, SLIDING)]
        if unknown:
            raise SpecVizError(f"layers of type {', '.join(unknown)} cannot take a tree mask (only full and "
                               "sliding-window attention can)")
        if SLIDING in kinds and not window:
            kinds = [FULL]  # sliding layers without a window attend to everything
        windows = tuple((k, window if k == SLIDING else None) for k in kinds)
        return AttentionPattern(windows, keyed=len(kinds) > 1 or kinds != [FULL])
    if window:
        return AttentionPattern(((SLIDING, int(window)),), keyed=False)
    return AttentionPattern(((FULL, None),), keyed=False)


def additive_mask(tree_mask: np.ndarray | torch.Tensor, cache_len: int, dtype: torch.dtype, device: torch.device,
                  window: int | None = None, row_positions: np.ndarray | None = None,
                  col_positions: np.ndarray | None = None) -> torch.Tensor:
    """The 4-D additive mask a model takes: [1, 1, n, cache_len + m] for an [n, m] tree mask.

    0 where attention is allowed, the dtype's minimum elsewhere; a float mask, because the eager
    attention path silently ignores a boolean one. Every row sees every cached position, unless
    ``window`` is given: then a row at position p sees only keys at positions > p - window (cached
    key j is at position j; tree column c at ``col_positions[c]``; rows at ``row_positions``). A ``tree_mask``
    given as a tensor (a tree built on the device) is used where it is: no copy to the host.
    """
    n, m = tree_mask.shape
    if isinstance(tree_mask, torch.Tensor):
        on = tree_mask.device
        allowed = torch.ones((n, cache_len + m), dtype=torch.bool, device=on)
        allowed[:, cache_len:] = tree_mask
    else:
        on = torch.device("cpu")
        allowed = torch.ones((n, cache_len + m), dtype=torch.bool)
        allowed[:, cache_len:] = torch.from_numpy(np.asarray(tree_mask, dtype=bool))
    if window is not None:
        if row_positions is None or col_positions is None:
            raise ValueError("a windowed mask needs the positions of its rows and tree columns")
        keys = torch.cat([torch.arange(cache_len), torch.as_tensor(np.asarray(col_positions), dtype=torch.long)])
        rows = torch.as_tensor(np.asarray(row_positions), dtype=torch.long)
        allowed &= ((rows[:, None] - keys[None, :]) < window).to(on)
    out = torch.zeros((n, cache_len + m), dtype=dtype, device=on)
    out.masked_fill_(~allowed, torch.finfo(dtype).min)
    return out.to(device)[None, None]


def tree_masks(pattern: AttentionPattern, tree_mask: np.ndarray, cache_len: int, dtype: torch.dtype,
               device: torch.device, row_positions: np.ndarray, col_positions: np.ndarray
               ) -> torch.Tensor | dict[str, torch.Tensor]:
    """The ``attention_mask`` argument for a tree forward: one mask, or one per layer type."""
    masks = {kind: additive_mask(tree_mask, cache_len, dtype, device, window, row_positions, col_positions)
             for kind, window in pattern.windows}
    if pattern.alibi_heads:
        keys = torch.cat([torch.arange(cache_len), torch.as_tensor(np.asarray(col_positions), dtype=torch.long)])
        bias = alibi_slopes(pattern.alibi_heads)[:, None, None] * keys.float()[None, None, :]  # [H, 1, K]
        masks = {k: (m.float() + bias.to(m.device)).clamp_min(torch.finfo(dtype).min).to(dtype)  # [1, H, n, K]
                 for k, m in masks.items()}
    return masks if pattern.keyed else next(iter(masks.values()))


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's per-head slopes [H] (Press et al.; the geometric sequence BLOOM uses)."""
    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = [2 ** (-8 * (i + 1) / closest) for i in range(closest)]
    if closest != n_heads:
        extra = [2 ** (-8 * (i + 1) / (2 * closest)) for i in range(0, 2 * (n_heads - closest), 2)]
        slopes += extra
    return torch.tensor(slopes, dtype=torch.float32)


def prepare_model(model: Any) -> None:
    """Make a loaded model take tree masks: for BLOOM, its own ALiBi bias is left out when a 4-D mask (which
    carries the bias at tree positions, see :func:`tree_masks`) is passed. Idempotent."""
    inner = getattr(model, "transformer", None)
    if getattr(model.config, "model_type", "") != "bloom" or inner is None or hasattr(inner, "_specviz_alibi"):
        return
    own = inner.build_alibi_tensor

    def build_alibi_tensor(attention_mask: torch.Tensor, num_heads: int, dtype: torch.dtype) -> torch.Tensor:
        if attention_mask.ndim == 4:  # a tree mask: the bias is in it already
            b, _, _, k = attention_mask.shape
            return torch.zeros((b * num_heads, 1, k), dtype=dtype, device=attention_mask.device)
        return own(attention_mask, num_heads, dtype)

    inner.build_alibi_tensor = build_alibi_tensor
    inner._specviz_alibi = True

"""The one target forward of a cycle: a verify block on top of the KV cache, with the tree mask.

Its own module so that the cycle (``cycle``) and the cost-curve measurement (``cost_curve``) share it
without importing each other.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers import DynamicCache

from specviz_core.runtime import kv
from specviz_core.runtime.attention import tree_masks
from specviz_core.runtime.feature_tap import kept_features
from specviz_core.runtime.models import LoadedModel
from specviz_core.target_rows import Verified
from specviz_core.tree import VerifyBlock


def verify_forward(target: LoadedModel, cache: DynamicCache, block: VerifyBlock, cache_len: int,
                   rows: int | None = None) -> Verified:
    """One target forward over a verify block on top of ``cache`` (which grows by ``rows``, at least n). Returns the
    n real rows' logits [n, V] in fp32, and a draft head's features of them where a head taps the target.

    ``rows`` > n pads the block with rows that see only themselves and that no real row sees, so the n rows' logits
    and KV are what they would be alone: on a CPU a forward of 4 or 8 rows can cost less than one of 2 or 3 (the
    matrix kernels' shapes, :func:`~specviz_core.analysis.timing.padded_rows`). The cycle's trim drops the padding
    with every unkept row."""
    dev = target.device
    n = len(block.tokens)
    pad = max(0, (rows or n) - n)
    tokens, positions, mask = block.tokens, block.positions(cache_len), block.mask  # [n], [n], [n, n]
    if pad:
        tokens = np.concatenate([tokens, np.full(pad, tokens[0], dtype=tokens.dtype)])
        positions = np.concatenate([positions, np.full(pad, positions[0], dtype=positions.dtype)])
        mask = np.zeros((n + pad, n + pad), dtype=bool)
        mask[:n, :n] = block.mask
        mask[np.arange(n, n + pad), np.arange(n, n + pad)] = True
    if not pad and _causal(target, block):  # a chain on a plain causal model: the model's own mask is this one
        attention_mask = None
    else:  # [1, 1, rows, cache_len + rows], or one such mask per layer type (sliding windows)
        attention_mask = tree_masks(target.attention, mask, cache_len, target.dtype, dev, positions, positions)
    out = target.model(
        input_ids=torch.from_numpy(tokens).to(dev)[None],  # [1, rows]
        position_ids=torch.from_numpy(positions).to(dev)[None],  # [1, rows]
        attention_mask=attention_mask,
        **kv.cache_arg(target.model, cache),
        use_cache=True,
    )
    return Verified(out.logits[0, :n].float(), kept_features(target.model, n))


def _causal(target: LoadedModel, block: VerifyBlock) -> bool:
    """Whether the block is a chain (each row the child of the one before: an AR cycle, a copied continuation) on a
    model whose every layer attends to the whole context with no bias (no sliding window, no ALiBi): then the causal
    mask the model builds itself is the tree mask, and a forward without one takes the kernels' causal path (the
    one a plain decoding loop takes) instead of reading a mask as large as the context."""
    pattern = target.attention
    if pattern.keyed or pattern.alibi_heads or pattern.max_window is not None:
        return False
    parents = block.parent_rows
    return len(parents) == 1 or bool((parents == np.arange(-1, len(parents) - 1)).all())

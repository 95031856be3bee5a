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
from specviz_core.runtime.models import LoadedModel
from specviz_core.tree import VerifyBlock


def verify_forward(target: LoadedModel, cache: DynamicCache, block: VerifyBlock, cache_len: int,
                   rows: int | None = None) -> torch.Tensor:
    """One target forward over a verify block on top of ``cache`` (which grows by ``rows``, at least n). Returns
    logits [n, V] in fp32.

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
    out = target.model(
        input_ids=torch.from_numpy(tokens).to(dev)[None],  # [1, rows]
        position_ids=torch.from_numpy(positions).to(dev)[None],  # [1, rows]
        # [1, 1, rows, cache_len + rows], or one such mask per layer type (sliding windows)
        attention_mask=tree_masks(target.attention, mask, cache_len, target.dtype, dev, positions, positions),
        **kv.cache_arg(target.model, cache),
        use_cache=True,
    )
    if pad:  # a draft head's tap keeps the real rows' features only
        from specviz_core.drafters.talon.head import retap

        retap(target.model, rows=slice(0, n))
    return out.logits[0, :n].float()


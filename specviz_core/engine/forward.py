"""The one target forward of a cycle: a verify block on top of the KV cache, with the tree mask.

Its own module so that the cycle (``cycle``) and the cost-curve measurement (``cost_curve``) share it
without importing each other.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from specviz_core.runtime import kv
from specviz_core.runtime.attention import tree_masks
from specviz_core.runtime.models import LoadedModel
from specviz_core.tree import VerifyBlock


def verify_forward(target: LoadedModel, cache: DynamicCache, block: VerifyBlock, cache_len: int) -> torch.Tensor:
    """One target forward over a verify block on top of ``cache`` (which grows by n). Returns logits [n, V] in fp32."""
    dev = target.device
    positions = block.positions(cache_len)  # [n]
    out = target.model(
        input_ids=torch.from_numpy(block.tokens).to(dev)[None],  # [1, n]
        position_ids=torch.from_numpy(positions).to(dev)[None],  # [1, n]
        # [1, 1, n, cache_len + n], or one such mask per layer type (sliding windows)
        attention_mask=tree_masks(target.attention, block.mask, cache_len, target.dtype, dev, positions, positions),
        **kv.cache_arg(target.model, cache),
        use_cache=True,
    )
    return out.logits[0].float()

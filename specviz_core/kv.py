"""KV cache surgery: keep the root and the accepted path, drop the rest.

transformers' ``DynamicCache`` only selects along the batch dimension and
``crop`` only cuts a suffix; tree verification needs an index-select along the
sequence dimension, because the kept rows are not contiguous in the verify block.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from .errors import SpecVizError


def cache_length(cache: DynamicCache | None) -> int:
    return 0 if cache is None else int(cache.get_seq_length())


def trim(cache: DynamicCache, cache_len: int, keep_rows: Sequence[int]) -> None:
    """Keep positions ``[0, cache_len)`` plus verify-block rows ``keep_rows``, in order.

    After the call the cache holds ``cache_len + len(keep_rows)`` positions.
    """
    device = None
    index = None
    for layer in cache.layers:
        if isinstance(layer, DynamicSlidingWindowLayer) or not isinstance(layer, DynamicLayer):
            raise SpecVizError(f"KV trimming does not support {type(layer).__name__} caches (sliding-window models)")
        if not layer.is_initialized or layer.keys.numel() == 0:
            continue
        if index is None or layer.keys.device != device:
            device = layer.keys.device
            # keys: [B, heads, S, head_dim]; index: [cache_len + len(keep_rows)]
            index = torch.cat(
                [
                    torch.arange(cache_len, device=device),
                    cache_len + torch.as_tensor(list(keep_rows), dtype=torch.long, device=device),
                ]
            )
        layer.keys = layer.keys.index_select(2, index)
        layer.values = layer.values.index_select(2, index)


def crop(cache: DynamicCache, length: int) -> None:
    """Cut the cache back to its first ``length`` positions."""
    if cache_length(cache) > length:
        trim(cache, length, [])

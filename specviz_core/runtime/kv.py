"""KV cache surgery: keep the root and the accepted path, drop the rest.

transformers' ``DynamicCache`` only selects along the batch dimension and
``crop`` only cuts a suffix; tree verification needs an index-select along the
sequence dimension, because the kept rows are not contiguous in the verify block.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from specviz_core.errors import SpecVizError


@functools.cache
def _cache_keyword(model_class: type) -> str:
    params = inspect.signature(model_class.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def cache_arg(model: torch.nn.Module, cache: DynamicCache | None) -> dict[str, Any]:
    """The KV cache as the keyword ``model``'s forward takes it.

    transformers 5.24 renamed ``past_key_values`` to ``cache`` (the old name warns until 5.40);
    older releases and remote-code models still take ``past_key_values``.
    """
    return {_cache_keyword(type(model)): cache}


def returned_cache(out: Any) -> DynamicCache:
    """The KV cache a forward returned, under either name (see :func:`cache_arg`)."""
    return out["cache"] if "cache" in out else out["past_key_values"]


def cache_length(cache: DynamicCache | None) -> int:
    return 0 if cache is None else int(cache.get_seq_length())


def trim(cache: DynamicCache, cache_len: int, keep_rows: Sequence[int]) -> None:
    """Keep positions ``[0, cache_len)`` plus verify-block rows ``keep_rows``, in order.

    After the call the cache holds ``cache_len + len(keep_rows)`` positions.
    Only the kept verify-block rows move (down into place, a few rows); the committed
    positions are not copied, so a cycle's trim does not grow with the context.
    """
    keep = [int(r) for r in keep_rows]
    end = cache_len + len(keep)
    moved = [(r, i) for i, r in enumerate(keep) if r != i]  # rows ascending, so each moves down or stays
    if not moved and cache_length(cache) == end:  # a chain accepted whole (an AR cycle): nothing to cut or move
        return
    device = None
    src = dst = None
    for layer in cache.layers:
        if isinstance(layer, DynamicSlidingWindowLayer) or not isinstance(layer, DynamicLayer):
            raise SpecVizError(f"KV trimming does not support {type(layer).__name__} caches (sliding-window models)")
        if not layer.is_initialized or layer.keys.numel() == 0:
            continue
        if moved and (src is None or layer.keys.device != device):
            device = layer.keys.device
            src = cache_len + torch.tensor([r for r, _ in moved], dtype=torch.long, device=device)
            dst = cache_len + torch.tensor([i for _, i in moved], dtype=torch.long, device=device)
        # keys: [B, heads, S, head_dim]
        for name in ("keys", "values"):
            t = getattr(layer, name)
            if moved:
                t[:, :, dst] = t[:, :, src]  # the right side is gathered into a new tensor first
            setattr(layer, name, t[:, :, :end])  # a view; the next forward's concatenation copies it anyway


def crop(cache: DynamicCache, length: int) -> None:
    """Cut the cache back to its first ``length`` positions."""
    if cache_length(cache) > length:
        trim(cache, length, [])

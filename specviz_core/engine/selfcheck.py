"""At load: does this model honour a tree mask and tree positions? Checked, not assumed.

A small tree (two siblings at depth 1, a chain to depth 3) is verified in one forward on top of a
cached context longer than any of the model's attention windows, and every node's logits are
compared with a plain forward over its own path (no cache, no custom mask). Then the cache is
trimmed to one accepted path and the next token is run on it, and compared too. A model whose
attention ignores the mask, whose positions come from somewhere else, or whose cache cannot be
trimmed, fails here with one line, instead of decoding a different text without a word.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import DynamicCache

from specviz_core.engine.forward import verify_forward
from specviz_core.errors import SpecVizError
from specviz_core.runtime import kv
from specviz_core.runtime.models import LoadedModel
from specviz_core.tree import DraftTree, flatten

#: Largest logit difference, relative to the logits' scale, that still counts as equal (per dtype).
TOLERANCE = {torch.float32: 1e-3, torch.float16: 3e-2, torch.bfloat16: 6e-2}
#: Context tokens beyond the longest window (so the window is crossed), and the least context.
PAST_WINDOW, MIN_CONTEXT = 8, 24


@dataclass(frozen=True)
class SelfCheck:
    """What the check measured."""

    context: int
    """Tokens of context the tree sat on."""
    nodes: int
    """Tree nodes verified (root included)."""
    max_error: float
    """Largest logit difference from a plain forward, relative to the logits' scale."""
    tolerance: float


def _plain(target: LoadedModel, ids: list[int]) -> torch.Tensor:
    """Logits at every position of ``ids`` from one causal forward, no cache: [len(ids), V]."""
    x = torch.tensor([ids], device=target.device)
    return target.model(input_ids=x, position_ids=torch.arange(len(ids), device=target.device)[None]).logits[0].float()


@torch.no_grad()
def check_tree_support(target: LoadedModel, seed: int = 0) -> SelfCheck:
    """Raise :class:`SpecVizError` (one line) unless tree verification matches plain forwards."""
    window = target.attention.max_window or 0
    n_ctx = min(max(MIN_CONTEXT, window + PAST_WINDOW), target.context_length - 8)
    g = torch.Generator().manual_seed(seed)
    vocab = min(target.vocab_size, int(getattr(target.tokenizer, "vocab_size", None) or target.vocab_size))
    rand = torch.randint(3, max(4, vocab), (n_ctx + 5,), generator=g).tolist()
    ctx, (a, b, c, d, e) = rand[:n_ctx], rand[n_ctx:]
    cache = DynamicCache()
    cache_len = n_ctx - 1
    target.model(input_ids=torch.tensor([ctx[:-1]], device=target.device),
                 position_ids=torch.arange(cache_len, device=target.device)[None], use_cache=True,
                 **kv.cache_arg(target.model, cache))
    tree = DraftTree(ctx[-1])
    na, nb = tree.add(0, a, "draft"), tree.add(0, b, "draft")  # siblings share a position
    nc = tree.add(na, c, "draft")
    nd = tree.add(nc, d, "draft")
    ne = tree.add(nb, e, "draft")
    block = flatten(tree)
    got = verify_forward(target, cache, block, cache_len).logits  # [n, V]
    long_path, short_path = _plain(target, ctx + [a, c, d]), _plain(target, ctx + [b, e])
    want = {0: long_path[n_ctx - 1], na: long_path[n_ctx], nc: long_path[n_ctx + 1], nd: long_path[n_ctx + 2],
            nb: short_path[n_ctx], ne: short_path[n_ctx + 1]}
    tol = TOLERANCE.get(target.dtype, 6e-2)
    scale = 1.0 + float(long_path.abs().max())
    worst, where = 0.0, ""
    for row, node in enumerate(block.order.tolist()):
        err = float((got[row] - want[node]).abs().max()) / scale
        if err > worst:
            worst, where = err, f"the node at depth {tree.depths[node]}"
    # Trim to the accepted path root, a, c and run d as the next cycle would.
    rows = [0] + [int(np.flatnonzero(block.order == n)[0]) for n in (na, nc)]
    kv.trim(cache, cache_len, rows)
    nxt = flatten(DraftTree(d))
    after = verify_forward(target, cache, nxt, cache_len + 3).logits[0]
    err = float((after - long_path[n_ctx + 2]).abs().max()) / scale
    if err > worst:
        worst, where = err, "the first token after a KV trim"
    if not worst <= tol:  # also catches NaN
        raise SpecVizError(
            f"{Path(target.name).name} does not honour the tree mask and positions ({target.attn_implementation} attention, "
            f"{target.attention.describe()}): at {where} its logits differ from a plain forward by {worst:.2g} "
            f"(relative; at most {tol:g} allowed), so it is refused"
        )
    return SelfCheck(context=n_ctx, nodes=len(block.order), max_error=worst, tolerance=tol)
